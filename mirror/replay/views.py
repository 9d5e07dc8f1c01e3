"""Handlers of the replay server's pages about captures: frame page, history, compare, search."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlencode

from aiohttp import web

from mirror.replay.banner import BANNER_JS, CAPTURE_INFO, CaptureInfo, capture_info, frame_page
from mirror.replay.captures import Capture, CaptureIndex
from mirror.replay.exportpages import html_page, shown_url
from mirror.replay.history import COMPARE_STYLE, compare_html, history_html
from mirror.replay.origins import CONTENT, framed_policy
from mirror.replay.pagedata import NO_MANIFEST, ArchiveSource, Problem, compare_sides, page_history
from mirror.replay.pages import COMPARE_CSP, FRAME_CSP, UI_CSP, parse_target, run_timestamp
from mirror.replay.searchpage import SEARCH_STYLE, run_search, search_form, search_html

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = Path(__file__).parent / "static"


def ui_response(status: int, title: str, body: str, *, csp: str = UI_CSP,
                style: str = "") -> web.Response:
    head = f"<style>{style}</style>" if style else ""
    return web.Response(status=status, body=html_page(title, body, head), headers={
        "Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": csp,
        "Cache-Control": "no-cache"})


def not_archived(archive: CaptureIndex, url: str) -> web.Response:
    search = "/?" + urlencode({"q": shown_url(archive.key(url))[:80]})
    return ui_response(404, "Not in this archive", (
        f"<h1>Not in this archive</h1><p><b>{html.escape(shown_url(url))}</b> was not "
        "archived, so it cannot be shown offline (mirror never fetches from the live "
        f'web). <a href="{html.escape(search)}">Search the archive</a> or go to '
        '<a href="/">the list of pages</a>.</p>'))


def library_link(library: str) -> str:
    """The way back to the app's page of the site, when `mirror ui` started this server."""
    return (f'<p class="back"><a href="{html.escape(library)}">◀ back to the library</a></p>'
            if library else "")


class Views:
    """Handlers by path (`routes`), and the frame page the replay serves to browsers."""

    def __init__(self, source: ArchiveSource, site_name: str, library: str = "") -> None:
        self.source, self.site_name = source, site_name
        self.library = library  # the app's page of the site, when `mirror ui` started us
        self.script = (STATIC / "banner.js").read_bytes()
        self.routes: dict[str, Handler] = {
            "/_history": self.history, "/_compare": self.compare, "/_search": self.search,
            CAPTURE_INFO: self.capture, BANNER_JS: self.banner_js}

    # -- the frame page and its banner ---------------------------------------------------
    async def info(self, archive: CaptureIndex, cap: Capture) -> CaptureInfo:
        status = archive.status_and_mime(cap)[0]
        history = await self.source.manifest(lambda m: m.texts.page_history(cap.url))
        runs = [c.run_id for c in history or () if run_timestamp(c.warc_date) == cap.timestamp]
        title = await self.source.title(archive, cap)
        return capture_info(archive.captures_of(cap.url), cap, status,
                            runs[-1] if runs else None, title)

    async def frame(self, archive: CaptureIndex, cap: Capture, content: str = "") -> web.Response:
        """The banner above the page; the page from `content` (the archived pages' origin)
        when there is one, else from here."""
        info = await self.info(archive, cap)
        body = frame_page(info, self.site_name, self.library, content)
        return web.Response(body=body, headers={
            "Content-Type": "text/html; charset=utf-8",
            "Content-Security-Policy": framed_policy(FRAME_CSP, content) if content
            else FRAME_CSP, "Cache-Control": "no-cache", "Vary": "Sec-Fetch-Dest"})

    async def capture(self, request: web.Request) -> web.Response:
        """What a frame address (/<ts>mp_/<url>) shows, for the banner script."""
        target = parse_target(request.query.get("path", ""))
        archive = await self.source.get()
        cap = archive.closest(target.url, target.timestamp) if target else None
        if cap is None:
            return web.json_response({"error": "not in this archive"}, status=404,
                                     headers={"Cache-Control": "no-store"})
        info = await self.info(archive, cap)
        return web.json_response(info.as_json(), headers={"Cache-Control": "no-store"})

    async def banner_js(self, request: web.Request) -> web.Response:
        return web.Response(body=self.script, headers={
            "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff"})

    # -- a URL's history and comparisons -------------------------------------------------
    async def history(self, request: web.Request) -> web.Response:
        url = request.query.get("url", "").strip()
        if not url:
            return ui_response(400, "History", "<p>Which page? <code>/_history?url=</code>"
                               "followed by its URL.</p>")
        found = await page_history(self.source, url)
        if not found.rows:
            return not_archived(await self.source.get(), url)
        return ui_response(200, f"History of {shown_url(found.key)}",
                           library_link(self.library) + history_html(found.key, found.rows))

    async def compare(self, request: web.Request) -> web.Response:
        """?a=<capture id>&b=<capture id>, or ?url=<url>&from_run=A&to_run=B (the URL's
        newest capture in or before each run); the changed passages, or with ?whole=1 the
        whole text."""
        sides = await compare_sides(self.source, request.query)
        if isinstance(sides, Problem):
            return ui_response(sides.status, "Compare", f"<p>{sides.html}</p>")
        old, new = sides
        whole = request.query.get("whole") == "1"
        content = request.get(CONTENT, "")
        return ui_response(200, f"Changes to {shown_url(new.url)}",
                           library_link(self.library) + compare_html(old, new, whole, content),
                           csp=framed_policy(COMPARE_CSP, content) if content else COMPARE_CSP,
                           style=COMPARE_STYLE)

    # -- full-text search ----------------------------------------------------------------
    async def search(self, request: web.Request) -> web.Response:
        form = search_form(request.query)
        results = await self.source.manifest(lambda m: run_search(m, form))
        if results is None:
            return ui_response(404, "Search", f"<p>{NO_MANIFEST}</p>")
        title = f"{form.query} · search" if form.query else "Search"
        return ui_response(400 if results.error else 200, title, search_html(form, results),
                           style=SEARCH_STYLE)
