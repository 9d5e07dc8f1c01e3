"""The search of a static export: search.html and search.js (static files of this package) and
search-index.js, the text of every exported page, written as the pages are."""

from __future__ import annotations

import json
from importlib import resources
from typing import IO

from mirror.archive.scratch import SeenSet
from mirror.archive.searchrank import fold_key, token_count

SEARCH_PAGE = "search.html"
INDEX_SCRIPT = "search-index.js"
#: copied as they are into the export's root, where no exported file can be: every exported
#: file is inside a folder (export_path)
ASSETS = (SEARCH_PAGE, "search.js", "search.css")
#: the most characters of one page's text in the index (a long page: about 3,000 words) ...
MAX_PAGE_TEXT = 20_000
#: ... and of all pages: past it, each page keeps less, so that a browser still loads the
#: index of a big site in seconds (a 2,000-page site keeps MAX_PAGE_TEXT; 100,000 pages, 500)
MAX_INDEX_TEXT = 50_000_000
MIN_PAGE_TEXT = 200
#: the index is a script, not JSON: a page opened from file:// can load a script but not
#: fetch() a file; search.js reads this global
INDEX_START = b"var MIRROR_SEARCH = [\n"
INDEX_END = b"];\n"


def page_text_limit(pages: int) -> int:
    """Characters of text each page keeps in the index of `pages` pages."""
    return max(MIN_PAGE_TEXT, min(MAX_PAGE_TEXT, MAX_INDEX_TEXT // max(pages, 1)))


def cut(text: str, limit: int) -> str:
    """text cut to at most `limit` characters, at the end of a word where there is one."""
    if len(text) <= limit:
        return text
    space = max(text.rfind(" ", 0, limit + 1), text.rfind("\n", 0, limit + 1))
    return text[: space if space > limit // 2 else limit]


def index_entry(href: str, shown: str, title: str | None, text: str, limit: int,
                url: str = "") -> bytes:
    """One page of the index, a line of its own: [href from search.html, URL shown, title,
    text, its tokens (title and whole text: bm25's D), URL, page key (both `inert`)]: search.js
    ranks with
    them as the app does (archive/searchrank.py). JSON is valid JavaScript (U+2028 too,
    since ES2019); \\u escapes are left to what JSON needs, since they would double the
    size of a text in Chinese."""
    title = title or ""
    entry = [href, shown, title, cut(text, limit), token_count(title) + token_count(text),
             inert(url) if url else shown, inert(fold_key(url)) if url else shown]
    return json.dumps(entry, ensure_ascii=False).encode("utf-8") + b",\n"


def inert(url: str) -> str:
    """A URL the index keeps to rank and fold with, not to link to: "http 127.0.0.1/a" for
    "http://127.0.0.1/a", so that nothing in an export reads as a live link to the site
    (O3). Strings of this form sort as the URLs do (" " and ":" both sort before "s"), so
    the tie-break by URL is the app's."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme} {rest}" if sep else url


class SearchIndex:
    """search-index.js, written a page at a time: no text is held in memory, and the digests
    of the pages added are in a scratch table (scratch.SeenSet) (a million of them took 100 MB as a
    set)."""

    def __init__(self, out: IO[bytes], pages: int) -> None:
        self.out = out
        self.limit = page_text_limit(pages)
        self.pages = 0
        self._digests = SeenSet()
        self.bytes = out.write(INDEX_START)

    def add(self, href: str, shown: str, title: str | None, text: str | None,
            digest: str = "", url: str = "") -> None:
        """Add a page (`url`, `shown` as text), unless its archived bytes (payload `digest`)
        were added under another URL already: the manifest keeps one text for them too."""
        if not (text or title) or (digest and not self._digests.add(digest)):
            return
        self.bytes += self.out.write(index_entry(href, shown, title, text or "", self.limit,
                                                 url))
        self.pages += 1

    def close(self) -> None:
        self.bytes += self.out.write(INDEX_END)
        self.out.close()
        self._digests.close()


def asset(name: str) -> bytes:
    """A static file of the search (one of ASSETS)."""
    return (resources.files("mirror.replay") / "exportstatic" / name).read_bytes()
