"""One archive's search results, each page once (archive/searchrank.py): what the app, `mirror
search` of the library and the replay server's /_search show of a site."""

from __future__ import annotations

from dataclasses import dataclass

from mirror.archive.searchrank import count_pages, fold, fold_key, ranked
from mirror.manifest.texts import Hit, TextReads

#: pages of results one can step through: an archive is asked for its best 20 * MAX_PAGES
#: pages at most, so a query costs the same however far one pages
MAX_PAGES = 25
#: matching URLs a search counts: a query that matches more (a common word of a big site)
#: finds "at least" the pages these fold into. Reading and folding 1,000 took 11 ms at a
#: million pages (10,000: 61 ms)
COUNTED_AT_MOST = 1_000


@dataclass(frozen=True)
class PageHit:
    """A page found: its best-ranked hit, and the URLs of its other variants that match
    (the same page with another query string), sorted."""

    hit: Hit
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pages:
    """An archive's best pages for a query, folded, and how many pages match in all (with
    `at_least`, at least that many: more than COUNTED_AT_MOST URLs match)."""

    found: list[PageHit]
    total: int
    at_least: bool = False


def best_pages(texts: TextReads, query: str, wanted: int,
               run_id: int | None = None) -> Pages:
    """The best `wanted` pages for `query` (the newest text of each URL; with `run_id`,
    that run's captures), each once with the variants that match too, and how many match.
    Raises SearchError for a malformed query.

    What it costs does not grow with the pages that match: up to COUNTED_AT_MOST of their
    URLs are read to count them, the ranked search asks for `wanted` hits (more only while
    variants fold them into fewer pages), and the variants are looked up for the pages
    shown. Reading every matching URL took 9 s and 340 MB for a word found on 750,000
    pages."""
    urls = texts.matching_urls(query, run_id=run_id, limit=COUNTED_AT_MOST + 1)
    at_least = len(urls) > COUNTED_AT_MOST
    total = count_pages(urls[:COUNTED_AT_MOST])
    needed = wanted
    while True:
        hits = best_hits(texts, query, needed, run_id)
        groups = fold(ranked(hits, lambda h: h.score, lambda h: h.url), lambda h: h.url)
        if len(groups) >= wanted or len(hits) < needed:
            break
        needed = 2 * needed
    groups = groups[:wanted]
    variants = texts.matching_variants(query, [fold_key(g.best.url) for g in groups],
                                       run_id=run_id)
    found = [PageHit(g.best, tuple(u for u in variants.get(fold_key(g.best.url), ())
                                   if u != g.best.url))
             for g in groups]
    return Pages(found, max(total, len(found)), at_least)


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
