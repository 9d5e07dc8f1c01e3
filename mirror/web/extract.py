"""Find the links and page requisites of an HTML or CSS body (pure: no I/O)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import chain

from lxml import etree

from mirror.model import PageText
from mirror.web.charset import css_charset, decode_text, sniff_charset
from mirror.web.css import css_references
from mirror.web.html import (
    ATTRIBUTE_RULES,
    LINK_RELS,
    REQUISITE,
    base_url,
    refresh_url,
    srcset_urls,
    title_text,
)
from mirror.web.http import HTML_TYPES
from mirror.web.urls import _Resolver

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
    kind: str  # html.LINK or html.REQUISITE
    source: str  # which markup produced it: a key of SOURCES


@dataclass(frozen=True)
class Extracted:
    links: tuple[Link, ...]  # document order; repeats of the same (url, kind) dropped
    title: str | None  # HTML <title> text, whitespace collapsed; None if absent or empty
    charset: str  # the Python codec the body was decoded with
    base: str  # effective base URL (after <base href>)
    needs_browser: str | None = None  # why the page looks built by scripts (browser_hint)
    text: str | None = None  # visible text (visible_text): blocks on lines, at most MAX_TEXT
    #: (name lower-cased, content) of each <meta name content>, in document order (the
    #: robots directives are read from them: web.robotsmeta)
    metas: tuple[tuple[str, str], ...] = ()


class _Collector:
    """Resolves references against one base and keeps the first Link per (url, kind)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.resolve = _Resolver(base)
        self._links: dict[tuple[str, str], Link] = {}
        self.metas: list[tuple[str, str]] = []

    def add(self, ref: str, kind: str, source: str) -> None:
        url = self.resolve(ref)
        if url is not None and (url, kind) not in self._links:
            self._links[url, kind] = Link(url, kind, source)

    def links(self) -> tuple[Link, ...]:
        return tuple(self._links.values())


# --- CSS (the scanner is mirror/web/css.py) -----------------------------------------------


def _add_css(out: _Collector, text: str, url_source: str, import_source: str) -> None:
    for ref, is_import in css_references(text):
        out.add(ref, REQUISITE, import_source if is_import else url_source)


