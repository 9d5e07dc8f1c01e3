"""Find the links and page requisites of an HTML or CSS body (pure: no I/O)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from lxml import etree

from mirror.web.codings import charset_codec

# rewrite.py tokenizes CSS with these, so that what replay rewrites is what was fetched.
from mirror.web.css import css_references as css_references
from mirror.web.http import HTML_TYPES
from mirror.web.urls import join

LINK = "link"  # navigation: the crawler follows it within scope and depth
REQUISITE = "requisite"  # needed to render the page: fetched with it

#: Every Link.source value, with the markup that produces it.
SOURCES: dict[str, str] = {
    "a": "<a href> (LINK)",
    "area": "<area href> (LINK)",
    "img": "<img src>",
    "srcset": "each candidate of <img srcset>, <source srcset>, <link rel=preload imagesrcset>",
    "source": "<source src> (in <picture>, <video>, <audio>)",
    "script": "<script src>",
    "iframe": "<iframe src>",
    "frame": "<frame src>",
    "video": "<video src>",
    "poster": "<video poster>",
    "audio": "<audio src>",
    "track": "<track src>",
    "object": "<object data>",
    "embed": "<embed src>",
    "input-image": "<input type=image src>",
    "link-stylesheet": "<link rel=stylesheet href> (also 'alternate stylesheet')",
    "link-icon": "<link rel=icon|shortcut icon|apple-touch-icon[-precomposed]|mask-icon href>",
    "link-preload": "<link rel=preload|modulepreload href>",
    "link-manifest": "<link rel=manifest href>",
    "svg-image": "SVG <image href|xlink:href>",
    "svg-use": "SVG <use href|xlink:href>",
    "body-background": "<body background>",
    "meta-refresh": "<meta http-equiv=refresh content='5; url=...'>",
    "style-attr": "url() in a style attribute",
    "style-block": "url() in a <style> element",
    "style-import": "@import in a <style> element",
    "css-url": "url() in a stylesheet",
    "css-import": "@import in a stylesheet",
}


@dataclass(frozen=True)
class Link:
    url: str  # absolute, resolved against the effective base; NOT normalised (the crawler does)
    kind: str  # LINK or REQUISITE
    source: str  # which markup produced it: a key of SOURCES


@dataclass(frozen=True)
class Extracted:
    links: tuple[Link, ...]  # document order; repeats of the same (url, kind) dropped
    title: str | None  # HTML <title> text, whitespace collapsed; None if absent or empty
    charset: str  # the Python codec the body was decoded with
    base: str  # effective base URL (after <base href>)


# --- charset (P7) -------------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
_CHARSET_PARAM = re.compile(
    r"charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r ;\"']+))", re.I
)
_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.S)
_META = re.compile(rb"<meta[\t\n\f\r /]([^>]*)", re.I)
_ATTR = re.compile(
    rb"([^\t\n\f\r /=>][^\t\n\f\r /=>]*)"
    rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r >]*)))?"
)
_CSS_CHARSET = re.compile(rb'@charset "([^"]*)";')
_PRESCAN_BYTES = 1024


def sniff_charset(body: bytes, content_type: str | None, default: str = "utf-8") -> str:
    """The codec to decode an HTML body with: BOM > HTTP charset > <meta> prescan > default.

    Labels are read the WHATWG way ('latin1' means windows-1252); a label that is unknown,
    'replacement' or 'x-user-defined' is skipped for the next source. Never raises.
    """
    return (
        _bom(body)
        or _header_charset(content_type)
        or _prescan(body[:_PRESCAN_BYTES])
        or charset_codec(default)
        or "utf-8"
    )


def _bom(body: bytes) -> str | None:
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec
    return None


def _header_charset(content_type: str | None) -> str | None:
    label = _charset_param(content_type or "")
    return charset_codec(label) if label else None


def _charset_param(value: str) -> str | None:
    match = _CHARSET_PARAM.search(value)
    return next((group for group in match.groups() if group is not None), None) if match else None


def _prescan(head: bytes) -> str | None:
    # The HTML spec's prescan, simplified: <meta charset> or <meta http-equiv=Content-Type
    # content="...charset=..."> outside comments; the first usable one wins.
    for meta in _META.finditer(_COMMENT.sub(b"", head)):
        codec = _meta_charset(_attributes(meta.group(1)))
        if codec:
            # A page that could say this in ASCII is not UTF-16 (HTML spec).
            return "utf-8" if codec.startswith("utf-16") else codec
    return None


def _attributes(markup: bytes) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(markup):
        name = match.group(1).decode("latin-1").lower()
        value = next((v for v in match.groups()[1:] if v is not None), b"")
        attrs.setdefault(name, value.decode("latin-1"))
    return attrs


def _meta_charset(attrs: dict[str, str]) -> str | None:
    if "charset" in attrs:
        return charset_codec(attrs["charset"])
    if attrs.get("http-equiv", "").lower() == "content-type" and "content" in attrs:
        label = _charset_param(attrs["content"])
        return charset_codec(label) if label else None
    return None


def _decode(body: bytes, codec: str) -> str:
    # errors="replace": a wrong declaration garbles some text but never stops extraction.
    return body.decode(codec, "replace").removeprefix("\ufeff")


# --- URL resolution -----------------------------------------------------------------------

_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def resolve(base: str, ref: str) -> str | None:
    """ref made absolute against base, or None when there is nothing to fetch.

    None for an empty or fragment-only reference, a relative one against a data: base (it
    has no hierarchy), and anything that cannot be parsed. Every scheme is kept otherwise:
    the crawler decides what to fetch and counts what it rejects.
    """
    ref = ref.strip(_C0_AND_SPACE)
    if not ref or ref.startswith("#"):
        return None
    if not _SCHEME.match(ref) and base[:5].lower() == "data:":
        return None
    try:
        url = join(base, ref)
    except ValueError:  # urls.InvalidURL: e.g. an unclosed IPv6 bracket
        return None
    return url if _SCHEME.match(url) else None


class _Resolver:
    """resolve() against one base, memoised, with a fast path for relative paths.

    urls.join costs about 10 us a call, mostly in cleaning and re-parsing the base for every
    reference. A page's references are mostly relative paths ('img/a.png', '../b.html',
    '/c?d'); for those this runs urllib.parse.urljoin's own steps on the base split once,
    which is what join does with them. Any other shape (a scheme, '//', '?' or '#' first,
    ';' params, '\\', tab or newline), and any base that is not a plain http(s) URL, goes
    through resolve(). tests/test_extract.py checks that both ways agree.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self._memo: dict[str, str | None] = {}
        self._origin = ""  # 'scheme://netloc' of a base the fast path can use, else ''
        self._dir: list[str] = []  # the base path's segments, its last one dropped
        try:
            scheme, netloc, path, _params, _query, _fragment = urlparse(base)
        except ValueError:  # e.g. an unclosed IPv6 bracket: join raises on every reference
            return
        if scheme in ("http", "https") and netloc and not _UNCLEAN_BASE.search(base):
            self._origin = f"{scheme}://{netloc}"
            self._dir = path.split("/")
            if self._dir[-1]:
                del self._dir[-1]

    def __call__(self, ref: str) -> str | None:
        if ref not in self._memo:
            self._memo[ref] = self._resolve(ref)
        return self._memo[ref]

    def _resolve(self, ref: str) -> str | None:
        ref = ref.strip(_C0_AND_SPACE)
        if not (self._origin and _RELATIVE_PATH.match(ref)):
            return resolve(self.base, ref)
        path, _, fragment = ref.partition("#")
        path, _, query = path.partition("?")
        if path[0] == "/" and "/." not in path:
            joined = path  # no dot segment: the path stays as it is
        else:
            joined = self._join_path(path)
        url = self._origin + joined
        if query:
            url += "?" + query
        return url + "#" + fragment if fragment else url

    def _join_path(self, path: str) -> str:
        # urllib.parse.urljoin (RFC 3986 5.2), from where the reference has a path.
        if path[0] == "/":
            segments = path.split("/")
        else:
            segments = self._dir + path.split("/")
            segments[1:-1] = filter(None, segments[1:-1])
        resolved: list[str] = []
        for segment in segments:
            if segment == "..":
                if resolved:
                    resolved.pop()
            elif segment != ".":
                resolved.append(segment)
        if segments[-1] in (".", ".."):
            resolved.append("")
        joined = "/".join(resolved) or "/"
        return joined if joined[0] == "/" else "/" + joined


