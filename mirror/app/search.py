"""Search across the library: one full-text query on every site's manifest, merged best first."""

from __future__ import annotations

from dataclasses import dataclass, field

from mirror.app.library import SiteEntry
from mirror.archive.searchrank import ranked
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.manifest.searchpages import MAX_PAGES, best_pages
from mirror.manifest.texts import Hit, SearchError
from mirror.replay.pages import run_timestamp

__all__ = ["MAX_PAGES", "PER_PAGE", "Found", "Results", "SearchError", "clamp_page",
           "search_library", "site_pages"]

#: results on one page of the app's search
PER_PAGE = 20


@dataclass(frozen=True)
class Found:
    """One page found: its best-ranked hit, with the site it was found in and the URLs of
    its other variants that match (the same page with another query string)."""

    site_id: str
    site: str  # the site's name
    hit: Hit
    variants: tuple[str, ...] = ()

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
    total: int = 0  # pages found, each once (its variants folded)
    sites: int = 0  # sites where pages were found
    at_least: bool = False  # the total counts the pages of a limited number of URLs
                            # (searchpages.COUNTED_AT_MOST): more match

    @property
    def first(self) -> int:
        """The rank of the first result shown (1-based)."""
        return (self.page - 1) * PER_PAGE + 1


@dataclass(frozen=True)
class SiteFound:
    """One site's answer: its best pages, folded, and how many pages match in all."""

    found: list[Found]
    total: int
    at_least: bool = False  # more pages match than `total` counts


def clamp_page(raw: str) -> int:
    """The `page` parameter, within 1..MAX_PAGES (1 for anything else)."""
    if not (raw.isascii() and raw.isdigit()):  # isdigit alone lets "²" through
        return 1
    return min(max(int(raw), 1), MAX_PAGES)


def search_library(entries: list[SiteEntry], query: str, page: int = 1,
                   per_page: int = PER_PAGE) -> Results:
    """The query's results on `page` across every site that has an archive, best first
    (searchrank.py), each page once. Each site gives at most its best `page * per_page + 1`
    pages (enough to know whether there is a next page), so the merge is exact for the
    pages shown. Blocking (SQLite): run it in a thread. Raises SearchError for a malformed
    query."""
    if not query.strip():
        return Results(query, page)
    wanted = page * per_page + 1
    found: list[Found] = []
    notes: list[SiteNote] = []
    searched = total = sites = 0
    at_least = False
    for entry in entries:
        answer, note = _search_site(entry, query, wanted)
        if answer is not None:
            searched += 1
            found += answer.found
            total += answer.total
            sites += answer.total > 0
            at_least = at_least or answer.at_least
        if note is not None:
            notes.append(note)
    found = ranked(found, lambda f: f.hit.score, lambda f: f"{f.hit.url} {f.site_id}")
    start = (page - 1) * per_page
    more = len(found) > start + per_page and page < MAX_PAGES
    return Results(query, page, found[start:start + per_page], notes, more, searched,
                   total, sites, at_least)


def site_pages(manifest: ManifestReader, entry: SiteEntry, query: str,
               wanted: int) -> SiteFound:
    """A site's best `wanted` pages for `query`, each once, and how many match."""
    pages = best_pages(manifest.texts, query, wanted)
    return SiteFound([Found(entry.id, entry.title, p.hit, p.variants) for p in pages.found],
                     pages.total, pages.at_least)


def _search_site(entry: SiteEntry, query: str,
                 limit: int) -> tuple[SiteFound | None, SiteNote | None]:
    """(its pages, a note) for one site; (None, ...) when it has no archive to search.
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
        answer = site_pages(manifest, entry, query, limit)
        unindexed = manifest.texts.unindexed_pages()
    finally:
        manifest.close()
    note = SiteNote(entry.id, entry.title, str(entry.file), unindexed=unindexed) \
        if unindexed else None
    return answer, note
