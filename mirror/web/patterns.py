"""Learned trap patterns (pure): a URL's pattern, a pattern's figures from the pages the
crawl fetched, and the verdict that stops a pattern when a block of its pages (its first
few, or any SAMPLE in a row after them) are all noindex or near-duplicates of pages stored
before."""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

#: skip rules of learned patterns (reports and tests count by them)
NOINDEX = "learned:noindex"
DUPLICATE = "learned:duplicate"
#: skip rule of a URL combining two or more filters of a faceted path (facet_rule)
FACETS = "learned:facets"
#: skip rule of a pattern the site file names in [scope] skip_patterns
PINNED = "skip_patterns"
#: a pattern is judged on each block of SAMPLE pages (2xx HTML pages with a text) in the
#: order they were stored: its first SAMPLE, the next SAMPLE, ... (the views of a page are
#: often found after a few pages of their own: list?id=1, list?id=2, then list?id=1&sort=)
SAMPLE = 5
#: ... and stopped when at least this many of them are near-duplicates
DUPLICATES = 4
#: sample URLs kept per pattern, for the report and `mirror explain`
SAMPLES = 5
#: a page is judged a near-duplicate on its own text: its lines that are not on its host's
#: first page (the navigation, header and footer every page repeats). One whose own text
#: is shorter than this many bytes is never judged: a few words ("Page 7", a photo's
#: caption, a list's empty state) cannot tell a page of a finite set of short pages from
#: a trap's; noindex, the built-in rules and the limits are left to end those
SHORT = 64
#: ... and one whose own text is shorter than this many bytes is a near-duplicate only of
#: a page with the very same fingerprint: a SimHash of a few lines is little more than the
#: hash of the longest, so a few bits apart say little
EXACT = 1024

NUMBER = "{n}"
ID = "{id}"
# In a path segment, left to right: a percent-escape is kept as it is; a UUID, or a run
# of 8 or more letters and digits with at least one of each (a hash, a session id) is
# {id}; any other run of digits is {n} (so "page2", "2024-05" keep their words)
_PARTS = re.compile(
    r"(%[0-9A-Fa-f]{2})"
    r"|(?<![A-Za-z0-9])(?:[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}"
    r"|(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{8,})(?![A-Za-z0-9])"
    r"|[0-9]+")


def _general(m: re.Match[str]) -> str:
    if m.group(1):
        return m.group(1)
    text = m.group(0)
    return NUMBER if text.isdigit() else ID


def _segment(segment: str) -> str:
    """A path segment with its ids and numbers generalised: "2024-05" -> "{n}-{n}",
    "a3f9c2e1d4b5" -> "{id}", "page-2.html" -> "page-{n}.html", "Main_Page" as it is."""
    if not any(c.isdigit() for c in segment):
        return segment
    return _PARTS.sub(_general, segment)


@lru_cache(maxsize=1 << 14)
def url_pattern(url: str) -> str:
    """The pattern of a canonical URL: its host[:port], its path with numbers, dates, ids
    and hashes generalised, and the sorted set of its query's keys (values dropped):

        https://w.example/index.php?title=X&action=history -> w.example/index.php?action=&title=
        https://w.example/index.php?title=X&oldid=12       -> w.example/index.php?oldid=&title=
        https://w.example/wiki/Main_Page                   -> w.example/wiki/Main_Page
        http://h/calendar/2024/05?view=week&p=2            -> h/calendar/{n}/{n}?p=&view=

    A page of its own (an article) keeps a pattern of its own; the views of many pages
    (history, edit, sort, calendar months) share one."""
    rest = url.partition("://")[2].partition("#")[0]
    path, _, query = rest.partition("?")
    host, slash, path = path.partition("/")
    shape = host + slash + "/".join(_segment(s) for s in path.split("/"))
    if not query:
        return shape
    keys = sorted({_segment(k.partition("=")[0]) for k in query.split("&") if k})
    return shape + "?" + "&".join(k + "=" for k in keys)


#: a path segment that varies within a family of patterns (see Families)
ANY = "{*}"
#: a family stands for its patterns once this many of them were seen
SPREAD = 5


def family_keys(pattern: str) -> list[str]:
    """The families a URL pattern may belong to: its path with one segment made ANY, for
    each segment but the first (a site's sections: /en/, /blog/) and but the last of a
    path of two segments: a session id in the path (h/s/{*}/article/{n}), the page a view
    is of (w/index.php/Special:WhatLinksHere/{*}); never w/wiki/{*}, which would be every
    article of a wiki."""
    shape, mark, query = pattern.partition("?")
    host, _, path = shape.partition("/")
    segments = path.split("/")
    last = len(segments) - 1
    return [f"{host}/{'/'.join([*segments[:i], ANY, *segments[i + 1:]])}{mark}{query}"
            for i, segment in enumerate(segments)
            if segment and segment != ANY and 0 < i and (i < last or last >= 2)]


def matching(url: str, patterns: Container[str]) -> str | None:
    """The pattern of `patterns` a URL belongs to: its own, or one of its families."""
    pattern = url_pattern(url)
    if pattern in patterns:
        return pattern
    return next((key for key in family_keys(pattern) if key in patterns), None)