def extract_css(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Every url() and @import of a stylesheet, as requisites."""
    charset = css_charset(body, content_type)
    out = _Collector(url)
    _add_css(out, decode_text(body, charset), "css-url", "css-import")
    return Extracted(out.links(), None, charset, url)


# --- HTML ---------------------------------------------------------------------------------

#: ids and attributes of the element a script-built app renders into
APP_ROOT_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "q-app"})
APP_ROOT_ATTRIBUTES = ("ng-app", "data-reactroot", "ng-version")
#: visible characters under which a page that runs scripts is only a shell
TINY_TEXT = 200
_HIDDEN = frozenset({"script", "style", "template", "noscript", "title", "head"})
#: most characters of a page's text kept for search and diffs (about 15,000 words)
MAX_TEXT = 100_000
#: elements that start a new line of text: words either side of them never run together
BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2",
    "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "option", "p", "pre",
    "section", "summary", "table", "td", "th", "tr", "ul", "button", "label", "select",
    "textarea", "img",
})
#: inline elements that end a word: menus of links often have no space between them
SPACED = frozenset({"a", "input"})
# ... and <html>: libxml2 puts what follows a closed </html> in a second <html>, and drops
# the whitespace between the two
_SPACED_TOO = SPACED | {"html"}


def browser_hint(text: int, scripts: int, empty_root: str | None,
                 noscript: str) -> str | None:
    """Why a page may need a browser to archive (scripts build what it shows), or None."""
    said = noscript.lower()
    if scripts and empty_root is not None:
        return f"an empty app root ({empty_root}) that scripts fill"
    if "javascript" in said and any(w in said for w in ("enable", "requir", "need", "turn on")):
        return "its <noscript> asks for JavaScript"
    if scripts and text < TINY_TEXT:
        return f"{text} characters of text and {scripts} script{'s' if scripts > 1 else ''}"
    return None


# Elements extraction reads (with any element that has a style attribute): those that can
# hold a reference, and <base>, whose href applies to the references before it too.
_KEPT = frozenset(ATTRIBUTE_RULES) | {"link", "input", "meta", "body", "style", "base"}
#: elements an app root may be; and, with them, the other elements a page's shell signs read
_ROOT_TAGS = frozenset({"div", "main", "section", "app-root"})
_SIGNS = _ROOT_TAGS | {"title", "script", "noscript"}

# (tag, attributes, text): text is a <style>'s text, None for the other elements.
_Element = tuple[str, Mapping[str, str], str | None]


@dataclass(frozen=True)
class _Page:
    elements: list[_Element]
    title: str | None  # the text of the first <title> outside SVG
    needs_browser: str | None = None
    text: str | None = None


#: control characters (other than whitespace) are not text; search marks use two of them
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
# The text transform marks block edges and link edges with two noncharacters, which Unicode
# keeps for a program's own use and a page has no reason to hold (one that does gets a line
# break or a space where it had them).
#: between two blocks: a line break in the text (a newline in the markup is only a space)
_BLOCK = "\ufdd0"
#: at the edges of a link: a space, unless punctuation follows ("<a>here</a>, and")
_SOFT_SPACE = "\ufdd1"
_PUNCTUATION = frozenset(",.;:!?)]")


def visible_text(marked: str) -> str | None:
    """The text a page shows, from the text transform's output (marks at block and link
    edges), as lines: one per block (paragraph, list item, cell), whitespace inside a line
    collapsed, empty lines dropped, cut to MAX_TEXT characters at a word's end. None when
    the page shows no text."""
    lines = []
    size = 0
    for line in marked.split(_BLOCK):
        if size > MAX_TEXT:
            break  # the lines so far are more than is kept
        if _SOFT_SPACE in line:
            line = _soft_spaces(line)
        if line.isprintable() and "  " not in line:
            line = line.strip(" ")  # no whitespace but single spaces, no control character
        else:
            line = " ".join(line.split())
            if not line.isprintable():
                line = _CONTROLS.sub("", line)
        if line:
            lines.append(line)
            size += len(line) + 1
    text = "\n".join(lines)
    if len(text) > MAX_TEXT:
        cut = text.rfind(" ", 0, MAX_TEXT + 1)
        text = text[:cut if cut > MAX_TEXT // 2 else MAX_TEXT]
    return text or None


def _soft_spaces(line: str) -> str:
    """A line with each run of soft spaces made a space, or nothing before punctuation or
    next to a space already there."""
    first, *rest = line.split(_SOFT_SPACE)
    out = [first]
    for part in rest:
        if part:
            if part[0] not in _PUNCTUATION and part[0] != " " and out[-1][-1:] not in " ":
                out.append(" ")
            out.append(part)
    return "".join(out)


def _text_transform() -> etree.XSLT:
    """An XSLT program that gives a tree's shown text, with _BLOCK at the start and end of
    each block and _SOFT_SPACE at each edge of a link, in one pass in C."""
    def match(tags: Iterable[str]) -> str:
        return "|".join(sorted(tags))
    return etree.XSLT(etree.XML(
        '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
        '<xsl:output method="text" encoding="utf-8"/>'
        f'<xsl:template match="{match(_HIDDEN)}"/>'
        f'<xsl:template match="{match(BLOCKS)}"><xsl:text>{_BLOCK}</xsl:text>'
        f'<xsl:apply-templates/><xsl:text>{_BLOCK}</xsl:text></xsl:template>'
        f'<xsl:template match="{match(_SPACED_TOO)}"><xsl:text>{_SOFT_SPACE}</xsl:text>'
        f'<xsl:apply-templates/><xsl:text>{_SOFT_SPACE}</xsl:text></xsl:template>'
        "</xsl:stylesheet>"))


def _marked_text(root: etree._Element, deep: bool) -> str:
    """The shown text of a tree with its block and link edges marked (_text_transform).

    A tree deeper than XSLT's template depth (only a tree built past libxml2's own depth
    limit, see _parse) is walked instead: the same marks, a slower way.
    """
    if not deep:
        try:
            return str(_parsers.transform(root))
        except etree.XSLTApplyError:
            pass
    out: list[str] = []
    for top in _tops(root):
        walk = etree.iterwalk(top, events=("start", "end", "comment", "pi"))
        for event, el in walk:
            if event == "start":
                if el.tag in _HIDDEN:
                    walk.skip_subtree()
                    continue
                out += (_MARKS.get(el.tag, ""), el.text or "")
            elif event == "end":
                if el.tag not in _HIDDEN:
                    out.append(_MARKS.get(el.tag, ""))
                if el is not top:
                    out.append(el.tail or "")
            else:  # a comment or processing instruction: only the text after it is shown
                out.append(el.tail or "")
    return "".join(out)


def _tops(root: etree._Element) -> list[etree._Element]:
    """The document's top elements (see _SPACED_TOO)."""
    return [root, *root.itersiblings(etree.Element)]


