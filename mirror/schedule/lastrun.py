"""<archive>/scheduled.json: the last start of `mirror run --scheduled` (what an OS timer
ran), with the run it worked on and how it ended. Written when the scheduled start begins
and again when it ends, so a start that never reached a run (another scheduled run already
waiting, an error before the manifest) is known too. The app reads it."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from mirror.model import Run

NAME = "scheduled.json"


@dataclass(frozen=True)
class ScheduledStart:
    started: str  # YYYY-mm-ddTHH:MM:SSZ
    pid: int
    finished: str | None = None  # None: still going (or killed)
    exit_code: int | None = None
    run: int | None = None  # the manifest's run it worked on (None: it reached none)
    skipped: str | None = None  # why no run took place


def path(archive: Path) -> Path:
    return archive / NAME


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def begin(archive: Path) -> ScheduledStart:
    start = ScheduledStart(utc_now(), os.getpid())
    _write(archive, start)
    return start


def end(archive: Path, start: ScheduledStart, code: int, run: int | None,
        skipped: str | None = None) -> ScheduledStart:
    done = replace(start, finished=utc_now(), exit_code=code, run=run, skipped=skipped)
    _write(archive, done)
    return done


def read(archive: Path) -> ScheduledStart | None:
    """The record, or None when there is none or it cannot be read."""
    try:
        data = json.loads(path(archive).read_bytes())
        return ScheduledStart(**{k: data.get(k) for k in ScheduledStart.__dataclass_fields__})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _write(archive: Path, start: ScheduledStart) -> None:
    """Atomically (never half a file for a reader); a folder that cannot be written is no
    reason to fail the run: the record is left out."""
    target = path(archive)
    temp = target.with_name(f".{NAME}.{os.getpid()}.tmp")
    try:
        archive.mkdir(parents=True, exist_ok=True)
        temp.write_text(json.dumps(asdict(start)) + "\n", encoding="utf-8")
        os.replace(temp, target)
    except OSError:
        temp.unlink(missing_ok=True)


def run_of(before: Run | None, after: Run | None, start: ScheduledStart) -> int | None:
    """The run a scheduled start worked on, from the archive's last run before and after
    it: a new run, or one that ended since the start (an interrupted run it resumed)."""
    if after is None:
        return None
    if before is None or after.id != before.id or (after.finished_at or "") >= start.started:
        return after.id
    return None
