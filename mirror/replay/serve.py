"""Offline replay server (aiohttp.web): Wayback-style URLs over the archive, never the live web."""

from __future__ import annotations

import asyncio
import functools
import html
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlencode

from aiohttp import web
from warcio.timeutils import datetime_to_http_date, iso_date_to_datetime

from mirror.archive.warcread import ReadError
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader, Run
from mirror.replay.captures import Capture, CaptureIndex, Record
from mirror.replay.export import REWRITTEN_TYPES
from mirror.replay.exportpages import page_rows
from mirror.replay.fuzzy import rename_callback
from mirror.replay.origins import CONTENT, Origins, listen_for_content
from mirror.replay.pages import (
    PAGE,
    RAW,
    Target,
    history_href,
    number,
    parse_target,
    replay_path,
    run_timestamp,
)
from mirror.replay.seal import FETCH_SCRIPT, FRAMES_SELF, NO_SCRIPT, SEAL_SCRIPT
from mirror.replay.views import Views, library_link, not_archived, ui_response
from mirror.store.files import ArchiveFiles, archive_files
from mirror.web.http import HTML_TYPES
from mirror.web.rewrite import html_title, rewrite_css_bytes, rewrite_html
from mirror.web.urls import DEFAULT_IGNORE_QUERY, join
from mirror.webapp import (
    Access,
    HostNames,
    Middleware,
    access_guard,
    host_guard,
    host_names,
    is_loopback,
    read_only_guard,
    start_app,
    until_signalled,
)

__all__ = ["REPLAY_CSP", "Replay", "Site", "Source", "make_app", "parse_target", "render",
           "replay_path", "run_timestamp", "serve_forever", "start_replay_server"]

log = logging.getLogger(__name__)

#: archived responses may load only from this server (O2); navigation stays free
REPLAY_CSP = ("default-src 'self' data: blob: 'unsafe-inline' 'unsafe-eval'; "
              f"{FRAMES_SELF}; form-action 'self'; base-uri 'self'; frame-ancestors 'self'")
#: the only archived headers replayed; Set-Cookie, HSTS, CSP, Service-Worker-Allowed, Link,
#: Alt-Svc, Clear-Site-Data and the rest are dropped (O2)
PASSED_HEADERS = frozenset({"content-type", "content-language", "last-modified"})
PAGE_SIZE = 100
LAN_REFUSAL = ("403 Forbidden: this archive is served to the local network only to whoever "
               "opened the address `mirror serve --lan` printed (it ends in ?token=...)")
RELOAD_EVERY = 2.0  # seconds between checks whether the archive grew (a folder's)
T = TypeVar("T")


def replay_headers(record: Record, content_type: str | None, encoded: bool) -> dict[str, str]:
    """Headers for a replayed response: the allowed archived ones, then ours."""
    out = {n: v for n, v in record.headers if n.lower() in PASSED_HEADERS - {"content-type"}}
    if content_type:
        out["Content-Type"] = content_type
    if encoded and record.header("Content-Encoding"):  # could not decode: let the browser
        out["Content-Encoding"] = record.header("Content-Encoding") or ""
    out["Content-Security-Policy"] = REPLAY_CSP
    out["Cache-Control"] = "no-cache"
    if record.date:
        out["Memento-Datetime"] = datetime_to_http_date(iso_date_to_datetime(record.date))
    return out


def render(record: Record, url: str, timestamp: str, raw: bool = False,
           modifier: str = "", asked: str | None = None) -> web.Response:
    """The response for one archived record: redirects to the rewritten target, HTML and CSS
    rewritten to point into this server (links and redirects keep `modifier`: inside a
    frame page's mp_ frame they stay mp_, so no banner is ever nested), every body served
    decoded (identity). `asked`: the URL a fuzzy match answers, whose JSONP callback name
    the body then calls."""
    if 300 <= record.status < 400 and record.header("Location") and not raw:
        target = join(url, record.header("Location") or "")
        return web.Response(status=302, headers={
            "Location": replay_path(timestamp, target, modifier),
            "Content-Security-Policy": REPLAY_CSP, "X-Archive-Status": str(record.status)})
    body, decoded = record.decoded()
    content_type = record.content_type
    mapper = functools.partial(_address, timestamp, modifier)
    if not decoded and not raw and record.mime in REWRITTEN_TYPES:  # its links would go live
        raw_link = html.escape(replay_path(timestamp, url, RAW))
        return _ui(502, "Undecodable", "<p>This capture's body cannot be decoded, so its "
                   f'links cannot be rewritten: <a href="{raw_link}">as archived</a>.</p>')
    if decoded and not raw and record.mime in HTML_TYPES:
        body = rewrite_html(body, url, content_type, mapper,
                            head=SEAL_SCRIPT + FETCH_SCRIPT).body
        content_type = "text/html; charset=utf-8"  # re-serialised as HTML, XHTML too
    elif decoded and not raw and record.mime == "text/css":
        body = rewrite_css_bytes(body, url, content_type, mapper)
        content_type = "text/css; charset=utf-8"
    elif decoded and asked is not None:
        body = rename_callback(body, asked, url)
    headers = replay_headers(record, content_type, not decoded)
    if raw:  # as archived: not sealed, so no script runs
        headers["Content-Security-Policy"] += f"; {NO_SCRIPT}"
    return web.Response(status=record.status, body=body, headers=headers)