# What urls.join removes from a base before joining: C0 and space around, tab/CR/LF inside.
_UNCLEAN_BASE = re.compile(r"\A[\x00-\x20]|[\t\n\r]|[\x00-\x20]\Z")
# A relative-path reference, the shape the fast path joins. Anything else goes to join.
_RELATIVE_PATH = re.compile(
    r"(?=[^?#])(?!//)"  # a path comes first, and not '//' (a network-path reference)
    r"[^:/?#;\\\t\n\r]*"  # first segment: no ':' (it could be read as a scheme)
    r"(?:/[^?#;\\\t\n\r]*)?"  # the rest of the path: no ';' (urlparse splits off params)
    r"(?:[?#][^\\\t\n\r]*)?\Z"  # query and fragment; join drops tab/CR/LF, turns '\' to '/'
)


class _Collector:
    """Resolves references against one base and keeps the first Link per (url, kind)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.resolve = _Resolver(base)
        self._links: dict[tuple[str, str], Link] = {}

    def add(self, ref: str, kind: str, source: str) -> None:
        url = self.resolve(ref)
        if url is not None and (url, kind) not in self._links:
            self._links[url, kind] = Link(url, kind, source)

    def links(self) -> tuple[Link, ...]:
        return tuple(self._links.values())


# --- CSS (the scanner is mirror/web/css.py) ---------------------------------------------------


def _add_css(out: _Collector, text: str, url_source: str, import_source: str) -> None:
    for ref, is_import in css_references(text):
        out.add(ref, REQUISITE, import_source if is_import else url_source)


def css_charset(body: bytes, content_type: str | None) -> str:
    """The charset of a stylesheet, by the CSS rule (used to read it and to rewrite it)."""
    # CSS Syntax "determine the fallback encoding": BOM > HTTP charset > @charset > UTF-8.
    declared = _CSS_CHARSET.match(body[:_PRESCAN_BYTES])
    codec = charset_codec(declared.group(1)) if declared else None
    if codec and codec.startswith("utf-16"):
        codec = "utf-8"  # an @charset readable as ASCII cannot be right about UTF-16
    return _bom(body) or _header_charset(content_type) or codec or "utf-8"


def extract_css(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Every url() and @import of a stylesheet, as requisites."""
    charset = css_charset(body, content_type)
    out = _Collector(url)
    _add_css(out, _decode(body, charset), "css-url", "css-import")
    return Extracted(out.links(), None, charset, url)


