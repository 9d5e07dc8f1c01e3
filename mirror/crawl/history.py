"""Incremental runs: conditional requests and revisit decisions."""

from __future__ import annotations

from mirror.model import IDENTICAL, NOT_MODIFIED, Exchange, Original, Previous, Revisit, Via


def usable(prev: Previous | None) -> Previous | None:
    """A previous capture worth revalidating: a complete 200."""
    if prev is None or prev.status != 200 or prev.truncated:
        return None
    return prev


def conditional_headers(prev: Previous | None) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from the URL's last good capture (I1)."""
    prev = usable(prev)
    headers: dict[str, str] = {}
    if prev is not None and prev.etag:
        headers["If-None-Match"] = prev.etag
    if prev is not None and prev.last_modified:
        headers["If-Modified-Since"] = prev.last_modified
    return headers


def revisit_of(original: Original, profile: str) -> Revisit:
    return Revisit(profile, original.record_id, original.url, original.warc_date,
                   original.payload_digest)


def not_modified(ex: Exchange, prev: Previous | None) -> Original | None:
    """The capture a 304 confirms, if we asked for one."""
    prev = usable(prev)
    if ex.status == 304 and prev is not None and (prev.etag or prev.last_modified):
        return prev.original
    return None


def dedupable(ex: Exchange) -> bool:
    """Only a complete, non-empty 2xx payload can stand for another record's. A 3xx or an
    error answer is always stored whole: its body is small, and some replayers (wabac.js)
    answer an identical-payload revisit with the original's headers, so a redirect that
    shares its body with another would replay to the other's target."""
    return (200 <= ex.status < 300 and ex.body_length > 0 and not ex.truncated
            and bool(ex.payload_digest))


def choose_revisit(
    ex: Exchange, prev: Previous | None, same_digest: Original | None
) -> tuple[Revisit | None, Original | None]:
    """(revisit to write instead of a response, the capture holding the payload), or
    (None, None) to store a full response."""
    confirmed = not_modified(ex, prev)
    if confirmed is not None:
        return revisit_of(confirmed, NOT_MODIFIED), confirmed
    if same_digest is not None and dedupable(ex) and same_digest.status == ex.status:
        return revisit_of(same_digest, IDENTICAL), same_digest
    return None, None


def capture_kind(ex: Exchange, revisit: Revisit | None, original: Original | None,
                 url_via: str, run_id: int) -> str:
    """What kind of capture this is, as the crash-point tests enumerate them."""
    if url_via == Via.ROBOTS:
        return "robots"
    if revisit is not None and original is not None:
        if revisit.profile == NOT_MODIFIED:
            return "not-modified"
        where = "same-url" if original.url == ex.url else "other-url"
        when = "same-run" if original.run_id == run_id else "earlier-run"
        return f"revisit-{where}-{when}"
    if ex.truncated:
        return "truncated"
    if 300 <= ex.status < 400:
        return "redirect"
    return "response" if ex.status < 400 else "error"
