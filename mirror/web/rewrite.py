"""Rewrite the links of archived HTML and CSS through a mapping function (pure: no I/O)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lxml import etree
from lxml import html as lxml_html

# The charsets, the CSS tokenizer and the HTML attribute table that link extraction uses, so
# that what the crawler fetched is exactly what replay rewrites.
from mirror.web.charset import css_charset, decode_text, sniff_charset
from mirror.web.css import reference_spans, reference_value
from mirror.web.html import ATTRIBUTE_RULES, base_url, refresh_url, srcset_urls
from mirror.web.urls import resolve

#: absolute URL without fragment -> the reference to write instead; None: not archived
Mapper = Callable[[str], str | None]

INERT_CSS_URL = "about:invalid"  # what CSS gets for a resource that was not archived
DATA_PREFIX = "data-mirror-"  # the original of an inert reference is kept in such an attribute

# Attributes that hold one URL (or a srcset), by element: every one link extraction reads,
# and the navigational ones it has no reason to (forms, table backgrounds, SVG links).
_URL_ATTRS: dict[str, tuple[str, ...]] = {
    tag: tuple(attr for attr, _kind, _source in rules) for tag, rules in ATTRIBUTE_RULES.items()
}
for _tag, _attrs in {
    "a": ("xlink:href",), "link": ("href", "imagesrcset"), "input": ("src", "formaction"),
    "button": ("formaction",), "form": ("action",), "body": ("background",),
    "table": ("background",), "td": ("background",), "th": ("background",),
}.items():
    _URL_ATTRS[_tag] = _URL_ATTRS.get(_tag, ()) + _attrs
# Subresource integrity cannot hold for rewritten bodies; CORS mode fails from file://;
# pings would reach the live site.
_DROPPED_ATTRS = ("integrity", "crossorigin", "ping")
_INERT_META = frozenset({"content-security-policy", "set-cookie"})
_REFRESH_DELAY = re.compile(r"[\t\n\f\r ]*[0-9.]*")
_CSS_CHARSET_RULE = re.compile(r'^@charset "[^"]*";')


def map_reference(base: str, ref: str, mapper: Mapper) -> str | None:
    """The new reference for `ref` found in a document at `base`: mapped when it resolves to
    an http(s) URL (the fragment kept), None when the mapper says it is not archived, and
    `ref` itself when it is nothing to map (a fragment, mailto:, data:, javascript:...)."""
    url = resolve(base, ref)
    if url is None or not url.lower().startswith(("http:", "https:")):
        return ref
    url, hashmark, fragment = url.partition("#")
    new = mapper(url)
    if new is None:
        return None
    return new + hashmark + fragment


# --- CSS ----------------------------------------------------------------------------------


def _css_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ")
    return f'"{escaped}"'


def rewrite_css(text: str, base: str, mapper: Mapper) -> str:
    """Every url(), image-set() and @import reference mapped; not archived -> about:invalid."""
    out: list[str] = []
    pos = 0
    for start, end in reference_spans(text):
        ref = reference_value(text[start:end])
        new = map_reference(base, ref, mapper)
        if new != ref:
            out += [text[pos:start], _css_string(INERT_CSS_URL if new is None else new)]
            pos = end
    out.append(text[pos:])
    return "".join(out)


def rewrite_css_bytes(body: bytes, url: str, content_type: str | None, mapper: Mapper) -> bytes:
    """A stylesheet rewritten and re-encoded as UTF-8 (its @charset rule says so too)."""
    text = decode_text(body, css_charset(body, content_type))
    text = _CSS_CHARSET_RULE.sub('@charset "utf-8";', rewrite_css(text, url, mapper))
    return text.encode("utf-8")


# --- HTML ---------------------------------------------------------------------------------
#
# Rewriting changes a tree and serializes it: lxml.html builds it with libxml2's HTML parser,
# the parser link extraction reads its own tree with (extract.py).

_PARSER = lxml_html.HTMLParser(encoding="utf-8", huge_tree=True)
_DOCTYPE = re.compile(r"\s*(?:<!--.*?-->\s*)*<!doctype", re.I | re.S)


@dataclass(frozen=True)
class Rewritten:
    """An HTML page rewritten: its body as UTF-8, and its title."""

    body: bytes  # UTF-8
    title: str | None  # the page's <title> text, whitespace collapsed


def parse_html(body: bytes, content_type: str | None) -> tuple[str, Any]:
    """(text, root element or None) of an HTML body decoded by its charset (P7)."""
    text = decode_text(body, sniff_charset(body, content_type))
    if "<" not in text:
        return text, None
    try:
        return text, lxml_html.document_fromstring(text.encode("utf-8"), parser=_PARSER)
    except (etree.ParserError, ValueError):
        return text, None


def html_title(body: bytes, content_type: str | None) -> str | None:
    """The <title> of a page (not an SVG's), whitespace collapsed; None if none or empty."""
    return _title(parse_html(body, content_type)[1])


def rewrite_html(
    body: bytes, url: str, content_type: str | None, mapper: Mapper, *, head: str = "",
    prepare: Callable[[Any], None] | None = None,
) -> Rewritten:
    """An HTML page with every reference mapped, re-encoded as UTF-8.

    Its <base href> is applied then removed, archived charset declarations are replaced by
    one <meta charset="utf-8"> (followed by `head`, markup to add) at the top of the head,
    archived CSP and set-cookie <meta> made inert; a reference the mapper does not know is
    made inert: the attribute moves to data-mirror-<attr> (CSS gets about:invalid).
    `prepare` changes the parsed tree first (a rendered DOM made inert: web/inert.py).
    """
    text, root = parse_html(body, content_type)
    if root is None:  # not markup at all: nothing to rewrite
        return Rewritten(text.encode("utf-8"), None)
    if prepare is not None:
        prepare(root)
    base = _base_url(root, url)
    for el in list(root.iter(etree.Element)):
        if el.tag == "meta" and _charset_meta(el):
            el.drop_tree()
        else:
            _rewrite_element(el, base, mapper)
    _insert_head(root, '<meta charset="utf-8">' + head)
    return Rewritten(_serialize(root, bool(_DOCTYPE.match(text))).encode("utf-8"), _title(root))


def _serialize(root: Any, doctype: bool) -> str:
    if doctype:
        return str(lxml_html.tostring(root.getroottree(), encoding="unicode"))
    # libxml2 adds an HTML 4.0 doctype to a page without one; leave the page as it was
    before = [lxml_html.tostring(n, encoding="unicode", with_tail=False)
              for n in reversed(list(root.itersiblings(preceding=True)))]
    return "".join(before) + str(lxml_html.tostring(root, encoding="unicode"))


def _title(root: Any) -> str | None:
    if root is None:
        return None
    for title in root.iter("title"):
        if not any(a.tag == "svg" for a in title.iterancestors()):
            return " ".join(title.text_content().split()) or None
    return None


def _base_url(root: Any, url: str) -> str:
    href = next((el.get("href") for el in root.iter("base") if el.get("href")), None)
    return base_url(url, href)


def _charset_meta(el: Any) -> bool:
    return "charset" in el.attrib or (el.get("http-equiv") or "").strip().lower() == "content-type"


def _rewrite_element(el: Any, base: str, mapper: Mapper) -> None:
    for attr in _URL_ATTRS.get(el.tag, ()):
        value = el.get(attr)
        if value is not None:
            _rewrite_attr(el, attr, value, base, mapper)
    for attr in _DROPPED_ATTRS:
        el.attrib.pop(attr, None)
    if el.tag == "base":
        el.attrib.pop("href", None)  # every reference is resolved against it already
    elif el.tag == "meta":
        _rewrite_meta(el, base, mapper)
    elif el.tag == "style" and el.text:
        el.text = rewrite_css(el.text, base, mapper)
    style = el.get("style")
    if style:
        el.set("style", rewrite_css(style, base, mapper))


def _rewrite_attr(el: Any, attr: str, value: str, base: str, mapper: Mapper) -> None:
    if attr.endswith("srcset"):
        new, dropped = _rewrite_srcset(value, base, mapper)
        if dropped:
            el.set(_data_name(attr), value)
    else:
        new = map_reference(base, value, mapper)
        if new is None:
            el.set(_data_name(attr), resolve(base, value) or value)
    if new is None:
        del el.attrib[attr]
    elif new != value:
        el.set(attr, new)


def _data_name(attr: str) -> str:
    return DATA_PREFIX + attr.replace(":", "-")


def _rewrite_srcset(value: str, base: str, mapper: Mapper) -> tuple[str | None, bool]:
    """Each candidate's URL mapped, its descriptors kept; candidates not archived dropped."""
    urls = srcset_urls(value)
    starts: list[int] = []
    pos = 0
    for url in urls:
        pos = value.find(url, pos)
        starts.append(pos)
        pos += len(url)
    candidates = []
    for i, url in enumerate(urls):
        end = starts[i + 1] if i + 1 < len(urls) else len(value)
        descriptors = value[starts[i] + len(url) : end].strip().rstrip(",").strip()
        new = map_reference(base, url, mapper)
        if new is not None:
            candidates.append(f"{new} {descriptors}".strip())
    return ", ".join(candidates) or None, len(candidates) < len(urls)


def _rewrite_meta(el: Any, base: str, mapper: Mapper) -> None:
    equiv = (el.get("http-equiv") or "").strip().lower()
    content = el.get("content")
    if equiv in _INERT_META:
        el.set(_data_name("http-equiv"), el.attrib.pop("http-equiv"))
    elif equiv == "refresh" and content:
        target = refresh_url(content)
        if target is None:
            return
        new = map_reference(base, target, mapper)
        if new is None:
            el.set(_data_name("content"), el.attrib.pop("content"))
        else:
            delay = _REFRESH_DELAY.match(content)
            el.set("content", f"{(delay.group() if delay else '').strip() or '0'}; url={new}")


def _insert_head(root: Any, markup: str) -> None:
    """Put markup first in <head> (made if missing) so that the charset declaration is
    within the first 1024 bytes."""
    head = root.find("head")
    if head is None:
        head = etree.Element("head")
        root.insert(0, head)
    for i, node in enumerate(lxml_html.fragments_fromstring(markup)):
        head.insert(i, node)