# --- HTML attribute values ----------------------------------------------------------------

_ASCII_WHITESPACE = "\t\n\f\r "
_WHITESPACE_RUN = re.compile(r"[\t\n\f\r ]+")


def srcset_urls(value: str) -> list[str]:
    """The candidate URLs of a srcset attribute (HTML spec "parse a srcset attribute").

    Descriptors are skipped, not validated: a URL with a bad descriptor is still returned.
    """
    urls: list[str] = []
    pos, end = 0, len(value)
    while True:
        while pos < end and value[pos] in _ASCII_WHITESPACE + ",":
            pos += 1
        if pos >= end:
            return urls
        start = pos
        while pos < end and value[pos] not in _ASCII_WHITESPACE:
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")  # "a.png," ends the candidate: no descriptors follow
        else:
            pos = _skip_descriptors(value, pos)
        if url:
            urls.append(url)


def _skip_descriptors(value: str, pos: int) -> int:
    """Index just past the descriptors at pos: at the first comma outside parentheses."""
    in_parens = False
    while pos < len(value):
        char = value[pos]
        pos += 1
        if in_parens:
            in_parens = char != ")"
        elif char == "(":
            in_parens = True
        elif char == ",":
            break
    return pos


_REFRESH_KEYWORD = re.compile(r"url[\t\n\f\r ]*=[\t\n\f\r ]*", re.I)


def refresh_url(content: str) -> str | None:
    """The URL of a <meta http-equiv=refresh> content value (HTML spec), or None.

    Takes '5; url=x', '5;URL='x'', '5, x', '0 url = "x"'; a bare delay refreshes the page
    itself and gives None.
    """
    pos = _skip(content, 0, _ASCII_WHITESPACE)
    digits = _skip(content, pos, "0123456789")
    if digits == pos and not content.startswith(".", pos):
        return None
    pos = _skip(content, digits, "0123456789.")
    if pos >= len(content) or content[pos] not in _ASCII_WHITESPACE + ";,":
        return None
    pos = _skip(content, pos, _ASCII_WHITESPACE)
    if content.startswith((";", ","), pos):
        pos = _skip(content, pos + 1, _ASCII_WHITESPACE)
    url = content[pos:]
    keyword = _REFRESH_KEYWORD.match(url)
    if keyword:
        url = url[keyword.end() :]
    if url[:1] in ("'", '"'):
        url = url[1:].partition(url[0])[0]
    return url or None


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


