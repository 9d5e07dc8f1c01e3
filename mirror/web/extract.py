"""Find the links and page requisites of an HTML or CSS body (pure: no I/O)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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


class ShellSigns:
    """Signs, gathered during the parse, that a page is an empty shell that scripts fill:
    its visible text, its scripts, an app root left empty, a <noscript> asking for
    JavaScript (see browser_hint)."""

    def __init__(self) -> None:
        self.text = 0  # visible characters, whitespace left out
        self.scripts = 0
        self.empty_root: str | None = None
        self.noscript: list[str] = []
        self.hidden = 0  # depth inside elements whose text is not shown
        self._noscript = 0
        self._depth = 0
        self._root: tuple[str, int] | None = None  # an app root, while nothing is in it

    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        self._depth += 1
        self._root = None  # an element inside it: the app root is not empty
        if tag == "script":
            self.scripts += 1
        if tag in _HIDDEN:
            self.hidden += 1
            self._noscript += tag == "noscript"
        elif self.empty_root is None and tag in ("div", "main", "section", "app-root"):
            name = attrib.get("id", "")
            if name in APP_ROOT_IDS or tag == "app-root" or any(
                    a in attrib for a in APP_ROOT_ATTRIBUTES):
                self._root = (name or tag, self._depth)

    def end(self, tag: str) -> None:
        if self._root and self._root[1] == self._depth:
            self.empty_root, self._root = self._root[0], None
        self._depth -= 1
        if tag in _HIDDEN and self.hidden:
            self.hidden -= 1
            self._noscript -= tag == "noscript" and self._noscript > 0

    def data(self, text: str) -> None:
        if self._noscript:
            self.noscript.append(text)
        if self.hidden or (self.text >= TINY_TEXT and self._root is None):
            return  # past TINY_TEXT the count no longer matters: no work on the hot path
        if not text.strip():
            return
        self._root = None
        self.text += len("".join(text.split()))

    def hint(self) -> str | None:
        return browser_hint(self.text, self.scripts, self.empty_root,
                            " ".join(self.noscript))


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
        self.shell = ShellSigns()
        self.visible: list[str] = []  # text runs shown, with _BLOCK at block edges
        self._visible_size = 0

    def _break(self, tag: str) -> None:
        visible = self.visible
        if tag in BLOCKS:
            if visible and visible[-1] == _SOFT_SPACE:
                visible[-1] = _BLOCK
            elif visible and visible[-1] != _BLOCK:
                visible.append(_BLOCK)
        elif tag in SPACED and visible and visible[-1] not in (_SOFT_SPACE, _BLOCK):
            visible.append(_SOFT_SPACE)  # a space if text follows, unless punctuation

    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        self.shell.start(tag, attrib)
        self._break(tag)
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
        self.shell.end(tag)
        self._break(tag)
        if tag == "svg":
            self._svg_depth -= 1
        elif tag == self._text_tag:
            self._text, self._text_tag = None, ""

    def data(self, text: str) -> None:
        self.shell.data(text)
        if self._text is not None:
            self._text.append(text)
        elif not self.shell.hidden and self._visible_size < MAX_TEXT:
            visible = self.visible
            if visible and visible[-1] == _SOFT_SPACE:
                visible[-1] = "" if text[:1] in _PUNCTUATION else " "
            visible.append(text)
            self._visible_size += len(text)

    def close(self) -> _Page:
        """What the parse found; the target is then ready for the next document."""
        page = _Page(self.elements, self.title, self.shell.hint(), visible_text(self.visible))
        self._reset()
        return page


@dataclass(frozen=True)
class _Page:
    elements: list[_Element]
    title: list[str] | None
    needs_browser: str | None = None
    text: str | None = None


#: control characters (other than whitespace) are not text; search marks use two of them
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
#: at the edges of a link: a space, unless punctuation follows ("<a>here</a>, and")
_SOFT_SPACE = "\x1f"
#: between two blocks: a line break in the text (a newline in the markup is only a space)
_BLOCK = "\x1e"
_PUNCTUATION = frozenset(",.;:!?)]")


def visible_text(runs: list[str]) -> str | None:
    """The text runs a page shows, as lines: one per block (paragraph, list item, cell),
    whitespace inside a line collapsed, empty lines dropped, cut to MAX_TEXT characters at
    a word's end. None when the page shows no text."""
    lines = (" ".join(line.split()) for line in "".join(runs).split(_BLOCK))
    text = _CONTROLS.sub("", "\n".join(line for line in lines if line))
    if len(text) > MAX_TEXT:
        cut = text.rfind(" ", 0, MAX_TEXT + 1)
        text = text[:cut if cut > MAX_TEXT // 2 else MAX_TEXT]
    return text or None


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
    page = _parse(decode_text(body, charset))
    if page is None:
        return Extracted((), None, charset, url)
    out = _Collector(_base_url(page.elements, url))
    for tag, attrib, text in page.elements:
        _add_element(out, tag, attrib, text)
    title = None if page.title is None else title_text("".join(page.title))
    return Extracted(out.links(), title, charset, out.base, page.needs_browser, page.text)


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
    return base_url(url, href)


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
