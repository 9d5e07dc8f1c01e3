"""progress.json: a running crawl's live numbers for another process to read (format, tiny I/O)."""

from __future__ import annotations

import json
import math
import os
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeGuard

from mirror.crawl.growth import Dominant, honest_eta
from mirror.model import Progress

#: seconds of (time, done) samples the rate is measured over
RATE_SPAN = 10.0

_FLOATS = frozenset({"updated", "started", "rate", "top_share"})
_OPTIONAL = {"growth": 0.0, "top_pattern": "", "top_share": 0.0, "top_sample": ""}


@dataclass(frozen=True)
class LiveProgress:
    """What progress.json holds: the numbers of the run that holds the archive's lock, at
    `updated`. `mirror run` rewrites it twice a second and removes it when it ends; one
    whose `updated` is long past (or whose `pid` is gone) was left by a process killed -9.
    Counts are this process's (a resumed run starts them at 0), except `queued`."""

    pid: int  # the `mirror run` process
    run_id: int
    updated: float  # unix time of these numbers
    started: float  # unix time this process started (or resumed) the run
    done: int  # URLs stored (any status, 4xx too)
    queued: int  # URLs of the run still to fetch (pending, waiting for a retry, in flight)
    failed: int  # URLs given up on
    retried: int  # tries that failed and will be tried again
    bytes: int  # body bytes stored
    held_back: int  # hosts held back by a 429/503 backoff or a long robots.txt Crawl-delay
    rate: float  # pages/s over the last RATE_SPAN seconds
    # seconds until `queued` is done at `rate`; None when rate is 0 or while the queue
    # grows (growth.honest_eta)
    eta: float | None
    # URLs/s the queue grew by over the last GROWTH_SPAN seconds (negative: it drains);
    # the keys below are optional in the file (written by mirror 0.x before issue 33 without)
    growth: float = 0.0
    top_pattern: str = ""  # the pattern of most recent new URLs, "" when none is (growth.py)
    top_share: float = 0.0  # its share of them, 0..1
    top_sample: str = ""  # its latest new URL

    @classmethod
    def of(cls, p: Progress, *, pid: int, started: float, updated: float,
           rate: float, growth: float = 0.0, top: Dominant | None = None) -> LiveProgress:
        return cls(pid=pid, run_id=p.run_id, updated=updated, started=started, done=p.done,
                   queued=p.queued, failed=p.failed, retried=p.retried, bytes=p.bytes,
                   held_back=p.held_back, rate=rate, eta=honest_eta(p.queued, rate, growth),
                   growth=growth, top_pattern=top.pattern if top else "",
                   top_share=top.share if top else 0.0, top_sample=top.sample if top else "")


def eta(queued: int, rate: float) -> float | None:
    """Seconds until `queued` URLs are done at `rate` pages/s; None when nothing moves."""
    return queued / rate if rate > 0 else None


class RateWindow:
    """Pages per second over the last `span` seconds, from (monotonic time, done) samples:
    the oldest sample kept is the last one taken at least `span` seconds ago."""

    def __init__(self, span: float = RATE_SPAN) -> None:
        self.span = span
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> float:
        """Record `done` at `now`; returns the rate."""
        self._samples.append((now, done))
        while len(self._samples) >= 2 and self._samples[1][0] <= now - self.span:
            self._samples.popleft()
        return self.rate()

    def rate(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        return max(d1 - d0, 0) / (t1 - t0) if t1 > t0 else 0.0


def write_progress(path: Path, live: LiveProgress) -> None:
    """Replace `path` at once (a temporary file beside it, then a rename), so that a reader
    sees the old numbers or the new ones, never half. No fsync: it is rewritten twice a
    second, and losing it to a crash loses nothing."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(live)), encoding="utf-8")
    os.replace(tmp, path)


def read_progress(path: Path) -> LiveProgress | None:
    """The numbers in `path`; None when it is missing, unreadable or malformed (never
    raises on its content). Keys it does not know are ignored."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return parse_progress(data)


def parse_progress(data: Any) -> LiveProgress | None:
    """A LiveProgress from decoded JSON, or None unless every field is there with its type:
    counts are integers >= 0, times and rates finite numbers >= 0, eta one or null."""
    if not isinstance(data, dict):
        return None
    values: dict[str, Any] = {}
    for f in fields(LiveProgress):
        value = data.get(f.name, _OPTIONAL.get(f.name))
        if f.name == "eta" and value is None and f.name in data:
            values[f.name] = None
        elif f.name == "growth":
            if not _number(abs(value) if isinstance(value, int | float) else value):
                return None
            values[f.name] = float(value)
        elif f.name in ("top_pattern", "top_sample"):
            if not isinstance(value, str):
                return None
            values[f.name] = value
        elif f.name in _FLOATS or f.name == "eta":
            if not _number(value):
                return None
            values[f.name] = float(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            values[f.name] = value
        else:
            return None
    return LiveProgress(**values)


def _number(value: object) -> TypeGuard[int | float]:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an integer too large for a float
        return False
