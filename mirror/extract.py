"""Find the links and page requisites of an HTML or CSS body (pure: no I/O)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bs4 import BeautifulSoup, SoupStrainer, Tag
from bs4.exceptions import ParserRejectedMarkup

from mirror.codings import charset_codec
from mirror.urls import join

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


class _Collector:
    """Resolves references against one base and keeps the first Link per (url, kind)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._links: dict[tuple[str, str], Link] = {}

    def add(self, ref: str, kind: str, source: str) -> None:
        url = resolve(self.base, ref)
        if url is not None:
            self._links.setdefault((url, kind), Link(url, kind, source))

    def links(self) -> tuple[Link, ...]:
        return tuple(self._links.values())


# --- CSS ----------------------------------------------------------------------------------

_STRING = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
# Possessive (*+): a failed url( must not retry every split of its escapes (ReDoS).
_UNQUOTED = r"""(?:[^\s"'()\\]++|\\[0-9A-Fa-f]{1,6}+[ \t\n\r\f]?+|\\[^0-9A-Fa-f])*+"""
_CSS_TOKEN = re.compile(
    rf"""
    (?=[/@"'uUiI\-])                                     # every token starts so: skip fast
    (?:
    /\*.*?(?:\*/|\Z)                                      # comment: skipped
    | @import\s*(?:(?P<import_string>{_STRING})
                  |url\(\s*(?:(?P<import_quoted>{_STRING})|(?P<import_bare>{_UNQUOTED}))\s*\))
    | (?<![\w\-\\])url\(\s*(?:(?P<url_quoted>{_STRING})|(?P<url_bare>{_UNQUOTED}))\s*\)
    | (?<![\w\-\\])(?:-webkit-)?image-set\(                # its bare strings are URLs too
      (?P<image_set>(?:{_STRING}|url\([^()]*\)|type\([^()]*\)|[^()"'])*)\)
    | @namespace\b[^;{{}}]*                               # a namespace URI names, never loads
    | "(?:[^"\\\n]|\\.)*"? | '(?:[^'\\\n]|\\.)*'?         # other strings: skipped
    )
    """,
    re.I | re.S | re.X,
)
_IMAGE_SET_PART = re.compile(
    rf"(?i:type)\([^)]*\)|(?P<string>{_STRING})|(?P<url>(?<![\w\-\\])(?i:url)\([^)]*\))", re.S
)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9A-Fa-f]{1,6})(?:\r\n|[ \t\n\r\f])?|(\r\n|[\n\r\f])|(.))", re.S)
_REFERENCE_GROUPS = ("import_string", "import_quoted", "import_bare", "url_quoted", "url_bare")


def css_references(text: str) -> Iterator[tuple[str, bool]]:
    """(reference, is_import) for every url(), image-set() string and @import, in order."""
    for match in _CSS_TOKEN.finditer(text):
        groups = match.groupdict()
        if groups["image_set"] is not None:
            yield from _image_set_references(groups["image_set"])
            continue
        for name in _REFERENCE_GROUPS:
            value = groups[name]
            if value is not None:
                quoted = name.endswith(("string", "quoted"))
                yield _css_unescape(value[1:-1] if quoted else value), name.startswith("import")
                break


def _image_set_references(arguments: str) -> Iterator[tuple[str, bool]]:
    # A bare string is an image URL here (but not inside type()); url() reads as usual.
    for match in _IMAGE_SET_PART.finditer(arguments):
        if match.group("string") is not None:
            yield _css_unescape(match.group("string")[1:-1]), False
        elif match.group("url") is not None:
            yield from css_references(match.group("url"))


def _css_unescape(value: str) -> str:
    return _CSS_ESCAPE.sub(_css_escape_value, value)


def _css_escape_value(match: re.Match[str]) -> str:
    hex_digits, newline, char = match.groups()
    if hex_digits is not None:
        code = int(hex_digits, 16)
        valid = 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF
        return chr(code) if valid else "\ufffd"
    return "" if newline is not None else char


def _add_css(out: _Collector, text: str, url_source: str, import_source: str) -> None:
    for ref, is_import in css_references(text):
        out.add(ref, REQUISITE, import_source if is_import else url_source)


def _css_charset(body: bytes, content_type: str | None) -> str:
    # CSS Syntax "determine the fallback encoding": BOM > HTTP charset > @charset > UTF-8.
    declared = _CSS_CHARSET.match(body[:_PRESCAN_BYTES])
    codec = charset_codec(declared.group(1)) if declared else None
    if codec and codec.startswith("utf-16"):
        codec = "utf-8"  # an @charset readable as ASCII cannot be right about UTF-16
    return _bom(body) or _header_charset(content_type) or codec or "utf-8"


