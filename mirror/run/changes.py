"""What changed between two runs (pure): each URL new, changed, unchanged, gone or pending."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

GONE_STATUSES = frozenset({404, 410})


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
