"""Time from SIGTERM to exit while `mirror run` reads a 2-million-URL sitemap index.

A local site (aiohttp on 127.0.0.1) has a robots.txt pointing to an index of 40 sitemaps of
50,000 URLs each, generated as they are streamed; every listed page answers. `mirror run`
(robots on, [scope] max_sitemap_urls as given: the default 100,000, or 0 for no limit)
is sent SIGTERM once it has requested `--after` sitemaps; the figure is the time from the
signal to its exit (exit status 130 expected), the median of `--repeat` runs, with the load
average of the machine.

Usage: python bench/sitemap_signals.py [--repeat 3] [--after 3] [--budget 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
SITEMAPS, PER_SITEMAP = 40, 50_000


def site_app(base: list[str], requested: list[str]) -> web.Application:
    async def robots(_r: web.Request) -> web.StreamResponse:
        return web.Response(text=f"User-agent: *\nSitemap: {base[0]}index.xml\n")

    async def index(_r: web.Request) -> web.StreamResponse:
        rows = "".join(f"<sitemap><loc>{base[0]}sm/{i}.xml</loc></sitemap>"
                       for i in range(SITEMAPS))
        return web.Response(text=f"<sitemapindex {NS}>{rows}</sitemapindex>",
                            content_type="application/xml")

    async def sitemap(request: web.Request) -> web.StreamResponse:
        requested.append(request.path)
        i = request.match_info["i"]
        resp = web.StreamResponse(headers={"Content-Type": "application/xml"})
        await resp.prepare(request)
        try:
            await resp.write(f"<urlset {NS}>".encode())
            for start in range(0, PER_SITEMAP, 5000):
                await resp.write("".join(f"<url><loc>{base[0]}p/{i}/{j}</loc></url>"
                                         for j in range(start, start + 5000)).encode())
            await resp.write(b"</urlset>")
        except ConnectionResetError:  # the run stopped and hung up: nothing to tell
            pass
        return resp

    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(text=f"<title>{request.path}</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/index.xml", index)
    app.router.add_get("/sm/{i}.xml", sitemap)
    app.router.add_get("/{tail:.*}", page)
    return app


async def one_run(folder: Path, after: int, budget: int) -> tuple[float, int]:
    base: list[str] = []
    requested: list[str] = []
    runner = web.AppRunner(site_app(base, requested), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    base.append(f"http://{host}:{port}/")
    (folder / "site.toml").write_text(
        f'[site]\nname = "bench"\nstart_urls = ["{base[0]}"]\noutput_dir = "archive"\n'
        f"[scope]\nrobots = true\nmax_sitemap_urls = {budget}\n")
    root = Path(__file__).resolve().parent.parent
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "site.toml", "-q", cwd=folder,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(root)})
    try:
        while len(requested) < after and proc.returncode is None:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # well into reading them
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 600)
        return time.monotonic() - sent, code
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--after", type=int, default=3, help="sitemaps requested before SIGTERM")
    ap.add_argument("--budget", type=int, default=100_000, help="[scope] max_sitemap_urls")
    args = ap.parse_args()
    times, codes = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            took, code = asyncio.run(one_run(Path(tmp), args.after, args.budget))
        times.append(took)
        codes.append(code)
        print(f"SIGTERM -> exit {code} in {took:.2f}s", flush=True)
    print(f"{SITEMAPS} x {PER_SITEMAP} sitemap URLs, max_sitemap_urls={args.budget}: "
          f"median {statistics.median(times):.2f}s, max {max(times):.2f}s "
          f"(exit codes {sorted(set(codes))}); load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
