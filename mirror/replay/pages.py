"""What the replay server's own pages share: replay addresses, their policies, marked text."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlencode

#: the server's own pages: no script, no frame, nothing from elsewhere
UI_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'"
#: the frame page: the banner's script and its questions go to this server only, and the
#: archived page below it is a frame of this server (which keeps REPLAY_CSP)
FRAME_CSP = ("default-src 'none'; script-src 'self'; connect-src 'self'; frame-src 'self'; "
             "style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'; "
             "frame-ancestors 'self'")
#: the compare page: two archived pages side by side, in frames; still no script
COMPARE_CSP = UI_CSP + "; frame-src 'self'"

#: the modifier of an archived page shown as it is, without a banner (the frame's address)
PAGE = "mp_"
RAW = "id_"
#: the timestamp of "the newest capture"
NEWEST = "99991231235959"

_TARGET = re.compile(r"/(\d{1,14}|)(\*|id_|mp_)?/(.+)", re.S)
#: /<url> with no timestamp: only an absolute http(s) URL, so that a root-relative path a
#: script built (/api/x) still goes to the page that asked (serve's Referer fallback)
_LATEST = re.compile(r"/(https?:/.+)", re.S | re.I)
_SCHEME_SLASHES = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):/*")
_MODES = {"*": "list", RAW: "raw", PAGE: "page", "": "replay"}


@dataclass(frozen=True)
class Target:
    """What a replay path asks for: /<ts>/<url> (replay: for a browser's top-level page, the
    frame page), /<ts>mp_/<url> (the page itself), /<ts>id_/<url> (as archived, not
    rewritten), /<ts>*/<url> or /*/<url> (the list of captures), /<url> (the newest)."""

    timestamp: str
    mode: str  # replay | page | raw | list | latest
    url: str


def parse_target(path_qs: str) -> Target | None:
    match = _TARGET.fullmatch(path_qs)
    if match is None:
        latest = _LATEST.fullmatch(path_qs)
        return Target(NEWEST, "latest", _absolute(latest.group(1))) if latest else None
    ts, modifier, url = match.groups()
    if not ts and modifier != "*":
        return None
    return Target(ts or NEWEST, _MODES[modifier or ""], _absolute(url))


def _absolute(url: str) -> str:
    # proxies and browsers may squeeze 'http://' in a path to 'http:/'
    url = _SCHEME_SLASHES.sub(lambda m: m.group(1).lower() + "://", url, count=1)
    return url if "://" in url else "http://" + url


def replay_path(timestamp: str, url: str, modifier: str = "") -> str:
    """/<ts>/<url> (with a banner for a browser), /<ts>mp_/<url> (the page itself) or
    /<ts>id_/<url> (the bytes as archived)."""
    return f"/{timestamp}{modifier}/{url}"


def run_timestamp(iso: str | None) -> str | None:
    """A run time (2026-11-24T10:00:00Z) as a replay timestamp (20261124100000)."""
    digits = re.sub(r"\D", "", iso or "")[:14]
    return digits if len(digits) == 14 else None


def shown_time(timestamp: str) -> str:
    """A 14-digit timestamp for people: 2026-11-24 10:00:00 UTC."""
    t = timestamp.ljust(14, "0")
    return f"{t[:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]} UTC"


def history_href(url: str) -> str:
    return "/_history?" + urlencode({"url": url})


def marked_html(text: str, marks: tuple[tuple[int, int], ...]) -> str:
    """Text escaped, its [start, end) spans in <mark>."""
    out, at = [], 0
    for start, end in sorted(marks):
        if start < at or end > len(text):  # overlapping or out of range: leave it plain
            continue
        out.append(html.escape(text[at:start]))
        out.append(f"<mark>{html.escape(text[start:end])}</mark>")
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def number(text: str) -> int | None:
    """A query-string value as a number, or None ('²' and '٣' are digits to str.isdigit)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


def attr(value: object) -> str:
    """A value for a double-quoted HTML attribute."""
    return html.escape(str(value), quote=True)