def _address(timestamp: str, modifier: str, url: str) -> str:
    return replay_path(timestamp, url, modifier)


class Source:
    """The archive, loaded again when a run adds to it: when the index is rebuilt or a WARC
    file is closed (checked at most every 2 s; every 30 s in an object store). A ``.open``
    file is read as it was then: reading it again as it grows would cost a full
    decompression every time. `where` is the archive folder, or its files in a store."""

    def __init__(self, where: Path | ArchiveFiles, ignore_query: tuple[str, ...]) -> None:
        self.files, self.ignore_query = archive_files(where), ignore_query
        self.folder = self.files.local
        self.archive = CaptureIndex.load(self.files, ignore_query)
        self._manifest = self.files.manifest()  # fetched here and on reload, never in the loop
        self._stamp, self._checked = self.files.stamp(), time.monotonic()
        self._lock = asyncio.Lock()
        self.info: dict[tuple[str, int], tuple[str | None, int]] = {}  # title and size cache

    async def get(self) -> CaptureIndex:
        every = RELOAD_EVERY if self.folder is not None else self.files.reload_every
        if time.monotonic() - self._checked >= every:
            async with self._lock:
                self._checked = time.monotonic()
                stamp = await asyncio.to_thread(self.files.stamp)
                if stamp != self._stamp:
                    self.archive = await asyncio.to_thread(
                        CaptureIndex.load, self.files, self.ignore_query)
                    self._manifest = await asyncio.to_thread(self.files.manifest)
                    self._stamp = stamp
        return self.archive

    def runs(self) -> list[Run]:
        return self._ask_manifest(lambda m: m.runs.all()) or []

    async def manifest(self, query: Callable[[ManifestReader], T]) -> T | None:
        """`query` on the manifest, opened for it in a thread; None when there is none."""
        return await asyncio.to_thread(self._ask_manifest, query)

    def _ask_manifest(self, query: Callable[[ManifestReader], T]) -> T | None:
        path = self._manifest if self.folder is None else ArchiveLayout(self.folder).manifest
        if path is None:
            return None
        try:
            manifest = ManifestReader(path)
        except ManifestError:
            return None
        try:
            return query(manifest)
        finally:
            manifest.close()

    async def title(self, archive: CaptureIndex, cap: Capture) -> str | None:
        return (await asyncio.to_thread(self.page_info, archive, cap))[0]

    def page_info(self, archive: CaptureIndex, cap: Capture) -> tuple[str | None, int]:
        key = (cap.filename, cap.offset)
        if key not in self.info:
            try:
                record = archive.read(cap)
                body = record.decoded()[0]
                title = (html_title(body, record.content_type)
                         if record.mime in HTML_TYPES else None)
                self.info[key] = (title, len(body))
            except ReadError:
                self.info[key] = (None, 0)
        return self.info[key]


