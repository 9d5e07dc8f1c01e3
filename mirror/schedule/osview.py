"""What the OS will do for a site, read from the OS as `mirror schedule list` reads it: the
timer installed (systemd user units or a crontab line), whether it is what the site file
says, and when the OS runs it next (systemd's own NextElapseUSecRealtime where a user
manager runs; for cron, the installed line's five fields, which are what cron reads).
Reading is one `crontab -l` and, with a user manager, one `systemctl --user show`; the
rest is pure."""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from mirror.schedule import systemd
from mirror.schedule.spec import ScheduleError, next_run, parse_schedule
from mirror.schedule.timers import Installed, Site

_SHOWN = ("Id", "NextElapseUSecRealtime", "LastTriggerUSec", "ActiveState")


@dataclass(frozen=True)
class UnitTimes:
    """A loaded timer as systemd reports it."""

    next: dt.datetime | None
    last: dt.datetime | None
    active: str  # ActiveState: active, inactive, failed, ...


@dataclass
class OsTimers:
    """This user's timers of mirror, as the OS has them now."""

    have: Installed
    manager: bool  # a systemd user manager answers
    times: dict[str, UnitTimes] = field(default_factory=dict)  # by unit name (no suffix)
    problem: str | None = None  # why systemd's times could not be read

    def key(self) -> tuple[object, ...]:
        """Equal for two reads that would show the same."""
        return (self.have.cron_text, self.have.cron_problem, sorted(self.have.units.items()),
                self.manager, sorted(self.times.items()), self.problem)


def read(env: Mapping[str, str]) -> OsTimers:
    have = Installed.read(env)
    manager = bool(have.units) and systemd.user_manager(env)
    if not manager:
        return OsTimers(have, manager)
    names = [f"{u.name}.timer" for u in have.units.values()]
    argv = ["systemctl", "--user", "show", "--timestamp=unix",
            *(f"--property={p}" for p in _SHOWN), *names]
    try:
        proc = subprocess.run(argv, env=dict(env), capture_output=True, text=True,
                              timeout=systemd.SYSTEMCTL_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return OsTimers(have, manager, problem=f"systemctl --user show: {exc}")
    if proc.returncode != 0:
        return OsTimers(have, manager, problem=f"systemctl --user show failed: "
                                               f"{(proc.stderr or proc.stdout).strip()}")
    return OsTimers(have, manager, parse_show(proc.stdout))


def parse_show(text: str) -> dict[str, UnitTimes]:
    """`systemctl show --timestamp=unix -p Id -p ...` of several timers (blocks apart by a
    blank line) by unit name without '.timer'."""
    found: dict[str, UnitTimes] = {}
    for block in text.split("\n\n"):
        props = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        unit = props.get("Id", "")
        if unit.endswith(".timer"):
            found[unit.removesuffix(".timer")] = UnitTimes(
                _stamp(props.get("NextElapseUSecRealtime", "")),
                _stamp(props.get("LastTriggerUSec", "")), props.get("ActiveState", ""))
    return found


def _stamp(value: str) -> dt.datetime | None:
    """'@1709950500' (--timestamp=unix) as local aware time; None for '', 'n/a', '0'."""
    value = value.strip()
    if value.startswith("@") and value[1:].isdigit() and int(value[1:]) > 0:
        return dt.datetime.fromtimestamp(int(value[1:]), dt.UTC).astimezone()
    return None


def cron_next(line: str, now: dt.datetime) -> dt.datetime | None:
    """When cron runs an installed line next: from its own five fields, on `now`'s clock."""
    fields = line.split()[:5]
    try:
        return next_run(parse_schedule(" ".join(fields)), now) if len(fields) == 5 else None
    except ScheduleError:
        return None


class TimerState(StrEnum):
    INSTALLED = "installed"
    MISSING = "not installed"
    STALE = "out of date"  # installed, but not what the file says now
    STRAY = "left over"  # installed for a file with no [schedule]
    UNKNOWN = "unknown"  # the crontab cannot be read


@dataclass(frozen=True)
class TimerView:
    """What the app says of a site's timer; `next` is when the OS starts it next (None: it
    will not, or it cannot tell)."""

    state: TimerState
    text: str
    next: dt.datetime | None = None
    note: str = ""  # what else a person must know (a unit systemd has not loaded)


def timer_view(site: Site, timers: OsTimers, now: dt.datetime) -> TimerView | None:
    """The site's timer as the OS has it; None: not scheduled and no timer. Pure."""
    have = timers.have
    found = have.describe(site.file)
    if site.schedule is None:
        if not found:
            return None
        return TimerView(TimerState.STRAY, f"{' and '.join(found)} left over, though the file "
                         "has no [schedule]: Remove takes it away", _next(site, timers, now))
    if not found and have.cron_cmd is not None and have.cron_text is None:
        return TimerView(TimerState.UNKNOWN, f"cannot read the crontab: {have.cron_problem}")
    if not found:
        return TimerView(TimerState.MISSING, "not installed — Apply to install")
    what = " and ".join(found)
    note = _unit_note(site, timers)
    if not have.current(site):
        return TimerView(TimerState.STALE, f"{what} out of date — Apply to update",
                         _next(site, timers, now), note)
    return TimerView(TimerState.INSTALLED, f"{what} installed", _next(site, timers, now), note)


def _next(site: Site, timers: OsTimers, now: dt.datetime) -> dt.datetime | None:
    units = timers.have.units.get(site.file)
    if units is not None:
        times = timers.times.get(units.name)
        return times.next.astimezone(now.tzinfo) if times and times.next else None
    line = timers.have.cron_lines().get(site.file)
    return cron_next(line, now) if line else None


def _unit_note(site: Site, timers: OsTimers) -> str:
    units = timers.have.units.get(site.file)
    if units is None:
        return ""
    if not timers.manager:
        return ("no systemd user manager answers here: nothing starts these units until "
                "`systemctl --user daemon-reload && systemctl --user enable --now "
                f"{units.name}.timer` in your session")
    if timers.problem:
        return timers.problem
    times = timers.times.get(units.name)
    if times is None or times.active != "active":
        state = times.active if times else "not loaded"
        return f"systemd has {units.name}.timer {state}: Apply starts it"
    return ""
