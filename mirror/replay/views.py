"""Handlers of the replay server's pages about captures: frame page, history, compare, search."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar
from urllib.parse import urlencode

from aiohttp import web

from mirror.archive.manifest_queries import ManifestReader
from mirror.replay.banner import BANNER_JS, CAPTURE_INFO, CaptureInfo, capture_info, frame_page
from mirror.replay.captures import Capture, CaptureIndex
from mirror.replay.export import html_page, shown_url
from mirror.replay.history import (
    COMPARE_STYLE,
    Side,
    capture_at_run,
    compare_html,
    history_html,
    index_rows,
    manifest_rows,
)
from mirror.replay.pages import (
    COMPARE_CSP,
    FRAME_CSP,
    UI_CSP,
    number,
    parse_target,
    run_timestamp,
)
from mirror.replay.searchpage import SEARCH_STYLE, run_search, search_form, search_html

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = Path(__file__).parent / "static"
NO_MANIFEST = ("<p>This archive has no manifest (<code>mirror run</code> writes it), so it "
               "has no history of runs and no text to search or compare.</p>")


class ArchiveSource(Protocol):
    """What the views read: the capture index, the manifest, a capture's title."""

    async def get(self) -> CaptureIndex: ...

    async def manifest(self, query: Callable[[ManifestReader], T]) -> T | None: ...

    async def title(self, archive: CaptureIndex, cap: Capture) -> str | None: ...


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


class Views:
    """Handlers by path (`routes`), and the frame page the replay serves to browsers."""

    def __init__(self, source: ArchiveSource, site_name: str) -> None:
        self.source, self.site_name = source, site_name
        self.script = (STATIC / "banner.js").read_bytes()
        self.routes: dict[str, Handler] = {
            "/_history": self.history, "/_compare": self.compare, "/_search": self.search,
            CAPTURE_INFO: self.capture, BANNER_JS: self.banner_js}

    # -- the frame page and its banner ---------------------------------------------------
    async def info(self, archive: CaptureIndex, cap: Capture) -> CaptureInfo:
        status = archive.status_and_mime(cap)[0]
        history = await self.source.manifest(lambda m: m.page_history(cap.url))
        runs = [c.run_id for c in history or () if run_timestamp(c.warc_date) == cap.timestamp]
        title = await self.source.title(archive, cap)
        return capture_info(archive.captures_of(cap.url), cap, status,
                            runs[-1] if runs else None, title)

    async def frame(self, archive: CaptureIndex, cap: Capture) -> web.Response:
        info = await self.info(archive, cap)
        return web.Response(body=frame_page(info, self.site_name), headers={
            "Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": FRAME_CSP,
            "Cache-Control": "no-cache", "Vary": "Sec-Fetch-Dest"})

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
        archive = await self.source.get()
        key = archive.key(url)
        history = await self.source.manifest(lambda m: m.page_history(key))
        caps = archive.captures_of(url)
        if history:
            rows = manifest_rows(history)
        elif caps:  # an archive without a manifest: what the index says
            rows = index_rows(caps, [(archive.status_and_mime(c)[0], archive.original(c).digest)
                                     for c in caps])
        else:
            return not_archived(archive, url)
        return ui_response(200, f"History of {shown_url(key)}", history_html(key, rows))

    async def compare(self, request: web.Request) -> web.Response:
        """?a=<capture id>&b=<capture id>, or ?url=<url>&from_run=A&to_run=B (the URL's
        newest capture in or before each run)."""
        q = request.query
        if "url" in q:
            ids = await self._ids_at_runs(q.get("url", ""), q.get("from_run", ""),
                                          q.get("to_run", ""))
        else:
            ids = _ints(q.get("a", ""), q.get("b", ""))
        if isinstance(ids, web.Response):
            return ids
        sides = await self.source.manifest(lambda m: [_side(m, i) for i in sorted(ids)])
        if sides is None:
            return ui_response(404, "Compare", NO_MANIFEST)
        old, new = sides
        if old is None or new is None:
            return ui_response(404, "Compare", "<p>No such capture in this archive.</p>")
        return ui_response(200, f"Changes to {shown_url(new.url)}", compare_html(old, new),
                           csp=COMPARE_CSP, style=COMPARE_STYLE)

    async def _ids_at_runs(self, url: str, from_run: str, to_run: str
                           ) -> tuple[int, int] | web.Response:
        runs = _ints(from_run, to_run)
        if isinstance(runs, web.Response):
            return runs
        key = (await self.source.get()).key(url)
        history = await self.source.manifest(lambda m: m.page_history(key))
        if history is None:
            return ui_response(404, "Compare", NO_MANIFEST)
        old, new = (capture_at_run(history, r) for r in runs)
        if old is None or new is None:
            run = runs[0] if old is None else runs[1]
            return ui_response(404, "Compare", f"<p><b>{html.escape(shown_url(key))}</b> "
                               f"has no capture in or before run {run}.</p>")
        return old.capture_id, new.capture_id

    # -- full-text search ----------------------------------------------------------------
    async def search(self, request: web.Request) -> web.Response:
        form = search_form(request.query)
        results = await self.source.manifest(lambda m: run_search(m, form))
        if results is None:
            return ui_response(404, "Search", NO_MANIFEST)
        title = f"{form.query} · search" if form.query else "Search"
        return ui_response(400 if results.error else 200, title, search_html(form, results),
                           style=SEARCH_STYLE)


def _ints(first: str, second: str) -> tuple[int, int] | web.Response:
    a, b = number(first), number(second)
    if a is None or b is None:
        return ui_response(400, "Compare", "<p>Compare what? <code>/_compare?a=ID&amp;b=ID"
                           "</code> (capture ids, from a page's history) or <code>/_compare"
                           "?url=URL&amp;from_run=A&amp;to_run=B</code>.</p>")
    return a, b


def _side(m: ManifestReader, capture_id: int) -> Side | None:
    where = m.capture_url(capture_id)
    if where is None:
        return None
    url, date = where
    runs = [c.run_id for c in m.page_history(url) if c.capture_id == capture_id]
    return Side(capture_id, url, date, runs[0] if runs else None, m.page_text(capture_id))