# --- HTML ---------------------------------------------------------------------------------

# (attribute, kind, source) read from every element of that name.
ATTRIBUTE_RULES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "a": (("href", LINK, "a"),),
    "area": (("href", LINK, "area"),),
    "img": (("src", REQUISITE, "img"), ("srcset", REQUISITE, "srcset")),
    "source": (("src", REQUISITE, "source"), ("srcset", REQUISITE, "srcset")),
    "script": (("src", REQUISITE, "script"),),
    "iframe": (("src", REQUISITE, "iframe"),),
    "frame": (("src", REQUISITE, "frame"),),
    "video": (("src", REQUISITE, "video"), ("poster", REQUISITE, "poster")),
    "audio": (("src", REQUISITE, "audio"),),
    "track": (("src", REQUISITE, "track"),),
    "object": (("data", REQUISITE, "object"),),
    "embed": (("src", REQUISITE, "embed"),),
    "image": (("href", REQUISITE, "svg-image"), ("xlink:href", REQUISITE, "svg-image")),
    "use": (("href", REQUISITE, "svg-use"), ("xlink:href", REQUISITE, "svg-use")),
}
# rel token -> source; the first token of this list found in rel decides.
_LINK_RELS = (
    ("stylesheet", "link-stylesheet"),
    ("preload", "link-preload"),
    ("modulepreload", "link-preload"),
    ("icon", "link-icon"),  # also "shortcut icon"
    ("apple-touch-icon", "link-icon"),
    ("apple-touch-icon-precomposed", "link-icon"),
    ("mask-icon", "link-icon"),
    ("manifest", "link-manifest"),
)
# Elements kept until the parse ends (with any element that has a style attribute): those
# that can hold a reference, and <base>, whose href applies to the references before it too.
_KEPT = frozenset(ATTRIBUTE_RULES) | {"link", "input", "meta", "body", "style", "base"}

# (tag, attributes, text): text is the list of text runs of a <style>, None for the others.
_Element = tuple[str, Mapping[str, str], list[str] | None]


class _PageEvents:
    """An lxml parser target: keeps the elements extraction reads, in document order.

    libxml2's HTML parser calls it for every start tag, end tag and text run, and no tree
    is built: building one is most of the cost of a parse, and libxml2's tree builder gives
    up past 256 levels of nesting, which unclosed tags in broken markup reach.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.elements: list[_Element] = []
        self.title: list[str] | None = None  # text runs of the first <title> outside SVG
        self._svg_depth = 0
        self._text: list[str] | None = None  # where the current <style> or <title> text goes
        self._text_tag = ""

    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        if tag in _KEPT or "style" in attrib:
            text: list[str] | None = None
            if tag == "style":
                text = self._collect(tag, [])
            self.elements.append((tag, attrib, text))
        if tag == "svg":
            self._svg_depth += 1
        elif tag == "title" and self.title is None and not self._svg_depth:
            self.title = self._collect(tag, [])

    def _collect(self, tag: str, text: list[str]) -> list[str]:
        if self._text is None:  # <title> and <style> hold only text: never each other
            self._text, self._text_tag = text, tag
        return text

    def end(self, tag: str) -> None:
        if tag == "svg":
            self._svg_depth -= 1
        elif tag == self._text_tag:
            self._text, self._text_tag = None, ""

    def data(self, text: str) -> None:
        if self._text is not None:
            self._text.append(text)

    def close(self) -> _Page:
        """What the parse found; the target is then ready for the next document."""
        page = _Page(self.elements, self.title)
        self._reset()
        return page


@dataclass(frozen=True)
class _Page:
    elements: list[_Element]
    title: list[str] | None


class _Parsers(threading.local):
    """One libxml2 HTML parser and its target per thread, used for page after page: making
    a target parser costs more than parsing a small page (lxml inspects the target's
    methods each time)."""

    def __init__(self) -> None:
        self.parser: etree.HTMLParser | None = None

    def get(self) -> etree.HTMLParser:
        if self.parser is None:
            self.parser = etree.HTMLParser(target=_PageEvents(), recover=True)
        return self.parser


_parsers = _Parsers()


def extract_html(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Links (a, area) and page requisites of an HTML page, resolved against its base."""
    charset = sniff_charset(body, content_type)
    page = _parse(_decode(body, charset))
    if page is None:
        return Extracted((), None, charset, url)
    out = _Collector(_base_url(page.elements, url))
    for tag, attrib, text in page.elements:
        _add_element(out, tag, attrib, text)
    return Extracted(out.links(), _title(page.title), charset, out.base)