class Families:
    """The families of patterns a crawl has seen SPREAD of (pure state, rebuilt from the
    patterns a run recorded, in their order): a URL whose pattern belongs to one has the
    family's pattern, so the views of every page of a wiki (Special:WhatLinksHere/<page>)
    are judged as one pattern, not one per page."""

    def __init__(self) -> None:
        self._members: dict[str, set[str]] = {}  # family -> its patterns seen (SPREAD at most)
        self.wide: set[str] = set()

    def of(self, pattern: str) -> str:
        """The pattern a URL of `pattern` is judged under: its wide family's, or its own."""
        if not self.wide:
            return pattern
        return next((key for key in family_keys(pattern) if key in self.wide), pattern)

    def add(self, pattern: str) -> None:
        """A pattern seen (under its own name): its families count it."""
        if ANY in pattern:
            self.wide.add(pattern)
            return
        for key in family_keys(pattern):
            members = self._members.setdefault(key, set())
            if key not in self.wide:
                members.add(pattern)
                if len(members) >= SPREAD:
                    self.wide.add(key)
                    del self._members[key]


#: a path is faceted once this many of its query keys were each seen alone, on at least
#: two pages each (a filter has values to choose from)...
FACET_KEYS = 3


def facet_keys(figures: Mapping[str, Figures]) -> dict[str, frozenset[str]]:
    """The faceted paths of a crawl, from its patterns' figures: path pattern -> the query
    keys seen alone on at least two of its pages stored, when FACET_KEYS or more are."""
    alone: dict[str, set[str]] = {}
    for pattern, f in figures.items():
        path, _, query = pattern.partition("?")
        if f.pages >= 2 and query.count("=") == 1 and ANY not in pattern:
            alone.setdefault(path, set()).add(query[:-1])
    return {p: frozenset(keys) for p, keys in alone.items() if len(keys) >= FACET_KEYS}


def facet_rule(url: str, faceted: Mapping[str, frozenset[str]]) -> str | None:
    """FACETS for a URL of a faceted path combining two or more of its filters: what it
    lists is within what each filter alone lists, pages already fetched (and the path's
    unfiltered pages), so it leads to nothing new; its filters combine in any order, 2^k
    sets of keys. None otherwise."""
    if not faceted or "?" not in url:
        return None
    path, _, keys = url_pattern(url).partition("?")
    filters = faceted.get(path)
    if filters is None:
        return None
    combined = sum(1 for key in keys.split("&") if key[:-1] in filters)
    return FACETS if combined >= 2 else None


def valid_pattern(text: str) -> bool:
    """Whether a site file's pattern looks like one url_pattern writes: host/path, no
    scheme, no whitespace."""
    return "/" in text and "://" not in text and not any(c.isspace() for c in text)


@dataclass(frozen=True)
class Figures:
    """What the crawl saw of one pattern's pages (2xx HTML pages with a text).

    `block_*` count within its current block of SAMPLE pages (pages // SAMPLE full blocks
    before it), which alone decides its verdict once full; the totals are for the report."""

    pages: int = 0
    noindex: int = 0  # pages marked noindex (meta robots, X-Robots-Tag)
    duplicates: int = 0  # near-duplicates of a page of another URL stored before
    links: int = 0  # links to pages found on them (what the pattern yields)
    block_noindex: int = 0
    block_duplicates: int = 0
    samples: tuple[str, ...] = ()  # its first URLs

    def seen(self, url: str, *, noindex: bool, duplicate: bool, links: int) -> Figures:
        """The figures after one more page of the pattern."""
        fresh = self.pages % SAMPLE == 0  # a new block begins with this page
        return replace(
            self, pages=self.pages + 1, noindex=self.noindex + noindex,
            duplicates=self.duplicates + duplicate, links=self.links + links,
            block_noindex=(0 if fresh else self.block_noindex) + noindex,
            block_duplicates=(0 if fresh else self.block_duplicates) + duplicate,
            samples=self.samples + (url,) if len(self.samples) < SAMPLES else self.samples)


def verdict(f: Figures) -> str | None:
    """The rule that stops a pattern, judged when a block of SAMPLE of its pages is full:
    all of them noindex (NOINDEX), or at least DUPLICATES of them near-duplicates of pages
    stored before (DUPLICATE); None while the block is not full, or when it passes."""
    if f.pages == 0 or f.pages % SAMPLE:
        return None
    if f.block_noindex >= SAMPLE:
        return NOINDEX
    if f.block_duplicates >= DUPLICATES:
        return DUPLICATE
    return None


def why(rule: str, f: Figures) -> str:
    """A person's reading of a verdict: '4 of its first 5 pages were near-duplicates of
    pages stored before'."""
    if rule == NOINDEX:
        return f"{SAMPLE} of its pages in a row were marked noindex"
    if rule == DUPLICATE:
        return (f"{f.block_duplicates} of {SAMPLE} of its pages in a row were "
                "near-duplicates of pages stored before")
    return "[scope] skip_patterns names it"