def extract_css(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Every url() and @import of a stylesheet, as requisites."""
    charset = _css_charset(body, content_type)
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
_ATTRIBUTE_RULES: dict[str, tuple[tuple[str, str, str], ...]] = {
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
_SPECIAL = frozenset({"link", "input", "meta", "body", "style", "base", "title", "svg"})
_PARSED = frozenset(_ATTRIBUTE_RULES) | _SPECIAL


class _LinkBearing(SoupStrainer):
    """Builds only elements that can carry a reference (with their subtrees).

    A plain SoupStrainer cannot say "these names OR any element with a style attribute".
    <body> is built only when it has a background or style attribute, since building it
    builds the whole page; <svg> is built so that an SVG <title> is not taken for the page's.
    """

    def allow_tag_creation(
        self, nsprefix: str | None, name: str, attrs: Mapping[Any, Any] | None
    ) -> bool:
        attrs = attrs or {}
        if name == "body":
            return "background" in attrs or "style" in attrs
        return name in _PARSED or "style" in attrs

    def allow_string_creation(self, string: str) -> bool:
        return False  # text outside the built elements is never needed


def extract_html(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Links (a, area) and page requisites of an HTML page, resolved against its base."""
    charset = sniff_charset(body, content_type)
    soup = _parse(_decode(body, charset))
    if soup is None:
        return Extracted((), None, charset, url)
    out = _Collector(_base_url(soup, url))
    for tag in soup.find_all(True):
        _add_tag(out, tag)
    return Extracted(out.links(), _title(soup), charset, out.base)


def _parse(text: str) -> BeautifulSoup | None:
    if "<" not in text:
        return None  # no element at all (and bs4 would warn that it looks like a file name)
    if text.startswith("<?xml"):
        text = " " + text  # XHTML: keeps bs4 from warning that this looks like XML
    try:
        return BeautifulSoup(text, "lxml", parse_only=_LinkBearing(), multi_valued_attributes=None)
    except ParserRejectedMarkup:
        return None


def _base_url(soup: BeautifulSoup, url: str) -> str:
    # The first <base> with an href sets the base of the whole document.
    base = soup.find("base", href=True)
    href = base.get("href") if isinstance(base, Tag) else None
    resolved = resolve(url, href) if isinstance(href, str) and href.strip() else None
    return resolved or url


def _title(soup: BeautifulSoup) -> str | None:
    for title in soup.find_all("title"):
        if title.find_parent("svg") is None:
            text = _WHITESPACE_RUN.sub(" ", title.get_text()).strip(_ASCII_WHITESPACE)
            return text or None
    return None


def _add_tag(out: _Collector, tag: Tag) -> None:
    for attr, kind, source in _ATTRIBUTE_RULES.get(tag.name, ()):
        value = _attr(tag, attr)
        if value is not None:
            _add_value(out, value, kind, source, attr)
    special = _SPECIAL_HANDLERS.get(tag.name)
    if special is not None:
        special(out, tag)
    style = _attr(tag, "style")
    if style:
        _add_css(out, style, "style-attr", "style-attr")


def _attr(tag: Tag, name: str) -> str | None:
    value = tag.get(name)
    return value if isinstance(value, str) else None


def _add_value(out: _Collector, value: str, kind: str, source: str, attr: str) -> None:
    refs: Iterable[str] = srcset_urls(value) if attr.endswith("srcset") else (value,)
    for ref in refs:
        out.add(ref, kind, source)


def _add_link_element(out: _Collector, tag: Tag) -> None:
    rels = set((_attr(tag, "rel") or "").lower().split())
    source = next((src for rel, src in _LINK_RELS if rel in rels), None)
    href = _attr(tag, "href")
    if source is not None and href is not None:
        out.add(href, REQUISITE, source)
    srcset = _attr(tag, "imagesrcset")
    if srcset is not None and source == "link-preload":
        _add_value(out, srcset, REQUISITE, "srcset", "imagesrcset")


def _add_input(out: _Collector, tag: Tag) -> None:
    src = _attr(tag, "src")
    if src is not None and (_attr(tag, "type") or "").strip().lower() == "image":
        out.add(src, REQUISITE, "input-image")


def _add_meta(out: _Collector, tag: Tag) -> None:
    content = _attr(tag, "content")
    if content and (_attr(tag, "http-equiv") or "").strip().lower() == "refresh":
        target = refresh_url(content)
        if target is not None:
            out.add(target, REQUISITE, "meta-refresh")


def _add_body(out: _Collector, tag: Tag) -> None:
    background = _attr(tag, "background")
    if background is not None:
        out.add(background, REQUISITE, "body-background")


def _add_style_block(out: _Collector, tag: Tag) -> None:
    _add_css(out, tag.get_text(), "style-block", "style-import")


_SPECIAL_HANDLERS = {
    "link": _add_link_element,
    "input": _add_input,
    "meta": _add_meta,
    "body": _add_body,
    "style": _add_style_block,
}


# --- dispatch -----------------------------------------------------------------------------

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def extract(body: bytes, url: str, mime: str, content_type: str | None = None) -> Extracted:
    """Extract by media type: HTML, XHTML or CSS; any other type has no links."""
    media_type = mime.partition(";")[0].strip().lower()
    if media_type in _HTML_TYPES:
        return extract_html(body, url, content_type)
    if media_type == "text/css":
        return extract_css(body, url, content_type)
    return Extracted((), None, sniff_charset(body, content_type), url)
