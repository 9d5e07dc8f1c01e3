"""What the home screen says of a site, from the truth on disk: manifest, lock, reports."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from mirror.archive.fsutil import disk_usage
from mirror.archive.lock import ArchiveLock
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader, Run
from mirror.model import SNAPSHOT_CODES, UNFINISHED, RunState
from mirror.run.health import Health, health, numbers_of
from mirror.run.progressfile import LiveProgress, read_progress
from mirror.run.wait import waiting
from mirror.schedule.spec import Schedule, next_run, period

#: a progress file not rewritten for this long is a leftover (its writer rewrites it twice a
#: second; the pid check catches the rest)
STALE_AFTER = 30.0


class SiteState(StrEnum):
    NEVER_RUN = "never run"
    IDLE = "idle"
    RUNNING = "running"
    BUSY = "busy"  # the lock is held by something that is not a run (verify, index)
    INTERRUPTED = "interrupted"  # resumable: the next `mirror run` takes it up
    FAILED = "failed"  # the last run ended on an internal error, or archived ~nothing (runhealth)
    BROKEN = "broken"  # the site file cannot be used


def classify(holder: str | None, last: Run | None, live: bool,
             failure: str | None = None) -> SiteState:
    """The state of a site from who holds its lock, its last run, whether a live
    progress file of the lock's holder exists, and what the last run's report says went
    wrong (`failure`, runhealth: it stored no page, ...), whatever its exit code."""
    if holder is not None:
        running = live or (last is not None and last.state == RunState.RUNNING)
        return SiteState.RUNNING if running else SiteState.BUSY
    if last is None:
        return SiteState.NEVER_RUN
    if last.state in UNFINISHED:
        return SiteState.INTERRUPTED
    if last.exit_code not in SNAPSHOT_CODES or failure:
        return SiteState.FAILED
    return SiteState.IDLE


@dataclass(frozen=True)
class RunSummary:
    """One run, with the numbers of its report when it has one."""

    id: int
    state: str
    started_at: str
    finished_at: str | None
    exit_code: int | None
    duration: float | None = None
    captures: int | None = None
    #: new, changed, unchanged, gone, pending (not reached yet: an interrupted run), failed
    changes: dict[str, int] = field(default_factory=dict)
    broken_links: int | None = None  # None: no report (the manifest has to say)
    failure: str | None = None  # the run failed (runhealth): what and why, from its report
    #: its pages said nofollow (report.nofollow_warning): why it archived so little
    robots_warning: str | None = None


@dataclass(frozen=True)
class SiteStatus:
    state: SiteState
    holder: str | None = None  # pid holding the lock
    live: LiveProgress | None = None
    last: RunSummary | None = None  # the last finished run (or the interrupted one)
    pages: int = 0
    warc_bytes: int = 0  # of its WARC files
    disk_bytes: int = 0  # of the whole archive folder (WARC, manifest, index, reports), as du
    broken_links: int = 0
    error: str | None = None  # why the archive cannot be read
    waiting: str | None = None  # pid of a scheduled run waiting for the lock's holder


class Reports:
    """Report summaries, read once per file version (a 10,000-URL report is ~1 MB of JSON)."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[int, dict[str, object]]] = {}

    def summary(self, layout: ArchiveLayout, run: Run) -> RunSummary:
        data = self.load(layout.report(run.id))
        changes = data.get("changes", {})
        counts = changes.get("counts", {}) if isinstance(changes, dict) else {}
        duration, captures = data.get("duration"), data.get("captures")
        broken, listed = data.get("broken_links_total"), data.get("broken_links")
        if not isinstance(broken, int) and isinstance(listed, list) and len(listed) < 50:
            broken = len(listed)  # a report from before broken_links_total, not cut short
        verdict = health(numbers_of(data, run.state not in UNFINISHED)) if data else Health()
        return RunSummary(run.id, run.state, run.started_at, run.finished_at, run.exit_code,
                          float(duration) if isinstance(duration, int | float) else None,
                          captures if isinstance(captures, int) else None,
                          {k: v for k, v in counts.items() if isinstance(v, int)},
                          broken if isinstance(broken, int) else None,
                          verdict.text() or None, robots_warning(data))

    def load(self, path: Path) -> dict[str, object]:
        """The report's JSON without its long lists; {} when missing or unreadable."""
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return {}
        cached = self._seen.get(path)
        if cached is None or cached[0] != stamp:
            try:
                data = json.loads(path.read_bytes())
            except (OSError, ValueError):
                data = {}
            if not isinstance(data, dict):
                data = {}
            cached = self._seen[path] = (stamp, data)
        return cached[1]


def robots_warning(report: dict[str, object]) -> str | None:
    """The report's word on pages that said nofollow (report.nofollow_warning), if any."""
    said = report.get("meta_robots")
    warning = said.get("warning") if isinstance(said, dict) else None
    return warning if isinstance(warning, str) else None


def live_progress(layout: ArchiveLayout, holder: str | None) -> LiveProgress | None:
    """The running process's own numbers, when the lock's holder wrote them lately."""
    if holder is None:
        return None
    live = read_progress(layout.progress)
    if live is None or str(live.pid) != holder:
        return None
    return live


