"""HTTP facts both sides share: header maps, the headers as archived, media types, statuses."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: header names (lower-case) whose values are credentials: shown as REDACTED, never logged
#: nor archived (P9)
SECRET_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
REDACTED = "<redacted>"
#: the redirects a crawler follows and a replay sends on
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: media types parsed and rewritten as HTML
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: response headers renamed so replay tools do not try to undo framing we already removed
RENAMED_PREFIX = "X-Mirror-Orig-"
_MIME_END = re.compile(r"[;\s]")


def mime_of(content_type: str | None) -> str | None:
    """The media type as cdxj-indexer writes it: the Content-Type up to the first ';' or space."""
    if not content_type:
        return None
    return _MIME_END.split(content_type, 1)[0].strip() or None


def fix_response_headers(
    headers: Iterable[tuple[str, str]], body_length: int
) -> list[tuple[str, str]]:
    """Headers as stored: Transfer-Encoding renamed (we store the de-chunked body) and
    Content-Length set to the stored length, the original kept under a renamed header."""
    out: list[tuple[str, str]] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "transfer-encoding":
            out.append((RENAMED_PREFIX + name, value))
        elif lower == "set-cookie":
            out.append((name, redact_set_cookie(value)))
        elif lower == "content-length":
            if value.strip() != str(body_length):
                out.append((RENAMED_PREFIX + name, value))
        else:
            out.append((name, value))
    out.append(("Content-Length", str(body_length)))
    return out


def redact_set_cookie(value: str) -> str:
    """A Set-Cookie as archived: the cookie's value REDACTED, its name and attributes kept."""
    pair, semi, attributes = value.partition(";")
    name, eq, _ = pair.partition("=")
    return f"{name.strip()}={REDACTED}{semi}{attributes}" if eq else REDACTED + semi + attributes


def header_map(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased names; the first value wins (as most clients do for Location)."""
    out: dict[str, str] = {}
    for name, value in headers:
        out.setdefault(name.lower(), value)
    return out


def redact_request_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(n, REDACTED if n.lower() in SECRET_HEADERS else v) for n, v in headers]

