"""A hostile sitemap site on 127.0.0.1: robots.txt points to an index of `sitemaps` sitemaps
of `per_sitemap` URLs each, generated and streamed as they are sent (nothing held in memory);
every listed page answers. Paths in `hold` wait (up to HOLD seconds) before answering: a
run is then known to be at that step when a signal is sent.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from aiohttp import web
from conftest import TestSite

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
#: longest a held answer waits (the test's own timeout is what bounds a run)
HOLD = 60.0
CHUNK = 5000  # URLs written at a time


@dataclass
class SitemapSite(TestSite):
    sitemaps: int = 10
    per_sitemap: int = 50_000
    hold: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)

    __test__ = False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/index.xml", self._index)
        app.router.add_get("/sm/{i:\\d+}.xml", self._sitemap)
        app.router.add_get("/p/{i:\\d+}/{j:\\d+}", self._page)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _held(self, request: web.Request) -> None:
        self.log.append(request.path)
        if request.path in self.hold:
            for _ in range(int(HOLD * 20)):
                if self.release.is_set():
                    return
                await asyncio.sleep(0.05)

    async def _robots(self, request: web.Request) -> web.StreamResponse:
        await self._held(request)
        return web.Response(text=f"User-agent: *\nSitemap: {self.base}index.xml\n",
                            content_type="text/plain")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        await self._held(request)
        rows = "".join(f"<sitemap><loc>{self.base}sm/{i}.xml</loc></sitemap>"
                       for i in range(self.sitemaps))
        return web.Response(body=f"<sitemapindex {NS}>{rows}</sitemapindex>".encode(),
                            content_type="application/xml")

    async def _sitemap(self, request: web.Request) -> web.StreamResponse:
        await self._held(request)
        i = int(request.match_info["i"])
        resp = web.StreamResponse(headers={"Content-Type": "application/xml"})
        await resp.prepare(request)
        await resp.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>'.encode())
        for start in range(0, self.per_sitemap, CHUNK):
            stop = min(start + CHUNK, self.per_sitemap)
            await resp.write("".join(f"<url><loc>{self.base}p/{i}/{j}</loc></url>"
                                     for j in range(start, stop)).encode())
        await resp.write(b"</urlset>")
        await resp.write_eof()
        return resp

    async def _page(self, request: web.Request) -> web.StreamResponse:
        await self._held(request)
        return web.Response(text=f"<title>{request.path}</title>page", content_type="text/html")