_MARKS = {**dict.fromkeys(BLOCKS, _BLOCK), **dict.fromkeys(_SPACED_TOO, _SOFT_SPACE)}


class _Parsers(threading.local):
    """One libxml2 HTML parser and one text transform per thread, used for page after page:
    lxml lets only one thread use either at a time."""

    def __init__(self) -> None:
        self.parser = self.new_parser()
        self.transform = _text_transform()

    @staticmethod
    def new_parser() -> etree.HTMLParser:
        # huge_tree: libxml2 builds trees up to 2,048 levels deep instead of 256
        return etree.HTMLParser(recover=True, huge_tree=True)


_parsers = _Parsers()


def extract_html(body: bytes, url: str, content_type: str | None = None) -> Extracted:
    """Links (a, area) and page requisites of an HTML page, resolved against its base."""
    charset = sniff_charset(body, content_type)
    page = _parse(decode_text(body, charset))
    if page is None:
        return Extracted((), None, charset, url)
    out = _Collector(_base_url(page.elements, url))
    for tag, attrib, text in page.elements:
        _add_element(out, tag, attrib, text)
    title = None if page.title is None else title_text(page.title)
    return Extracted(out.links(), title, charset, out.base, page.needs_browser, page.text,
                     tuple(out.metas))


def _parse(text: str) -> _Page | None:
    """What extraction reads of a page, from the tree libxml2's HTML parser builds of it;
    None if it has no markup.

    text goes in as str: lxml gives it to libxml2 as UTF-8 and says so, so a <meta charset>
    in the page cannot make libxml2 decode it again; the charset sniffed here stays the
    authority. libxml2 stops building a tree 2,048 levels deep, which unclosed tags in
    broken markup reach: such a page is parsed again into a tree lxml builds from the
    parser's events, which has no depth limit (and takes three times as long).
    """
    if "<" not in text:
        return None
    text = text.removeprefix("\ufeff")  # a second BOM goes too (libxml2 skips a third)
    parser = _parsers.parser
    deep = False
    try:
        parser.feed(text)
        root = parser.close()
        error = parser.feed_error_log.last_error
        if error is not None and error.type == etree.ErrorTypes.ERR_RESOURCE_LIMIT:
            deep = True
            events = etree.HTMLParser(recover=True, target=etree.TreeBuilder())
            events.feed(text)
            root = events.close()
    except (etree.LxmlError, UnicodeError, LookupError):
        _parsers.parser = _parsers.new_parser()  # its state is unknown
        return None
    return None if root is None else _read(root, deep)


