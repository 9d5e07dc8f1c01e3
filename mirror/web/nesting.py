"""A cheap estimate of how deeply an HTML text nests, before lxml parses it (pure: no I/O).

libxml2's HTML parser takes super-linear time on deeply nested markup (200,000 nested
`<div>`: minutes), while browsers flatten the DOM below a depth of a few hundred. So a page
is parsed only up to the point where its markup nests deeper than a limit: the regex scan
here is linear and costs a few milliseconds on an ordinary page.

The estimate counts start tags minus end tags of the elements that must be closed; void
elements and those whose end tag HTML lets one omit (`<p>`, `<li>`, `<td>`...) are not
counted, so ordinary sloppy markup never looks deep, while a `<table>` or a `<div>` that
keeps opening does.
"""

from __future__ import annotations

import re

#: elements that are counted as nesting only where they close: void ones, and those
#: whose end tag may be left out (HTML "optional tags"), which real pages often do
UNCOUNTED = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr", "keygen", "frame", "basefont", "isindex", "image",
    "p", "li", "dt", "dd", "tr", "td", "th", "tbody", "thead", "tfoot", "option",
    "optgroup", "rt", "rp", "colgroup", "caption", "html", "head", "body",
})
#: elements whose content is text, not markup: a "<div" inside a script is no element
RAW_TEXT = frozenset({"script", "style", "textarea", "title", "xmp", "plaintext"})
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9:-]*)([^>]*)>")


def too_deep_at(text: bytes, limit: int) -> int | None:
    """The offset in `text` of the tag that makes the markup nest deeper than `limit`
    counted elements, or None when it never does. `text` is the decoded body in its own
    charset: tags are ASCII in every charset a page may use but UTF-16 (not scanned)."""
    depth = 0
    pos = 0
    while (m := _TAG.search(text, pos)) is not None:
        pos = m.end()
        name = m.group(2).lower().decode("ascii")
        if name in UNCOUNTED:
            continue
        if m.group(1):
            depth = max(depth - 1, 0)
        elif not m.group(3).endswith(b"/"):
            depth += 1
            if depth > limit:
                return m.start()
            if name in RAW_TEXT:  # skip to its end tag
                end = re.compile(b"</" + name.encode(), re.IGNORECASE).search(text, pos)
                pos = len(text) if end is None else end.start()
    return None

