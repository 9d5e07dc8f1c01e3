"""One archive's search results, each page once (archive/searchrank.py): what the app, `mirror
search` of the library and the replay server's /_search show of a site."""

from __future__ import annotations

from dataclasses import dataclass

from mirror.archive.searchrank import fold, fold_key, ranked
from mirror.manifest.texts import Hit, TextReads

#: pages of results one can step through: an archive is asked for its best 20 * MAX_PAGES
#: pages at most, so a query costs the same however far one pages
MAX_PAGES = 25


@dataclass(frozen=True)
class PageHit:
    """A page found: its best-ranked hit, and the URLs of its other variants that match
    (the same page with another query string), sorted."""

    hit: Hit
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pages:
    """An archive's best pages for a query, folded, and how many pages match in all."""

    found: list[PageHit]
    total: int


def best_pages(texts: TextReads, query: str, wanted: int,
               run_id: int | None = None) -> Pages:
    """The best `wanted` pages for `query` (the newest text of each URL; with `run_id`,
    that run's captures), each once, and how many match. Every matching URL is read
    (unranked, cheap), so the ranked search asks for just enough rows to make `wanted`
    pages whatever their variants. Raises SearchError for a malformed query."""
    by_page: dict[str, list[str]] = {}
    for url in texts.matching_urls(query, run_id=run_id):
        by_page.setdefault(fold_key(url), []).append(url)
    extra = sum(len(urls) - 1 for urls in by_page.values())
    hits = ranked(best_hits(texts, query, wanted + extra, run_id), lambda h: h.score,
                  lambda h: h.url)
    found = [PageHit(group.best, tuple(sorted(set(by_page.get(fold_key(group.best.url), ()))
                                              - {group.best.url})))
             for group in fold(hits, lambda h: h.url)[:wanted]]
    return Pages(found, len(by_page))


def best_hits(texts: TextReads, query: str, needed: int,
              run_id: int | None = None) -> list[Hit]:
    """The best `needed` hits and every hit that ties with the last of them: FTS5 cuts
    ties anywhere, and searchrank orders them by URL, so a cut must take all of them for
    pages 1, 2, ... to show one order."""
    if needed < 1:
        return []
    limit = needed + 1
    while True:
        hits = texts.search(query, run_id=run_id, limit=limit)
        if len(hits) < limit or hits[-1].score != hits[needed - 1].score:
            return hits
        limit *= 2
