"""Resume a crawl whose manifest holds 1,000,000 URLs (half pending): start-up time and RSS.

Builds the manifest of an interrupted run (URLs on a local server, half of them done), then
starts `mirror run` on it and measures the time until the first request reaches the server,
and the peak RSS while it crawls for --seconds before a SIGINT stops it.

Usage: python bench/resume_big.py --urls 1000000 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mirror.manifest.writer import Manifest  # noqa: E402


def build_manifest(path: Path, base: str, urls: int) -> float:
    """An interrupted run 1 with `urls` URLs, the first half done. Returns seconds taken."""
    started = time.monotonic()
    Manifest(path).close()  # the real schema
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("BEGIN")
    db.execute("INSERT INTO runs (id, started_at, state, config_digest) "
               "VALUES (1, '2026-01-01T00:00:00Z', 'interrupted', 'x')")
    site = base.split("//", 1)[1].rstrip("/")
    half = urls // 2
    db.executemany(
        "INSERT INTO urls (url, site, run_id, state, mode, depth, redirects_left, via) "
        "VALUES (?, ?, 1, ?, 'page', 1, 10, 'link')",
        ((f"{base}p/{i}", site, "done" if i < half else "pending") for i in range(urls)),
    )
    db.execute("COMMIT")
    db.close()
    return time.monotonic() - started


async def serve(first: dict[str, float]) -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.Response:
        first.setdefault("at", time.monotonic())
        first["count"] = first.get("count", 0) + 1
        return web.Response(text="<p>leaf</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/"


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def bench(work: Path, urls: int, seconds: float) -> None:
    first: dict[str, float] = {}
    runner, base = await serve(first)
    try:
        archive = work / "archive"
        archive.mkdir(parents=True)
        built = build_manifest(archive / "manifest.sqlite3", base, urls)
        size = (archive / "manifest.sqlite3").stat().st_size / 1e6
        print(f"manifest: {urls} URLs ({urls // 2} pending), {size:.0f} MB, built in {built:.1f}s")
        toml = work / "site.toml"
        toml.write_text(f'[site]\nname = "big"\nstart_urls = ["{base}"]\n'
                        'output_dir = "archive"\n[crawl]\nworkers = 16\nper_host = 16\n')
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mirror", "run", str(toml), "--quiet", cwd=work,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        peak = 0.0
        deadline = started + seconds
        while time.monotonic() < deadline and proc.returncode is None:
            await asyncio.sleep(0.2)
            try:
                peak = max(peak, peak_rss_mb(proc.pid))
            except OSError:
                break
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        if "at" not in first:
            print("no request reached the server:", err.decode()[-1000:])
            return
        print(f"first request after  {first['at'] - started:.2f}s (process start to server)")
        print(f"requests in {seconds:.0f}s   {first['count']} "
              f"({first['count'] / (time.monotonic() - first['at']):.0f}/s after the first)")
        print(f"peak RSS             {peak:.0f} MB")
        print(f"exit after SIGINT    {proc.returncode}: {out.decode().strip()}")
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, default=1_000_000)
    p.add_argument("--seconds", type=float, default=20.0, help="crawl this long, then SIGINT")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirror-big-") as work:
        asyncio.run(bench(Path(work), args.urls, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
