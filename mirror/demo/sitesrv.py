"""A small static-site server (aiohttp.web) for `mirror demo`, the tests and the benchmarks."""

from __future__ import annotations

import argparse
import asyncio
import mimetypes
import os
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from aiohttp import web

from mirror.web.http import REDIRECT_STATUSES
from mirror.webapp import start_app, until_signalled

# (monotonic time, method, path_qs) of every request, in arrival order; kept whole on purpose.
RequestLog = list[tuple[float, str, str]]
REQUEST_LOG = web.AppKey("request_log", RequestLog)

DEMO_SITE = Path(__file__).with_name("site")  # the bundled site `mirror demo` serves
REDIRECTS_FILE = "_redirects"
MAX_CACHED_SIZE = 1 << 20  # files up to 1 MiB are served from memory after their first read
NOT_FOUND_BODY = b"<!doctype html>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n"

# mimetypes depends on the host's tables; pin the types the demo and bench sites use.
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".css": "text/css",
    ".js": "text/javascript",
    ".json": "application/json",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".txt": "text/plain",
}


def content_type(path: str) -> str:
    """The Content-Type header value for a file name."""
    ext = os.path.splitext(path)[1].lower()
    if ext in _TYPES:
        return _TYPES[ext]
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


def parse_redirects(text: str, source: str = REDIRECTS_FILE) -> dict[str, tuple[int, str]]:
    """Parse `PATH STATUS TARGET` lines ('#' starts a comment) into {path: (status, target)}."""
    rules: dict[str, tuple[int, str]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[0].startswith("/") or not parts[1].isdigit():
            raise ValueError(f"{source}:{lineno}: expected 'PATH STATUS TARGET', got {raw!r}")
        status = int(parts[1])
        if status not in REDIRECT_STATUSES:
            raise ValueError(f"{source}:{lineno}: {status} is not a redirect status")
        rules[parts[0]] = (status, parts[2])
    return rules


@dataclass(frozen=True, slots=True)
class _File:
    """A file's validators and, when small, its bytes (stale once mtime or size changes)."""

    mtime_ns: int
    size: int
    headers: dict[str, str]
    body: bytes | None


class _SiteHandler:
    """Serves one directory tree; all per-app state lives here."""

    def __init__(self, root: Path, latency: float, log: RequestLog) -> None:
        self.root = os.path.realpath(root)
        self.latency = latency
        self.log = log
        self._files: dict[str, _File] = {}
        self._redirects: dict[str, tuple[int, str]] = {}
        self._redirects_mtime: int | None = None
        self._load_redirects()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.log.append((time.monotonic(), request.method, request.path_qs))
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        self._load_redirects()
        rule = self._redirects.get(request.path)
        if rule is not None:
            status, target = rule
            return web.Response(status=status, headers={"Location": target})
        return self._serve_file(request)

    def _load_redirects(self) -> None:
        # Re-read when the file changes, so tests may edit a site while it is served.
        path = os.path.join(self.root, REDIRECTS_FILE)
        try:
            mtime: int | None = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._redirects_mtime:
            return
        text = Path(path).read_text(encoding="utf-8") if mtime is not None else ""
        self._redirects = parse_redirects(text, path)
        self._redirects_mtime = mtime

    def _resolve(self, url_path: str) -> str | None:
        """The real file-system path for a URL path, or None if it would leave the root."""
        segments = url_path.split("/")
        if any(s == ".." or "\\" in s or "\x00" in s for s in segments):
            return None
        real = os.path.realpath(os.path.join(self.root, *[s for s in segments if s]))
        if real != self.root and not real.startswith(self.root + os.sep):
            return None  # a symlink pointing out of the root
        if real == os.path.join(self.root, REDIRECTS_FILE):
            return None  # the server's own configuration, not part of the site
        return real

    def _serve_file(self, request: web.Request) -> web.StreamResponse:
        real = self._resolve(request.path)
        if real is None:
            return _not_found()
        try:
            st = os.stat(real)
            if stat.S_ISDIR(st.st_mode):
                if not request.path.endswith("/"):
                    location = request.rel_url.raw_path + "/"
                    return web.Response(status=301, headers={"Location": location})
                real = self._resolve(request.path + "index.html")  # it may be a symlink too
                if real is None:
                    return _not_found()
                st = os.stat(real)
            if not stat.S_ISREG(st.st_mode):
                return _not_found()
            entry = self._entry(real, st)
        except OSError:  # missing, not a directory, unreadable: all look missing from outside
            return _not_found()
        if _not_modified(request, entry.headers["ETag"], st.st_mtime):
            return web.Response(status=304, headers=_validators(entry.headers))
        if entry.body is None:
            return web.FileResponse(real, headers=entry.headers)
        return web.Response(body=entry.body, headers=entry.headers)

    def _entry(self, real: str, st: os.stat_result) -> _File:
        entry = self._files.get(real)
        if entry is not None and entry.mtime_ns == st.st_mtime_ns and entry.size == st.st_size:
            return entry
        headers = {
            "Content-Type": content_type(real),
            "Last-Modified": formatdate(st.st_mtime, usegmt=True),
            # Same form as aiohttp's FileResponse, which serves the files too big to cache.
            "ETag": f'"{st.st_mtime_ns:x}-{st.st_size:x}"',
        }
        body = None
        if st.st_size <= MAX_CACHED_SIZE:
            with open(real, "rb") as f:
                body = f.read()
        entry = _File(st.st_mtime_ns, st.st_size, headers, body)
        self._files[real] = entry
        return entry


def _validators(headers: dict[str, str]) -> dict[str, str]:
    return {"ETag": headers["ETag"], "Last-Modified": headers["Last-Modified"]}


def _not_modified(request: web.Request, etag: str, mtime: float) -> bool:
    """RFC 9110 13.1: If-None-Match wins; If-Modified-Since is used only without it."""
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        tags = [t.strip() for t in if_none_match.split(",")]
        return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)
    since = request.if_modified_since
    return since is not None and int(mtime) <= since.timestamp()


