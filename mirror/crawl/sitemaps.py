"""Sitemaps (sitemaps.org 0.9): where robots.txt points, and XML, gzip and text sitemaps read
safely and within the protocol's limits (pure: no I/O)."""

from __future__ import annotations

import io
from dataclasses import dataclass

from lxml import etree

from mirror.crawl.robots import rules_from_response
from mirror.web.codings import DecodeError, decode_body

#: most URLs read from one sitemap file (sitemaps.org: 50,000 per file, index or urlset)
MAX_URLS = 50_000
#: most bytes of one sitemap read, once uncompressed (sitemaps.org: 50 MB, 52,428,800 bytes)
MAX_BYTES = 50 * 1024 * 1024
#: where a site without Sitemap: lines in its robots.txt usually keeps its sitemap
DEFAULT_PATH = "/sitemap.xml"
URLSET, INDEX, TEXT = "urlset", "sitemapindex", "text"

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_ENTRY = {URLSET: "url", INDEX: "sitemap"}  # the element of each URL, by root element


@dataclass(frozen=True)
class Entry:
    """One URL a sitemap lists: a page (urlset, text) or a sitemap (index)."""

    loc: str  # as written (sitemaps.org asks for absolute URLs; the caller resolves it)
    lastmod: str | None = None  # W3C datetime as written, when given


@dataclass(frozen=True)
class Sitemap:
    """What one sitemap file lists; `problem` says why less was read than it holds."""

    kind: str  # URLSET | INDEX | TEXT, "" when the file is not a sitemap
    entries: tuple[Entry, ...] = ()
    problem: str | None = None

    @property
    def is_index(self) -> bool:
        return self.kind == INDEX


def robots_sitemaps(status: int, body: bytes | None,
                    content_encoding: str | None = None, truncated: bool = False) -> list[str]:
    """The sitemaps one robots.txt answer points to, as written (relative to its URL):
    its Sitemap: lines; else DEFAULT_PATH, when it names none or there is no robots.txt
    (4xx but 429). Nothing for other answers (3xx: the caller follows them; 5xx and 429
    say nothing)."""
    fallback = [DEFAULT_PATH]
    if 200 <= status < 300:
        rules = rules_from_response(status, body or b"", content_encoding=content_encoding,
                                    truncated=truncated)
        return list(rules.sitemaps) or fallback
    if 400 <= status < 500 and status != 429:
        return fallback
    return []


def parse(body: bytes, content_encoding: str | None = None) -> Sitemap:
    """Read a sitemap as received: content-coding undone, then gzip (a .xml.gz file), then
    an XML urlset or sitemap index, or a text sitemap (one URL a line). At most MAX_BYTES
    uncompressed and MAX_URLS entries are read; a broken file gives what came before the
    damage. XML with a DOCTYPE is refused: no entity is ever expanded or loaded."""
    try:
        data, cut = decode_body(body, content_encoding, MAX_BYTES)
        if data.startswith(_GZIP_MAGIC):
            data, cut_inner = decode_body(data, "gzip", MAX_BYTES)
            cut = cut or cut_inner
    except DecodeError as exc:
        return Sitemap("", (), f"cannot decode it: {exc}")
    data = data.removeprefix(_BOM)
    found = _parse_xml(data) if data.lstrip()[:1] == b"<" else _parse_text(data)
    if cut and found.kind:  # what broke the XML, if anything, is where it was cut
        return Sitemap(found.kind, found.entries,
                       f"more than {MAX_BYTES} bytes, or cut short: read up to there")
    return found


def _parse_text(data: bytes) -> Sitemap:
    """A text sitemap: UTF-8, one absolute http(s) URL a line; other lines are ignored."""
    entries: list[Entry] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        url = line.strip()
        if url[:8].lower().startswith(("http://", "https://")):
            if len(entries) == MAX_URLS:
                return Sitemap(TEXT, tuple(entries), _too_many())
            entries.append(Entry(url))
    return Sitemap(TEXT, tuple(entries))


def _parse_xml(data: bytes) -> Sitemap:
    """An XML urlset or sitemapindex, any namespace, read incrementally (memory stays small
    whatever the file's size). Only the <loc> and <lastmod> that are children of an entry
    count (not image:loc and the like, deeper down)."""
    kind, entries = "", list[Entry]()
    parser = etree.iterparse(io.BytesIO(data), events=("start", "end"), resolve_entities=False,
                             no_network=True, load_dtd=False, huge_tree=False,
                             remove_comments=True, remove_pis=True)
    try:
        for event, element in parser:
            if not kind:  # the root element
                if element.getroottree().docinfo.doctype:
                    return Sitemap("", (), "has a DOCTYPE: refused (no sitemap needs one)")
                kind = _local(element)
                if kind not in _ENTRY:
                    return Sitemap("", (), f"not a sitemap (root element <{kind}>)")
                continue
            if event != "end" or _local(element) != _ENTRY[kind]:
                continue
            entry = _entry(element)
            _forget(element)
            if entry is None:
                continue
            if len(entries) == MAX_URLS:
                return Sitemap(kind, tuple(entries), _too_many())
            entries.append(entry)
    except etree.XMLSyntaxError as exc:
        return Sitemap(kind, tuple(entries), f"broken XML ({exc}): read up to there")
    return Sitemap(kind, tuple(entries))


def _entry(element: etree._Element) -> Entry | None:
    fields = {_local(child): (child.text or "").strip() for child in element
              if isinstance(child.tag, str)}
    loc = fields.get("loc")
    return Entry(loc, fields.get("lastmod") or None) if loc else None


def _local(element: etree._Element) -> str:
    return str(etree.QName(element).localname)


def _forget(element: etree._Element) -> None:
    """Drop an entry read, and those before it, so the tree never holds the whole file."""
    element.clear()
    parent = element.getparent()
    while parent is not None and element.getprevious() is not None:
        del parent[0]


def _too_many() -> str:
    return f"more than {MAX_URLS} URLs: the rest are ignored"
