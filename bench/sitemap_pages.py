"""Pages a sitemap adds: a generated site where half the pages are linked only from it.

A local site (aiohttp on 127.0.0.1) has N pages; the home page and the pages link only to
the even ones, and /sitemap.xml lists all N. `mirror run` (default settings, robots.txt
on; the site has none, so /sitemap.xml is read) crawls it with `[scope] sitemaps` off and
on; the figure is how many pages each run stored and the report's sitemap_only_pages.

Usage: python bench/sitemap_pages.py [--pages 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_mirror import run_mirror_async  # noqa: E402


def site_app(pages: int) -> web.Application:
    paths = [f"/p/{i}.html" for i in range(pages)]
    linked = paths[::2]

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/sitemap.xml":
            base = f"http://{request.host}"
            rows = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
            return web.Response(
                text=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}'
                     "</urlset>", content_type="application/xml")
        if request.path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in linked)
        elif request.path in paths:
            i = paths.index(request.path)
            links = "".join(f'<a href="{linked[(i + k) % len(linked)]}">x</a>' for k in (1, 2))
        else:
            return web.Response(status=404)
        return web.Response(text=f"<html><body><p>page {request.path}</p>{links}</body></html>",
                            content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


async def one_run(pages: int, sitemaps: bool) -> tuple[int, int, float]:
    """(pages stored, sitemap_only_pages, seconds) of one `mirror run`."""
    runner = web.AppRunner(site_app(pages), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    with tempfile.TemporaryDirectory(prefix="mirror-sitemap-") as tmp:
        site = Path(tmp) / "site.toml"
        site.write_text(f'[site]\nname = "s"\nstart_urls = ["http://127.0.0.1:{port}/"]\n'
                        f"[scope]\nsitemaps = {'true' if sitemaps else 'false'}\n")
        started = time.monotonic()
        try:
            await run_mirror_async(site)
        finally:
            await runner.cleanup()
        took = time.monotonic() - started
        report = json.loads((Path(tmp) / "archive" / "s" / "reports" / "1.json").read_text())
    stored = report["content_types"].get("text/html", 0) - 1  # the home page
    return stored, report.get("sitemap_only_pages", 0), took


async def main(pages: int) -> None:
    off = await one_run(pages, False)
    on = await one_run(pages, True)
    print(f"{pages} pages, half linked only from the sitemap:")
    print(f"  sitemaps off: {off[0]} pages stored in {off[2]:.1f} s")
    print(f"  sitemaps on:  {on[0]} pages stored in {on[2]:.1f} s, "
          f"{on[1]} reached only through the sitemap (added: {on[0] - off[0]})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    asyncio.run(main(parser.parse_args().pages))
