"""Search across the library: one full-text query on every site's manifest, merged best first."""

from __future__ import annotations

from dataclasses import dataclass, field

from mirror.app.library import SiteEntry
from mirror.archive.manifest_queries import ManifestError, ManifestReader
from mirror.archive.manifest_text import Hit, SearchError
from mirror.layout import ArchiveLayout
from mirror.replay.serve import run_timestamp

__all__ = ["PER_PAGE", "Found", "Results", "SearchError", "clamp_page", "search_library"]

#: results on one page of the app's search
PER_PAGE = 20
#: pages one can step through: each site is asked for its best PER_PAGE * MAX_PAGES at most,
#: so a query costs the same however far one pages
MAX_PAGES = 25


@dataclass(frozen=True)
class Found:
    """One hit, with the site it was found in."""

    site_id: str
    site: str  # the site's name
    hit: Hit

    @property
    def ts(self) -> str:
        """The capture's replay timestamp (the replay picks the capture nearest to it)."""
        return run_timestamp(self.hit.warc_date) or "99991231235959"


@dataclass(frozen=True)
class SiteNote:
    """Why a site's answer is incomplete: pages captured before the text index existed,
    or a manifest that could not be read."""

    site_id: str
    site: str
    file: str  # the site file, for the command that fixes it
    unindexed: int = 0
    error: str = ""


@dataclass(frozen=True)
class Results:
    query: str
    page: int  # 1-based
    found: list[Found] = field(default_factory=list)
    notes: list[SiteNote] = field(default_factory=list)
    more: bool = False  # a next page has results (and may be asked for)
    searched: int = 0  # sites whose manifest was searched

    @property
    def first(self) -> int:
        """The rank of the first result shown (1-based)."""
        return (self.page - 1) * PER_PAGE + 1


def clamp_page(raw: str) -> int:
    """The `page` parameter, within 1..MAX_PAGES (1 for anything else)."""
    if not (raw.isascii() and raw.isdigit()):  # isdigit alone lets "²" through
        return 1
    return min(max(int(raw), 1), MAX_PAGES)


def search_library(entries: list[SiteEntry], query: str, page: int = 1) -> Results:
    """The query's results on `page` across every site that has an archive, best first by
    relevance. Each site gives at most its best `page * PER_PAGE + 1` (enough to know
    whether there is a next page), so the merge is exact for the pages shown.
    Blocking (SQLite): run it in a thread. Raises SearchError for a malformed query."""
    if not query.strip():
        return Results(query, page)
    wanted = page * PER_PAGE + 1
    found: list[Found] = []
    notes: list[SiteNote] = []
    searched = 0
    for entry in entries:
        hits, note = _search_site(entry, query, wanted)
        if hits is not None:
            searched += 1
            found += (Found(entry.id, entry.title, h) for h in hits)
        if note is not None:
            notes.append(note)
    # relevance first; ties in the order each site gave them (TextQueries.search: by
    # capture), so that the pages cut one order and none repeats or skips a hit
    found.sort(key=lambda f: (-f.hit.score, f.site_id, f.hit.capture_id))
    start = (page - 1) * PER_PAGE
    more = len(found) > start + PER_PAGE and page < MAX_PAGES
    return Results(query, page, found[start:start + PER_PAGE], notes, more, searched)


def _search_site(entry: SiteEntry, query: str,
                 limit: int) -> tuple[list[Hit] | None, SiteNote | None]:
    """(its hits, a note) for one site; (None, ...) when it has no archive to search.
    A malformed query is malformed for every site: SearchError goes up at once."""
    if entry.config is None:  # a broken site file: its row on the home screen says why
        return None, None
    path = ArchiveLayout(entry.config.site.output_dir).manifest
    if not path.exists():  # never run
        return None, None
    try:
        manifest = ManifestReader(path)
    except ManifestError as exc:
        return None, SiteNote(entry.id, entry.title, str(entry.file), error=str(exc))
    try:
        hits = manifest.search(query, limit=limit)
        unindexed = manifest.unindexed_pages()
    finally:
        manifest.close()
    note = SiteNote(entry.id, entry.title, str(entry.file), unindexed=unindexed) \
        if unindexed else None
    return hits, note
