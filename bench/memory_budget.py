"""Peak memory of `mirror run` against a hostile site on loopback, and the delay one deeply
nested page causes to other pages' links (issue 32).

The site: a start page linking 32 endless chunked HTML bodies, 32 pages of 30 MB, a
`"<table><tr><td>" * 40000` page and 50 ordinary pages. `mirror run` runs in its own process;
every 0.1 s the RSS of it and its helper processes (read from /proc) is summed; the peak
sum is printed, with each run's wall time and the load average. Linux only.

Usage: python bench/memory_budget.py [--runs 3] [--big-mb 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

CHUNK = b"<p>" + b"x" * 65533


def site(big_mb: int) -> web.Application:
    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            while True:  # until the crawler hangs up
                await resp.write(CHUNK)
        except (ConnectionError, OSError):
            return resp

    big = b"<!doctype html><title>big</title>" + CHUNK * (big_mb * 16)
    pages = {"/table": b"<table><tr><td>" * 40000}
    pages |= {f"/p{i}": f'<a href="/leaf{i}">l</a>'.encode() for i in range(50)}
    pages |= {f"/leaf{i}": b"leaf" for i in range(50)}
    pages["/"] = "".join([*(f'<a href="/endless{i}">e</a>' for i in range(32)),
                          *(f'<a href="/big{i}">b</a>' for i in range(32)),
                          '<a href="/table">t</a>',
                          *(f'<a href="/p{i}">p</a>' for i in range(50))]).encode()

    async def page(request: web.Request) -> web.Response:
        path = request.path
        body = big if path.startswith("/big") else pages.get(path)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/endless{n}", endless)
    app.router.add_get("/{tail:.*}", page)
    return app


def serve(app: web.Application) -> str:
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(tcp.start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}/"


def tree_rss(pid: int) -> int:
    """RSS in bytes of `pid` and its children (the helpers)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def _children(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(k) for k in kids]


def one_run(base: str, folder: Path) -> tuple[float, int, str]:
    (folder / "site.toml").write_text(
        f'[site]\nname = "hostile"\nstart_urls = ["{base}"]\noutput_dir = "archive"\n'
        "[scope]\nrobots = false\nsitemaps = false\n")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mirror", "run", str(folder / "site.toml"),
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.1)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    budget = err.count("(parse-budget)")
    return wall, peak, f"exit {proc.returncode}, {budget} parse-budget warnings"


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--runs", type=int, default=3)
    args.add_argument("--big-mb", type=int, default=30)
    opts = args.parse_args()
    base = serve(site(opts.big_mb))
    walls, peaks = [], []
    for n in range(opts.runs):
        with tempfile.TemporaryDirectory(prefix="mirror-membench-") as tmp:
            wall, peak, outcome = one_run(base, Path(tmp))
        walls.append(wall)
        peaks.append(peak)
        print(f"run {n + 1}: {wall:.1f} s, peak RSS {peak / 1e6:.0f} MB, {outcome}, "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"median of {opts.runs}: {statistics.median(walls):.1f} s, peak RSS (mirror and its "
          f"helpers) {statistics.median(peaks) / 1e6:.0f} MB; max {max(peaks) / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