def _not_found() -> web.Response:
    return web.Response(
        status=404, body=NOT_FOUND_BODY, headers={"Content-Type": "text/html; charset=utf-8"}
    )


def make_site_app(root: Path, *, latency: float = 0.0) -> web.Application:
    """An app serving the files under root; app[REQUEST_LOG] records every request."""
    if not Path(root).is_dir():
        raise NotADirectoryError(f"site root is not a directory: {root}")
    app = web.Application()
    log: RequestLog = []
    app[REQUEST_LOG] = log
    app.router.add_route("*", "/{path:.*}", _SiteHandler(Path(root), latency, log).handle)
    return app


async def start_site_server(
    root: Path, *, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0
) -> tuple[web.AppRunner, str]:
    """Start serving root; returns (runner, base URL ending in '/'). Call runner.cleanup()."""
    return await start_app(make_site_app(root, latency=latency), host, port)


async def _serve(args: argparse.Namespace) -> None:
    runner, base_url = await start_site_server(
        args.root, host=args.host, port=args.port, latency=args.latency
    )
    try:
        print(base_url, flush=True)
        await until_signalled()
    finally:
        app = runner.app
        await runner.cleanup()
        if args.log is not None:
            with open(args.log, "w", encoding="utf-8") as f:
                f.writelines(f"{t:.6f} {method} {path}\n" for t, method, path in app[REQUEST_LOG])


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: serve ROOT until SIGINT/SIGTERM; prints the base URL as the first stdout line."""
    parser = argparse.ArgumentParser(prog="python -m mirror.demo.sitesrv", description=__doc__)
    parser.add_argument("root", type=Path, help="directory to serve")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: any free port)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait per response")
    parser.add_argument(
        "--log", type=Path, help="on exit, write one 'TIME METHOD PATH' line per request here"
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except (NotADirectoryError, ValueError, OSError) as exc:
        print(f"sitesrv: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
