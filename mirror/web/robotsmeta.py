"""A page's robots directives: `<meta name="robots">` and the `X-Robots-Tag` header (pure).

What a crawler obeys of them is `noindex` (the page is recorded as not for an index) and
`nofollow` (its links are not followed; its requisites still are); `none` is both. Other
directives (noarchive, nosnippet, max-snippet: ..., unavailable_after: ...) are for search
engines' result pages and are ignored, as are `rel=nofollow` on single links (a hint about
ranking, which wget and Heritrix do not follow either).

    <meta name="robots" content="noindex, nofollow">   every crawler
    <meta name="mirror" content="nofollow">            only the crawler whose User-Agent
                                                       product token is "mirror"
    X-Robots-Tag: noindex                              every crawler
    X-Robots-Tag: otherbot: noindex, nofollow          only otherbot

Names, directives and agents are case-insensitive; directives are separated by commas
(whitespace too, as wget reads them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NOINDEX = "noindex"
NOFOLLOW = "nofollow"
#: the directives obeyed, and what `none` stands for
OBEYED = frozenset({NOINDEX, NOFOLLOW})
#: the header's name, lower-cased as web.http.header_map keeps it
HEADER = "x-robots-tag"
#: directives that take a value after a colon: "max-snippet: 20" names no agent
_WITH_VALUE = frozenset({"unavailable_after", "max-snippet", "max-image-preview",
                         "max-video-preview"})
_SPLIT = re.compile(r"[,\s]+")


def directives(content: str) -> frozenset[str]:
    """The obeyed directives of one meta content or one header group ("noindex, follow")."""
    words = {w for w in _SPLIT.split(content.lower()) if w}
    if "none" in words:
        return OBEYED
    return OBEYED.intersection(words)


def meta_directives(metas: Iterable[tuple[str, str]], agent: str) -> frozenset[str]:
    """The directives of a page's `<meta name content>` pairs (names lower-cased) that
    speak to every robot ("robots") or to this one (`agent`, its product token)."""
    found: frozenset[str] = frozenset()
    agent = agent.lower()
    for name, content in metas:
        if name == "robots" or (agent and name == agent):
            found |= directives(content)
    return found


def header_directives(value: str | None, agent: str) -> frozenset[str]:
    """The directives of X-Robots-Tag values (several headers: joined by newlines) that
    speak to every robot (no agent before them) or to `agent`. An "agent:" prefix holds
    for the directives after it, to the end of that header."""
    if not value:
        return frozenset()
    agent = agent.lower()
    found: set[str] = set()
    for line in value.lower().splitlines():
        target = ""
        for part in line.split(","):
            name, colon, rest = part.partition(":")
            name = name.strip()
            if colon and name not in _WITH_VALUE and " " not in name:
                target, part = name, rest
            if not target or target == agent:
                found |= directives(part)
    return frozenset(found)


def robots_value(found: frozenset[str]) -> str | None:
    """The directives as one stored word list ("noindex,nofollow"), None when none."""
    return ",".join(sorted(found)) if found else None


def header_values(headers: Iterable[tuple[str, str]]) -> str | None:
    """Every X-Robots-Tag value of a response, joined by newlines (header_directives
    reads them apart: an agent prefix holds only in its own header)."""
    values = [v.replace("\n", " ") for n, v in headers if n.lower() == HEADER]
    return "\n".join(values) if values else None
