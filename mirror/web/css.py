"""Scan CSS text for the URLs it references: url(), image-set() strings and @import (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterator

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
                yield unescape(value[1:-1] if quoted else value), name.startswith("import")
                break


def reference_spans(text: str, offset: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of every url(), image-set() string and @import reference, quotes included:
    where a rewriter puts the new reference. The same tokens as css_references()."""
    for match in _CSS_TOKEN.finditer(text):
        arguments = match.group("image_set")
        if arguments is not None:
            start = match.start("image_set")
            for part in _IMAGE_SET_PART.finditer(arguments):
                if part.group("string") is not None:
                    yield offset + start + part.start("string"), offset + start + part.end("string")
                elif part.group("url") is not None:
                    yield from reference_spans(part.group("url"), offset + start + part.start())
            continue
        name = next((n for n in _REFERENCE_GROUPS if match.group(n) is not None), None)
        if name is not None:
            yield offset + match.start(name), offset + match.end(name)


def reference_value(raw: str) -> str:
    """The URL a reference span holds: quotes removed, CSS escapes undone."""
    return unescape(raw[1:-1] if raw[:1] in ('"', "'") else raw)


def _image_set_references(arguments: str) -> Iterator[tuple[str, bool]]:
    # A bare string is an image URL here (but not inside type()); url() reads as usual.
    for match in _IMAGE_SET_PART.finditer(arguments):
        if match.group("string") is not None:
            yield unescape(match.group("string")[1:-1]), False
        elif match.group("url") is not None:
            yield from css_references(match.group("url"))


def unescape(value: str) -> str:
    """CSS escapes (\\41, \\\", escaped newlines) undone."""
    return _CSS_ESCAPE.sub(_css_escape_value, value)


def _css_escape_value(match: re.Match[str]) -> str:
    hex_digits, newline, char = match.groups()
    if hex_digits is not None:
        code = int(hex_digits, 16)
        valid = 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF
        return chr(code) if valid else "\ufffd"
    return "" if newline is not None else char
