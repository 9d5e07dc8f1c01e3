"""Retention: which runs a prune keeps, by borg's rules (pure: no I/O, no clock).

`[retention] keep_last / keep_daily / keep_weekly / keep_monthly` mean what they mean to
borgmatic, which hands them to `borg prune`, so a policy written for one reads the same in
the other. borg's algorithm (borg/helpers, `prune_split`), applied to runs:

- The runs are taken newest first, by start time (then id). A rule walks them and keeps
  the newest run of each period it has not seen yet (a day, an ISO week, a month, in local
  time as borg does), until it has kept N runs. keep_last is borg's keep-secondly: every
  run is its own period, so the N newest; here a run's id is its period, which also holds
  when two runs start within the same second (borg assumes they never do).
- The rules run in that order (last, daily, weekly, monthly) and a run an earlier rule kept
  does not count for a later one: keep_last 1 + keep_daily 2 keeps today's run and the
  newest of each of the two days before (borg "compensates by keeping an older archive").
- A rule that runs out of runs before it has kept N keeps the oldest run too
  ("daily[oldest]"), so a young archive keeps its first snapshot.

Which runs count: only finished ones (complete, and limit: stopped at max_pages, which is
what the site file asked for), like borg, whose checkpoint archives never count against the
limits. A run that is still going or was interrupted (running, interrupted) is always kept:
the next `mirror run` resumes it, and it never pushes a complete run out. An abandoned run
(left behind by `mirror run --new-run`) is a partial snapshot nobody will finish: it does
not count and is dropped, as borg drops old checkpoints. The newest run is never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from mirror.model import UNFINISHED, Run, RunState

#: the rules, in the order they are applied (each skips what the ones before kept)
RULES = ("last", "daily", "weekly", "monthly")
#: the runs that count towards the limits
FINISHED = frozenset({RunState.COMPLETE, RunState.LIMIT})
UNFINISHED_WHY = "unfinished: the next `mirror run` resumes it"
NEWEST_WHY = "the newest run"


@dataclass(frozen=True)
class Retention:
    """How many runs each rule keeps (0: the rule is not used)."""

    keep_last: int = 0
    keep_daily: int = 0
    keep_weekly: int = 0
    keep_monthly: int = 0

    @classmethod
    def of(cls, section: object) -> Retention:
        """From anything with the four attributes (the site file's [retention])."""
        return cls(*(int(getattr(section, f"keep_{rule}", 0) or 0) for rule in RULES))

    def count(self, rule: str) -> int:
        return int(getattr(self, f"keep_{rule}"))

    def is_set(self) -> bool:
        return any(self.count(rule) > 0 for rule in RULES)

    def describe(self) -> str:
        """'keep_daily 7, keep_weekly 4' (the rules in use)."""
        used = [f"keep_{rule} {self.count(rule)}" for rule in RULES if self.count(rule) > 0]
        return ", ".join(used) or "no rule"


def start_time(run: Run, tz: tzinfo | None = None) -> datetime:
    """When the run started, in `tz` (None: this machine's local time, as borg uses)."""
    return datetime.fromisoformat(run.started_at).astimezone(tz)


def _periods(tz: tzinfo | None) -> dict[str, Callable[[Run], object]]:
    return {
        "last": lambda r: r.id,
        "daily": lambda r: start_time(r, tz).date(),
        "weekly": lambda r: start_time(r, tz).isocalendar()[:2],  # (ISO year, ISO week)
        "monthly": lambda r: start_time(r, tz).strftime("%Y-%m"),
    }


def runs_to_keep(runs: Iterable[Run], keep_last: int = 0, keep_daily: int = 0,
                 keep_weekly: int = 0, keep_monthly: int = 0, *,
                 tz: tzinfo | None = None) -> dict[int, str]:
    """The runs to keep, each with why: run id -> "daily #3", "weekly[oldest] #2",
    "unfinished: ...", "the newest run". Every run not in it is dropped."""
    runs = list(runs)
    policy = Retention(keep_last, keep_daily, keep_weekly, keep_monthly)
    kept = {r.id: UNFINISHED_WHY for r in runs if r.state in UNFINISHED}
    counted = sorted((r for r in runs if r.state in FINISHED),
                     key=lambda r: (start_time(r), r.id), reverse=True)
    periods = _periods(tz)
    for rule in RULES:
        _split(counted, rule, policy.count(rule), periods[rule], kept)
    if runs:
        newest = max(runs, key=lambda r: r.id)
        kept.setdefault(newest.id, NEWEST_WHY)
    return kept


def _split(runs: Sequence[Run], rule: str, n: int, period: Callable[[Run], object],
           kept: dict[int, str]) -> None:
    """borg's prune_split: the newest run of each of the n newest periods, skipping runs
    already kept (their period still counts as seen); the oldest run if n is not reached."""
    if n <= 0 or not runs:
        return
    taken, last = 0, None
    for run in runs:
        this = period(run)
        if this == last:
            continue
        last = this
        if run.id not in kept:
            taken += 1
            kept[run.id] = f"{rule} #{taken}"
            if taken == n:
                return
    oldest = runs[-1]
    if oldest.id not in kept:
        kept[oldest.id] = f"{rule}[oldest] #{taken + 1}"