def _read(root: etree._Element, deep: bool) -> _Page:
    """The elements, title, shell signs and shown text of a parsed page."""
    elements: list[_Element] = []
    title: str | None = None
    scripts = 0
    noscripts: list[etree._Element] = []
    roots: list[tuple[str, etree._Element]] = []
    for el in chain.from_iterable(top.iter(etree.Element) for top in _tops(root)):
        tag, attrib = el.tag, el.attrib
        if tag in _KEPT or "style" in attrib:
            elements.append((tag, attrib, (el.text or "") if tag == "style" else None))
        if tag not in _SIGNS:
            continue
        if tag == "script":
            scripts += 1
        elif tag == "noscript":
            noscripts.append(el)
        elif tag == "title":
            if title is None and next(el.iterancestors("svg"), None) is None:
                title = el.text or ""
        else:
            name = attrib.get("id", "")
            if name in APP_ROOT_IDS or tag == "app-root" or any(
                    a in attrib for a in APP_ROOT_ATTRIBUTES):
                roots.append((name or tag, el))
    empty_root = next((name for name, el in roots if _empty(el)), None)
    noscript = " ".join(t for el in noscripts for t in el.itertext())
    text = visible_text(_marked_text(root, deep))
    return _Page(elements, title, browser_hint(_shown(text), scripts, empty_root, noscript),
                 text)


def _shown(text: str | None) -> int:
    """The characters of a visible text but its spaces and line breaks: exact up to
    TINY_TEXT, all browser_hint tells apart. Past 2 * TINY_TEXT characters, at least half
    are neither (visible_text never puts two together), and len(text) is enough."""
    if text is None:
        return 0
    if len(text) > 2 * TINY_TEXT:
        return len(text)
    return len(text) - text.count(" ") - text.count("\n")


def _empty(root: etree._Element) -> bool:
    """Whether an app root shows nothing: no element in it, and no text, or only text
    inside an element whose text is not shown."""
    if next(root.iterchildren(etree.Element), None) is not None:
        return False
    return (next(root.iterancestors(*_HIDDEN), None) is not None
            or not "".join(root.xpath("text()")).strip())


def _base_url(elements: list[_Element], url: str) -> str:
    # The first <base> with an href sets the base of the whole document.
    href = next((a["href"] for tag, a, _ in elements if tag == "base" and "href" in a), None)
    return base_url(url, href)


def _add_element(
    out: _Collector, tag: str, attrib: Mapping[str, str], text: str | None
) -> None:
    for attr, kind, source in ATTRIBUTE_RULES.get(tag, ()):
        value = attrib.get(attr)
        if value is not None:
            _add_value(out, value, kind, source, attr)
    special = _SPECIAL_HANDLERS.get(tag)
    if special is not None:
        special(out, attrib)
    if text is not None:
        _add_css(out, text, "style-block", "style-import")
    style = attrib.get("style")
    if style:
        _add_css(out, style, "style-attr", "style-attr")


def _add_value(out: _Collector, value: str, kind: str, source: str, attr: str) -> None:
    refs: Iterable[str] = srcset_urls(value) if attr.endswith("srcset") else (value,)
    for ref in refs:
        out.add(ref, kind, source)


def _add_link_element(out: _Collector, attrib: Mapping[str, str]) -> None:
    rels = set(attrib.get("rel", "").lower().split())
    source = next((src for rel, src in LINK_RELS if rel in rels), None)
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
    name = attrib.get("name")
    if name is not None and content is not None:
        out.metas.append((name.strip().lower(), content))
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


def page_text(found: Extracted) -> PageText | None:
    """What search and diffs keep of an extracted HTML page: its title and text, if any."""
    return PageText(found.title, found.text) if found.title or found.text else None


def extract(body: bytes, url: str, mime: str, content_type: str | None = None) -> Extracted:
    """Extract by media type: HTML, XHTML or CSS; any other type has no links."""
    media_type = mime.partition(";")[0].strip().lower()
    if media_type in HTML_TYPES:
        return extract_html(body, url, content_type)
    if media_type == "text/css":
        return extract_css(body, url, content_type)
    return Extracted((), None, sniff_charset(body, content_type), url)
