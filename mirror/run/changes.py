"""What changed between two runs (pure): each URL new, changed, unchanged, gone or pending."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field

GONE_STATUSES = frozenset({404, 410})


KINDS = ("new", "changed", "unchanged", "gone", "pending")
#: a capture's (URL, status, payload digest), as a run's captures are walked by URL
Seen = tuple[str, int, str]
Pair = tuple[int, str]
#: what _merged gives as a URL's capture in the later run when it is only queued there
QUEUED: Pair = (-1, "queued")


@dataclass(frozen=True)
class Changes:
    """How one run's captures compare with an earlier run's (I2). `pending`: URLs of the
    earlier run that this one has not reached yet (it was stopped, or stopped at a limit);
    a resumed run that reaches them moves them to the other kinds (J2). Each list holds the
    first URLs of its kind (all of them unless a `keep` cut it short); `totals` counts them
    all."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {kind: self.totals.get(kind, len(getattr(self, kind))) for kind in KINDS}


def compare(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]], *,
            complete: bool, failed: Collection[str] = (),
            queued: Collection[str] = ()) -> Changes:
    """Classify URLs by their (status, payload digest) in two runs (compare_walks, for two
    runs held in memory)."""
    return compare_walks(((u, *before[u]) for u in sorted(before)),
                         ((u, *after[u]) for u in sorted(after)),
                         complete=complete, failed=failed, queued=queued)


def compare_walks(before: Iterable[Seen], after: Iterable[Seen], *, complete: bool,
                  failed: Collection[str] = (), queued: Collection[str] = (),
                  keep: int | None = None) -> Changes:
    """Classify URLs by their (status, payload digest) in two runs, each walked in URL order
    (a URL given twice: its last capture counts), holding only the lists (at most `keep`
    URLs of each kind, all counted).

    new: only in `after`; gone: was there (not 404/410) and is now 404/410, or missing from
    a `complete` run (no longer linked); pending: missing from a run that is not complete
    (interrupted, running, stopped at a limit), so not reached, not gone; unchanged: same
    payload (a 304 counts as the same); changed: anything else. A URL of `failed` (the
    later run's failed URLs) that has no capture is none of these: the run counts it as
    failed. `queued`: URLs the later run still has in its frontier (it is not complete);
    those it found itself, not in `before`, are pending too (a first run stopped early has
    them all).
    """
    lists: dict[str, list[str]] = {kind: [] for kind in KINDS}
    totals = dict.fromkeys(KINDS, 0)

    def note(kind: str, url: str) -> None:
        totals[kind] += 1
        if keep is None or len(lists[kind]) < keep:
            lists[kind].append(url)

    waiting = iter(sorted(set(queued))) if not complete and queued else iter(())
    for url, old, new in _merged(_last_each(before), _last_each(after), waiting):
        kind = "pending" if new is QUEUED else _kind(url, old, new, complete, failed)
        if kind:
            note(kind, url)
    return Changes(**lists, totals=totals)


def _kind(url: str, old: Pair | None, new: Pair | None, complete: bool,
          failed: Collection[str]) -> str:
    """The kind of change of a URL captured in either run."""
    if old is None:
        return "new"
    if old[0] in GONE_STATUSES and (new is None or new[0] in GONE_STATUSES):
        return ""  # missing then, missing now: nothing to say
    if new is None and url in failed:
        return ""  # no answer this time: a failure, not a sign it is gone
    if new is None:
        return "gone" if complete else "pending"
    if new[0] in GONE_STATUSES:
        return "gone"
    if new[0] == 304 or (new[1] == old[1] and new[0] == old[0]):
        return "unchanged"
    return "changed"


def _last_each(walk: Iterable[Seen]) -> Iterator[Seen]:
    """One (URL, status, digest) per URL: the last of each run of one URL."""
    last: Seen | None = None
    for seen in walk:
        if last is not None and seen[0] != last[0]:
            yield last
        last = seen
    if last is not None:
        yield last


def _merged(before: Iterator[Seen], after: Iterator[Seen], queued: Iterator[str]
            ) -> Iterator[tuple[str, Pair | None, Pair | None]]:
    """(URL, before's (status, digest) or None, after's or None), for every URL of either
    walk, in URL order; a URL of `queued` (sorted) in neither walk comes as (URL, None,
    QUEUED)."""
    a, b, q = next(before, None), next(after, None), next(queued, None)
    while a is not None or b is not None or q is not None:
        first = min(x for x in (a and a[0], b and b[0], q) if x is not None)
        old = (a[1], a[2]) if a is not None and a[0] == first else None
        new = (b[1], b[2]) if b is not None and b[0] == first else None
        if old is None and new is None:
            new = QUEUED
        if a is not None and a[0] == first:
            a = next(before, None)
        if b is not None and b[0] == first:
            b = next(after, None)
        if q == first:
            q = next(queued, None)
        yield first, old, new
