"""The app's pages about one page of a site: its history, and what changed between two of its
captures, in the app's look. They read the archive the site's replay server reads
(replay/pagedata.py) and link to that server to show a capture: archived content is shown
only from its own origin, never from the app's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlencode

from aiohttp import web

from mirror.app.library import SiteEntry
from mirror.app.replays import Replays, ReplayServer
from mirror.layout import ArchiveLayout
from mirror.replay.exportpages import shown_url
from mirror.replay.history import (
    NO_TEXT,
    HistoryRow,
    Side,
    compared_ids,
    newest_first,
    text_diff,
)
from mirror.replay.pagedata import Problem, compare_sides, page_history
from mirror.replay.pages import replay_path, shown_time

Render = Callable[..., web.Response]  # LibraryApp.page: (template, status, **context)


class ShownCapture(NamedTuple):
    """A row of a page's history as the app shows it."""

    row: HistoryRow
    time: str  # for people
    view: str  # the capture on the replay server
    compare: str  # the app's compare of it with the capture before it ("": none)


class ArchivePages:
    """Handlers of /site/{id}/history and /site/{id}/compare."""

    def __init__(self, render: Render, entry: Callable[[web.Request], SiteEntry],
                 replays: Replays) -> None:
        self.render, self.entry, self.replays = render, entry, replays

    async def server(self, entry: SiteEntry) -> ReplayServer:
        """The site's replay server (started if need be); 404 when it has nothing to replay."""
        if entry.config is None or not ArchiveLayout(entry.config.site.output_dir).warc.is_dir():
            raise web.HTTPNotFound(text=f"{entry.title} has no archive yet")
        return await self.replays.server(entry.id, entry.config)

    async def history(self, request: web.Request) -> web.Response:
        """Every capture of ?url=, newest first; two of them can be picked to compare."""
        entry = self.entry(request)
        url = request.query.get("url", "").strip()
        if not url:
            return self.render("history.html", 400, entry=entry, url="", rows=[],
                               problem="Which page? Add <code>?url=</code> and its URL.")
        server = await self.server(entry)
        found = await page_history(server.source, url)
        rows = [_shown(entry.id, server, found.key, row, earlier)
                for row, earlier in newest_first(found.rows)]
        problem = "" if rows else "This page is not in the archive."
        return self.render("history.html", 200 if rows else 404, entry=entry,
                           url=shown_url(found.key), full_url=found.key, rows=rows,
                           problem=problem, replay=server.entry(),
                           comparable=sum(r.row.capture_id is not None for r in rows) >= 2)

    async def compare(self, request: web.Request) -> web.Response:
        """?a=ID&b=ID or ?url=URL&from_run=A&to_run=B (replay/pagedata.compare_sides): the
        changed passages of the text, or with ?whole=1 the whole text."""
        entry = self.entry(request)
        server = await self.server(entry)
        sides = await compare_sides(server.source, request.query)
        if isinstance(sides, Problem):
            return self.render("compare.html", sides.status, entry=entry, problem=sides.html,
                               title="", history="")
        old, new = sides
        whole = request.query.get("whole") == "1"
        here = {"a": str(old.capture_id), "b": str(new.capture_id)}
        return self.render(
            "compare.html", entry=entry, problem="", whole=whole,
            diff=text_diff(old, new, whole), no_text=NO_TEXT,
            sides=[_side(server, s, old.url != new.url) for s in (old, new)],
            title=shown_url(new.url), history=_history_href(entry.id, new.url),
            switch=f"/site/{entry.id}/compare?" + urlencode(
                {**here, **({} if whole else {"whole": "1"})}),
            side_by_side=server.entry("/_compare?" + urlencode(here)))


def _shown(site_id: str, replay: ReplayServer, url: str, row: HistoryRow,
           earlier: HistoryRow | None) -> ShownCapture:
    ids = compared_ids(row, earlier)
    compare = (f"/site/{site_id}/compare?" + urlencode({"a": ids[0], "b": ids[1]})
               if ids else "")
    return ShownCapture(row, shown_time(row.timestamp), _view(replay, row.timestamp, url),
                        compare)


def _side(replay: ReplayServer, side: Side, with_url: bool) -> dict[str, Any]:
    return {"view": _view(replay, side.timestamp, side.url), "run": side.run,
            "label": (f"{shown_url(side.url)} at " if with_url else "") + side.shown}


def _view(replay: ReplayServer, timestamp: str, url: str) -> str:
    return replay.entry(replay_path(timestamp, url))


def _history_href(site_id: str, url: str) -> str:
    return f"/site/{site_id}/history?" + urlencode({"url": url})
