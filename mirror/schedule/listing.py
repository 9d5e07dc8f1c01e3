"""`mirror schedule list`: each site's schedule, its timer, next run and last run."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.model import Run
from mirror.schedule.spec import Schedule, next_run
from mirror.schedule.timers import Installed, Site


def when(moment: dt.datetime | None) -> str:
    """'Tue 2024-03-05 03:15' (local time), or 'never'."""
    return moment.strftime("%a %Y-%m-%d %H:%M") if moment else "never"


def next_text(schedule: Schedule, now: dt.datetime) -> str:
    return when(next_run(schedule, now))


def last_run(archive: Path) -> Run | None:
    """The archive's last run, from its manifest (None: no run yet, or unreadable)."""
    path = ArchiveLayout(archive).manifest
    if not path.exists():
        return None
    try:
        reader = ManifestReader(path)
    except ManifestError:
        return None
    try:
        return reader.runs.last()
    finally:
        reader.close()


def run_text(run: Run | None) -> str:
    """'run 5, complete (exit 0), started 2024-03-05 03:15:02 UTC' or 'none yet'."""
    if run is None:
        return "none yet"
    code = "" if run.exit_code is None else f" (exit {run.exit_code})"
    started = run.started_at.replace("T", " ").removesuffix("Z")
    return f"run {run.id}, {run.state}{code}, started {started} UTC"


@dataclass(frozen=True)
class Row:
    site: str
    file: Path
    every: str  # the schedule, or "-"
    timer: str  # what is installed, and whether it is what the file says
    next: str
    last: str


def timer_text(site: Site, have: Installed) -> str:
    found = have.describe(site.file)
    if site.schedule is None:
        return (f"{' and '.join(found)}, but {site.why or 'it is not scheduled'}: "
                "`mirror schedule apply` removes it") if found else "-"
    if not found:
        return "none: run `mirror schedule apply`"
    stale = "" if have.current(site) else " (out of date: run `mirror schedule apply`)"
    return " and ".join(found) + stale


def row(site: Site, archive: Path | None, have: Installed, now: dt.datetime) -> Row:
    schedule = site.schedule
    return Row(site.name, site.file, schedule.text if schedule else "-", timer_text(site, have),
               next_text(schedule, now) if schedule else "-",
               run_text(last_run(archive)) if archive else "-")


def render(rows: list[Row]) -> str:
    if not rows:
        return "no scheduled sites and no timers of mirror"
    out = []
    for r in rows:
        out.append(f"{r.site}  ({r.file})\n  every  {r.every}\n  timer  {r.timer}\n"
                   f"  next   {r.next}\n  last   {r.last}")
    return "\n".join(out)
