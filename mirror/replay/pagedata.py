"""What a page's history and a comparison of two of its captures are made of, read from an
archive (its index and manifest): one reading for the replay server's pages and the
library app's (mirror/app/pages.py), which show it each in their own look."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mirror.manifest.reader import ManifestReader
from mirror.replay.captures import Capture, CaptureIndex
from mirror.replay.exportpages import shown_url
from mirror.replay.history import HistoryRow, Side, capture_at_run, index_rows, manifest_rows
from mirror.replay.pages import number

T = TypeVar("T")
NO_MANIFEST = ("This archive has no manifest (<code>mirror run</code> writes it), so it "
               "has no history of runs and no text to search or compare.")
COMPARE_WHAT = ("Compare what? <code>?a=ID&amp;b=ID</code> (capture ids, from a page's "
                "history) or <code>?url=URL&amp;from_run=A&amp;to_run=B</code>.")


class ArchiveSource(Protocol):
    """What the views read: the capture index, the manifest, a capture's title."""

    async def get(self) -> CaptureIndex: ...

    async def manifest(self, query: Callable[[ManifestReader], T]) -> T | None: ...

    async def title(self, archive: CaptureIndex, cap: Capture) -> str | None: ...


@dataclass(frozen=True)
class Problem:
    """Why there is nothing to show: an HTTP status and a sentence (HTML, its parts
    escaped)."""

    status: int
    html: str


@dataclass(frozen=True)
class PageHistory:
    """A URL's captures, oldest first, under its key (the URL as the archive files it);
    none when the URL was not archived."""

    key: str
    rows: list[HistoryRow]


async def page_history(source: ArchiveSource, url: str) -> PageHistory:
    """From the manifest (runs, capture ids to compare), else from the index alone."""
    archive = await source.get()
    key = archive.key(url)
    history = await source.manifest(lambda m: m.texts.page_history(key))
    if history:
        return PageHistory(key, manifest_rows(history))
    caps = archive.captures_of(url)
    return PageHistory(key, index_rows(caps, [(archive.status_and_mime(c)[0],
                                               archive.original(c).digest) for c in caps]))


async def compare_sides(source: ArchiveSource, query: Mapping[str, str]
                        ) -> tuple[Side, Side] | Problem:
    """The two captures a query names, older first: ?a=<capture id>&b=<capture id>, or
    ?url=<url>&from_run=A&to_run=B (the URL's newest capture in or before each run)."""
    if "url" in query:
        ids = await _ids_at_runs(source, query.get("url", ""), query.get("from_run", ""),
                                 query.get("to_run", ""))
    else:
        ids = _ints(query.get("a", ""), query.get("b", ""))
    if isinstance(ids, Problem):
        return ids
    sides = await source.manifest(lambda m: [_side(m, i) for i in sorted(ids)])
    if sides is None:
        return Problem(404, NO_MANIFEST)
    old, new = sides
    if old is None or new is None:
        return Problem(404, "No such capture in this archive.")
    return old, new


async def _ids_at_runs(source: ArchiveSource, url: str, from_run: str, to_run: str
                       ) -> tuple[int, int] | Problem:
    runs = _ints(from_run, to_run)
    if isinstance(runs, Problem):
        return runs
    key = (await source.get()).key(url)
    history = await source.manifest(lambda m: m.texts.page_history(key))
    if history is None:
        return Problem(404, NO_MANIFEST)
    old, new = (capture_at_run(history, r) for r in runs)
    if old is None or new is None:
        run = runs[0] if old is None else runs[1]
        return Problem(404, f"<b>{html.escape(shown_url(key))}</b> has no capture in or "
                            f"before run {run}.")
    return old.capture_id, new.capture_id


def _ints(first: str, second: str) -> tuple[int, int] | Problem:
    a, b = number(first), number(second)
    if a is None or b is None:
        return Problem(400, COMPARE_WHAT)
    return a, b


def _side(m: ManifestReader, capture_id: int) -> Side | None:
    where = m.texts.capture_url(capture_id)
    if where is None:
        return None
    url, date = where
    runs = [c.run_id for c in m.texts.page_history(url) if c.capture_id == capture_id]
    return Side(capture_id, url, date, runs[0] if runs else None, m.texts.page_text(capture_id))
