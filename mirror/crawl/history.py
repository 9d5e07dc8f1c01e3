"""Incremental runs: conditional requests, revisit decisions and what changed between runs."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from mirror.model import IDENTICAL, NOT_MODIFIED, Exchange, Original, Previous, Revisit, Via

GONE_STATUSES = frozenset({404, 410})


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


@dataclass(frozen=True)
class Changes:
    """How one run's captures compare with an earlier run's (I2). `pending`: URLs of the
    earlier run that this one has not reached yet (it was stopped, or stopped at a limit);
    a resumed run that reaches them moves them to the other kinds (J2)."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"new": len(self.new), "changed": len(self.changed),
                "unchanged": len(self.unchanged), "gone": len(self.gone),
                "pending": len(self.pending)}


def compare(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]], *,
            complete: bool, failed: Collection[str] = (),
            queued: Collection[str] = ()) -> Changes:
    """Classify URLs by their (status, payload digest) in two runs.

    new: only in `after`; gone: was there (not 404/410) and is now 404/410, or missing from
    a `complete` run (no longer linked); pending: missing from a run that is not complete
    (interrupted, running, stopped at a limit), so not reached, not gone; unchanged: same
    payload (a 304 counts as the same); changed: anything else. A URL of `failed` (the
    later run's failed URLs) that has no capture is none of these: the run counts it as
    failed. `queued`: URLs the later run still has in its frontier (it is not complete);
    those it found itself, not in `before`, are pending too (a first run stopped early has
    them all).
    """
    changes = Changes()
    waiting = set() if complete else set(queued) - before.keys() - after.keys()
    for url in sorted(before.keys() | after.keys() | waiting):
        old, new = before.get(url), after.get(url)
        if url in waiting:
            changes.pending.append(url)
        elif old is None:
            changes.new.append(url)
        elif old[0] in GONE_STATUSES and (new is None or new[0] in GONE_STATUSES):
            continue  # missing then, missing now: nothing to say
        elif new is None and url in failed:
            continue  # no answer this time: a failure, not a sign it is gone
        elif new is None:
            (changes.gone if complete else changes.pending).append(url)
        elif new[0] in GONE_STATUSES:
            changes.gone.append(url)
        elif new[0] == 304 or (new[1] == old[1] and new[0] == old[0]):
            changes.unchanged.append(url)
        else:
            changes.changed.append(url)
    return changes