class Replay:
    """Request handlers; all state is the Source."""

    def __init__(self, source: Source, site: Site) -> None:
        self.source, self.site = source, site
        self.views = Views(source, site.name, site.library)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        if request.headers.get("Service-Worker") == "script":
            return _ui(403, "Refused", "<p>Archived pages cannot install service workers.</p>")
        path = request.raw_path.partition("?")[0]
        if path == "/":
            return await self.landing(request)
        if path in self.views.routes:
            return await self.views.routes[path](request)
        target = parse_target(request.raw_path)
        if target is None:
            return self._from_referer(request)
        if target.mode == "list":  # the captures of a URL: its history page
            raise web.HTTPFound(history_href(target.url))
        archive = await self.source.get()
        cap = archive.closest(target.url, target.timestamp)
        asked: str | None = None  # the URL asked, when a fuzzy match stands for it
        if cap is None:
            cap, asked = archive.fuzzy(target.url, target.timestamp), target.url
            if cap is None:
                return not_archived(archive, target.url)
        if target.mode == "latest":
            raise web.HTTPFound(replay_path(cap.timestamp, cap.url))
        if target.mode == "replay" and _wants_frame(request, archive, cap):
            return await self.views.frame(archive, cap, request.get(CONTENT, ""))
        return await self._record(archive, cap, target.mode, asked)

    async def _record(self, archive: CaptureIndex, cap: Capture, mode: str,
                      asked: str | None = None) -> web.Response:
        try:
            record = await asyncio.to_thread(archive.read, cap)
        except ReadError as exc:
            log.warning("cannot replay %s: %s", cap.url, exc)
            return _ui(500, "Unreadable", f"<p>{html.escape(str(exc))}</p>")
        resp = await asyncio.to_thread(render, record, cap.url, cap.timestamp, mode == "raw",
                                       PAGE if mode == "page" else "", asked)
        if asked is not None:  # answered by another URL of the same path (fuzzy.py)
            resp.headers["X-Archive-Fuzzy-Match"] = cap.url
        if mode == "replay":  # a browser's page gets the frame page at this address
            resp.headers["Vary"] = "Sec-Fetch-Dest"
        return resp

    def _from_referer(self, request: web.Request) -> web.StreamResponse:
        """A path a script built from the site's root (fetch('/api')), or the address an
        archived page shows (static/fetch.js gives it its archived path): send it to the
        same site and time as the page that asked, as pywb does (mp_ if it asked from a
        frame); failing a Referer that says, the page's cookie (`mirror_at`) does."""
        referer = parse_target(_path_of(request.headers.get("Referer", "")))
        if referer is None or referer.mode == "list":
            referer = _page_cookie(unquote(request.cookies.get(PAGE_COOKIE, "")))
        if referer is None:
            return _ui(404, "Not found", "<p>Not a page of this server.</p>")
        url = join(referer.url, request.raw_path)
        raise web.HTTPFound(replay_path(referer.timestamp, url,
                                        PAGE if referer.mode == "page" else ""))

    async def landing(self, request: web.Request) -> web.Response:
        archive = await self.source.get()
        query = request.query.get("q", "").strip().lower()
        show_all = request.query.get("all") == "1"
        page = number(request.query.get("page", "")) or 1
        caps = sorted((c for c in archive.latest() if show_all or _is_page(archive, c)),
                      key=lambda c: c.url)
        if query:
            caps = [c for c in caps if query in c.url.lower()
                    or query in (await self._info(archive, c))[0].lower()]
        shown = caps[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        rows = []
        for cap in shown:
            title, size = await self._info(archive, cap)
            rows.append((replay_path(cap.timestamp, cap.url), cap.url, title,
                         archive.status_and_mime(cap)[0], size))
        home = archive.key(self.site.start_urls[0]) if self.site.start_urls else None
        body = (f"{library_link(self.site.library)}"
                f"<h1>{html.escape(self.site.name)}: archived pages</h1>"
                f"{_text_search_form()}{_runs_table(self.source.runs(), home)}"
                f"{_search_form(query, show_all)}"
                f"<p>{len(caps)} {'URLs' if show_all else 'pages'}; newest capture of each. "
                f"{_pager(page, len(caps), query, show_all)}</p>"
                '<table class="pages"><tr><th>page</th><th>status</th>'
                f"<th>bytes</th></tr>{page_rows(rows)}</table>")
        return _ui(200, f"{self.site.name} archive", body)

    async def _info(self, archive: CaptureIndex, cap: Capture) -> tuple[str, int]:
        title, size = await asyncio.to_thread(self.source.page_info, archive, cap)
        return title or "", size


def _is_page(archive: CaptureIndex, cap: Capture) -> bool:
    status, mime = archive.status_and_mime(cap)
    return mime in HTML_TYPES or (status is not None and 300 <= status < 400)


def _wants_frame(request: web.Request, archive: CaptureIndex, cap: Capture) -> bool:
    """A browser opening an HTML page itself (not in a frame, not a script's fetch) gets the
    banner above it; clients that send no Sec-Fetch-Dest (curl, tests) get the page."""
    if request.headers.get("Sec-Fetch-Dest") != "document":
        return False
    status, mime = archive.status_and_mime(cap)
    return mime in HTML_TYPES and not (status is not None and 300 <= status < 400)


#: the cookie static/fetch.js sets: "<timestamp><modifier> <origin of the archived site>"
PAGE_COOKIE = "mirror_at"


def _page_cookie(value: str) -> Target | None:
    stamp, _, site = value.partition(" ")
    target = parse_target(f"/{stamp}/{site}/")
    return target if target is not None and target.mode in ("page", "replay") else None


def _path_of(url: str) -> str:
    return "/" + url.split("://", 1)[-1].partition("/")[2] if "://" in url else ""


def _ui(status: int, title: str, body: str) -> web.Response:
    return ui_response(status, title, body)


def _runs_table(runs: list[Run], home: str | None) -> str:
    """The runs; each links to the start page as that run found it (its closest capture)."""
    rows = "".join(
        f"<tr><td>{_run_link(r, home)}</td><td>{html.escape(r.started_at)}</td>"
        f"<td>{html.escape(r.finished_at or '')}</td><td>{html.escape(r.state)}</td></tr>"
        for r in runs)
    return ('<h2>Runs</h2><div class="scroll"><table><tr><th>run</th><th>started</th>'
            f"<th>finished</th><th>state</th></tr>{rows}</table></div>" if rows else "")


def _run_link(run: Run, home: str | None) -> str:
    stamp = run_timestamp(run.started_at)
    if home is None or stamp is None:
        return str(run.id)
    return f'<a href="{html.escape(replay_path(stamp, home))}">{run.id}</a>'


def _text_search_form() -> str:
    return ('<form method="get" action="/_search" role="search"><input type="search" '
            'name="q" placeholder="words in the pages" aria-label="Search the text"> '
            "<button>Search the text</button></form>")


def _search_form(query: str, show_all: bool) -> str:
    checked = " checked" if show_all else ""
    return ('<h2>Pages</h2><form method="get" action="/"><input type="search" name="q" '
            f'value="{html.escape(query)}" placeholder="URL or title"> <label><input '
            f'type="checkbox" name="all" value="1"{checked}> every URL</label> '
            "<button>Search</button></form>")


def _pager(page: int, total: int, query: str, show_all: bool) -> str:
    links = []
    for label, n in (("previous", page - 1), ("next", page + 1)):
        if 1 <= n <= (total + PAGE_SIZE - 1) // PAGE_SIZE:
            params = {"q": query, "page": str(n), **({"all": "1"} if show_all else {})}
            links.append(f'<a href="/?{html.escape(urlencode(params))}">{label}</a>')
    return " ".join(links)


@dataclass(frozen=True)
class Site:
    """What replay knows of the site beyond its archive (from its site file)."""

    name: str = "mirror"
    ignore_query: tuple[str, ...] = DEFAULT_IGNORE_QUERY
    start_urls: tuple[str, ...] = ()
    library: str = ""  # started by `mirror ui`: its page of the site (the way back)


def make_app(folder: Path | ArchiveFiles, site: Site = Site(),
             middlewares: Sequence[Middleware] = (), source: Source | None = None,
             origins: Origins | None = None) -> web.Application:
    """The replay app of `folder`'s archive (read through `source` when given one); with
    `origins`, archived pages on a port of their own (see origins.py: listen_for_content)."""
    split = [origins.middleware()] if origins else []
    app = web.Application(middlewares=[*middlewares, *split])
    replay = Replay(source or Source(folder, site.ignore_query), site)
    if origins:
        origins.own = frozenset({"/", *replay.views.routes})
    app.router.add_route("*", "/{tail:.*}", replay.handle)
    return app


async def start_replay_server(
    folder: Path | ArchiveFiles, site: Site = Site(), *, host: str = "127.0.0.1", port: int = 0,
    access: Access | None = None,
) -> tuple[web.AppRunner, str]:
    """Start the replay server; returns (runner, base URL ending in '/'). Call cleanup().
    On a loopback address it answers only to loopback Host headers (DNS rebinding). With
    `access` (--lan) it answers only to `host`'s names and loopback ones, only to GET and
    HEAD, and only to browsers holding `access`'s cookie (named after the port). Archived
    pages are served from a second port (origins.py), behind the same doors."""
    hosts = HostNames(host_names(host) if access else frozenset())
    doors = [host_guard(hosts)] if access or is_loopback(host) else []
    if access:
        doors += [read_only_guard, access_guard(access, LAN_REFUSAL)]
    origins = Origins()
    runner, base = await start_app(make_app(folder, site, doors, origins=origins), host, port)
    await listen_for_content(runner, host, origins)
    bound = runner.addresses[0][1]
    hosts.bind(*origins.banner, *origins.content)
    if access:
        access.cookie = f"mirror_serve_{bound}"
    return runner, hosts.base(base, bound)


async def serve_forever(folder: Path | ArchiveFiles, site: Site, *, host: str, port: int,
                        lan: Callable[[str, str], str] | None = None) -> int:
    """`mirror serve`: serve until SIGINT or SIGTERM, then stop cleanly (exit 0). With `lan`
    (--lan), read-only behind a new access token; `lan(base, token)` is what to print."""
    access = Access() if lan else None
    runner, base = await start_replay_server(folder, site, host=host, port=port,
                                             access=access)
    label = archive_files(folder).label
    try:
        if access and lan:
            print(f"serving {label}\n{lan(base, access.token)}", flush=True)
        else:
            print(f"serving {label} at {base} (Ctrl-C to stop)", flush=True)
        await until_signalled()
    finally:
        await runner.cleanup()
    return 0