def _parse(text: str) -> _Page | None:
    """The elements of text, read by libxml2's HTML parser; None if it has no markup.

    text goes in as str: lxml gives it to libxml2 as UTF-8 and says so, so a <meta charset>
    in the page cannot make libxml2 decode it again; the charset sniffed here stays the
    authority.
    """
    if "<" not in text:
        return None
    parser = _parsers.get()
    try:
        # A second BOM goes too, as it did with BeautifulSoup (libxml2 skips a third).
        parser.feed(text.removeprefix("\ufeff"))
        page: _Page = parser.close()
    except (etree.LxmlError, UnicodeError, LookupError):
        _parsers.parser = None  # its state is unknown: the next page gets a new one
        return None
    return page


def _base_url(elements: list[_Element], url: str) -> str:
    # The first <base> with an href sets the base of the whole document.
    href = next((a["href"] for tag, a, _ in elements if tag == "base" and "href" in a), None)
    resolved = resolve(url, href) if href is not None and href.strip() else None
    return resolved or url


def _title(text: list[str] | None) -> str | None:
    if text is None:
        return None
    return _WHITESPACE_RUN.sub(" ", "".join(text)).strip(_ASCII_WHITESPACE) or None


def _add_element(
    out: _Collector, tag: str, attrib: Mapping[str, str], text: list[str] | None
) -> None:
    for attr, kind, source in ATTRIBUTE_RULES.get(tag, ()):
        value = attrib.get(attr)
        if value is not None:
            _add_value(out, value, kind, source, attr)
    special = _SPECIAL_HANDLERS.get(tag)
    if special is not None:
        special(out, attrib)
    if text is not None:
        _add_css(out, "".join(text), "style-block", "style-import")
    style = attrib.get("style")
    if style:
        _add_css(out, style, "style-attr", "style-attr")


def _add_value(out: _Collector, value: str, kind: str, source: str, attr: str) -> None:
    refs: Iterable[str] = srcset_urls(value) if attr.endswith("srcset") else (value,)
    for ref in refs:
        out.add(ref, kind, source)


def _add_link_element(out: _Collector, attrib: Mapping[str, str]) -> None:
    rels = set(attrib.get("rel", "").lower().split())
    source = next((src for rel, src in _LINK_RELS if rel in rels), None)
    href = attrib.get("href")
    if source is not None and href is not None:
        out.add(href, REQUISITE, source)
    srcset = attrib.get("imagesrcset")
    if srcset is not None and source == "link-preload":
        _add_value(out, srcset, REQUISITE, "srcset", "imagesrcset")


def _add_input(out: _Collector, attrib: Mapping[str, str]) -> None:
    src = attrib.get("src")
    if src is not None and attrib.get("type", "").strip().lower() == "image":
        out.add(src, REQUISITE, "input-image")


def _add_meta(out: _Collector, attrib: Mapping[str, str]) -> None:
    content = attrib.get("content")
    if content and attrib.get("http-equiv", "").strip().lower() == "refresh":
        target = refresh_url(content)
        if target is not None:
            out.add(target, REQUISITE, "meta-refresh")


def _add_body(out: _Collector, attrib: Mapping[str, str]) -> None:
    background = attrib.get("background")
    if background is not None:
        out.add(background, REQUISITE, "body-background")


_SPECIAL_HANDLERS = {
    "link": _add_link_element,
    "input": _add_input,
    "meta": _add_meta,
    "body": _add_body,
}


# --- dispatch -----------------------------------------------------------------------------



def extract(body: bytes, url: str, mime: str, content_type: str | None = None) -> Extracted:
    """Extract by media type: HTML, XHTML or CSS; any other type has no links."""
    media_type = mime.partition(";")[0].strip().lower()
    if media_type in HTML_TYPES:
        return extract_html(body, url, content_type)
    if media_type == "text/css":
        return extract_css(body, url, content_type)
    return Extracted((), None, sniff_charset(body, content_type), url)
