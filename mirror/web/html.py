"""HTML that extraction and rewriting both read: URL attributes, srcset, refresh, base, title."""

from __future__ import annotations

import re

from mirror.model import LinkKind
from mirror.web.urls import resolve

LINK = LinkKind.LINK  # navigation: the crawler follows it within scope and depth
REQUISITE = LinkKind.REQUISITE  # needed to render the page: fetched with it

# (attribute, kind, source) read from every element of that name: the kind and source of the
# extract.Link it makes (extract.SOURCES lists the sources). Rewriting maps these and more.
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
LINK_RELS = (
    ("stylesheet", "link-stylesheet"),
    ("preload", "link-preload"),
    ("modulepreload", "link-preload"),
    ("icon", "link-icon"),  # also "shortcut icon"
    ("apple-touch-icon", "link-icon"),
    ("apple-touch-icon-precomposed", "link-icon"),
    ("mask-icon", "link-icon"),
    ("manifest", "link-manifest"),
)


# --- attribute values ---------------------------------------------------------------------

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


# --- <base> and <title> -------------------------------------------------------------------


def base_url(url: str, href: str | None) -> str:
    """The base URL of the document at url whose first <base> with an href has this one
    (None: no such <base>): href resolved against url, or url when that gives nothing."""
    resolved = resolve(url, href) if href is not None and href.strip() else None
    return resolved or url


def title_text(text: str) -> str | None:
    """A <title>'s text as document.title has it: ASCII whitespace stripped and collapsed;
    None if nothing is left."""
    return _WHITESPACE_RUN.sub(" ", text).strip(_ASCII_WHITESPACE) or None