def site_status(root: Path, reports: Reports) -> SiteStatus:
    """Everything the home screen row shows, read from the archive folder."""
    layout = ArchiveLayout(root)
    holder = ArchiveLock.holder(root)
    live = live_progress(layout, holder)
    warc_bytes = _warc_bytes(layout.warc)
    disk = disk_usage(root)  # what deleting the archive would free (the Remove page says it)
    if not layout.manifest.exists():
        state = SiteState.RUNNING if live else (SiteState.BUSY if holder else SiteState.NEVER_RUN)
        return SiteStatus(state, holder, live, warc_bytes=warc_bytes, disk_bytes=disk)
    try:
        manifest = ManifestReader(layout.manifest)
    except ManifestError as exc:
        if holder is not None:  # the first run is creating it: no tables yet
            return SiteStatus(SiteState.RUNNING if live else SiteState.BUSY, holder, live,
                              warc_bytes=warc_bytes, disk_bytes=disk)
        return SiteStatus(SiteState.FAILED, holder, live, error=str(exc))
    try:
        runs = [r for r in manifest.runs.all() if r.state != RunState.ABANDONED]
        last = runs[-1] if runs else None
        ended = reports.summary(layout, last) if last and holder is None else None
        state = classify(holder, last, live is not None, ended.failure if ended else None)
        shown = last
        if state == SiteState.RUNNING and len(runs) > 1:
            shown = runs[-2]  # the row's "last run" is the last one that ended
        elif state == SiteState.RUNNING:
            shown = None
        summary = reports.summary(layout, shown) if shown else None
        broken = summary.broken_links if summary else 0
        if summary and broken is None:  # the report says it, else an SQL count (~30 ms
            broken = manifest.counts.broken_links_total(summary.id)  # over 10,000 captures)
        return SiteStatus(
            state, holder, live, last=summary, pages=manifest.counts.pages(),
            warc_bytes=warc_bytes, disk_bytes=disk, broken_links=broken or 0,
            waiting=waiting(root) if holder else None)
    except ManifestError as exc:
        return SiteStatus(SiteState.FAILED, holder, live, error=str(exc))
    finally:
        manifest.close()


def _warc_bytes(folder: Path) -> int:
    try:
        with os.scandir(folder) as entries:
            return sum(e.stat().st_size for e in entries if ".warc" in e.name and e.is_file())
    except OSError:
        return 0


# --- the schedule column ----------------------------------------------------------------------

#: the longest a scheduled run may start late before it counts as missed (less for short
#: periods: half of one)
GRACE = dt.timedelta(hours=1)


@dataclass(frozen=True)
class ScheduleView:
    """What the row says of a site's [schedule]; times are on `now`'s clock."""

    every: str
    next_run: dt.datetime | None
    flags: tuple[str, ...] = ()  # missed, failed, still going when due, a run waiting


def schedule_view(schedule: Schedule | None, status: SiteStatus,
                  now: dt.datetime) -> ScheduleView | None:
    """The schedule, its next run and what is wrong: a run missed (none since a due time
    more than a grace ago), the last run failed, a run still going when the next was due
    (that one waits for it, one at most). None when the site is not scheduled. Pure:
    `now` is aware, and the run times (UTC in the manifest) are put on its clock."""
    if schedule is None:
        return None
    flags = []
    if status.live is not None:
        started = dt.datetime.fromtimestamp(status.live.started, now.tzinfo)
        due = next_run(schedule, started)
        if due is not None and due <= now:
            flags.append(f"still running when the next run was due ({at_text(due, now)}); "
                         "that one waits for it")
    elif status.last is not None and status.state in (SiteState.IDLE, SiteState.FAILED,
                                                        SiteState.INTERRUPTED):
        if (missed := _missed(schedule, status.last, now)) is not None:
            flags.append(f"missed the run due {at_text(missed, now)}")
        if status.state != SiteState.IDLE:
            ended = "failed" if status.state == SiteState.FAILED else "was interrupted"
            code = status.last.exit_code
            flags.append(f"the last run {ended}" + (f" (exit {code})" if code is not None else ""))
    if status.waiting:
        flags.append(f"a scheduled run (pid {status.waiting}) waits for the lock")
    return ScheduleView(schedule.text, next_run(schedule, now), tuple(flags))


def _missed(schedule: Schedule, last: RunSummary, now: dt.datetime) -> dt.datetime | None:
    """The first due time after the last run's last sign of life, if it passed more than a
    grace ago (GRACE, or half a period for schedules more often than every two hours)."""
    times = [t for t in (_utc(last.started_at), _utc(last.finished_at)) if t is not None]
    if not times:
        return None
    due = next_run(schedule, max(times).astimezone(now.tzinfo))
    if due is None:
        return None
    grace = min(GRACE, period(schedule, due) / 2)
    return due if due + grace <= now else None


def _utc(iso: str | None) -> dt.datetime | None:
    """A manifest time (YYYY-mm-ddTHH:MM:SSZ) as an aware datetime; None if absent or odd."""
    try:
        return dt.datetime.strptime(iso or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def at_text(moment: dt.datetime, now: dt.datetime) -> str:
    """'today 03:15', 'Tue 03:15' within six days either way, else '2024-03-05 03:15'."""
    days = (moment.date() - now.date()).days
    if days == 0:
        return moment.strftime("today %H:%M")
    return moment.strftime("%a %H:%M" if abs(days) < 7 else "%Y-%m-%d %H:%M")
