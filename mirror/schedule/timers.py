"""`mirror schedule apply | remove | list`: one OS timer per scheduled site, a systemd user
timer where a user manager runs, else a crontab line. Apply converges: a site gets the timer
its file says (replacing the one it had, on either side), a site without [schedule] loses its
timer, and nothing else of the user's crontab or unit folder is touched."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mirror.errors import UsageError
from mirror.launch import mirror_argv
from mirror.schedule import crontab, systemd
from mirror.schedule.spec import Schedule

SYSTEMD, CRON = "systemd", "cron"


class TimerError(UsageError):
    """No timer can be installed or read here; str says why and what to do."""


def scheduled_argv(site_file: Path, python: str = sys.executable) -> list[str]:
    """What a timer runs: this Python's mirror, quietly, as a scheduled run of the site."""
    return mirror_argv("run", "--quiet", "--scheduled", str(site_file), python=python)


@dataclass(frozen=True)
class Site:
    """A site file as `apply` sees it; schedule None: it must have no timer."""

    file: Path  # absolute
    name: str
    schedule: Schedule | None
    why: str = "no [schedule] every"  # why it has no schedule, for the user


@dataclass
class Installed:
    """This user's timers of mirror: unit files by site file, and the crontab (None: no
    crontab command here, or it could not be read: `cron_problem` says why)."""

    env: Mapping[str, str]
    unit_dir: Path
    units: dict[Path, systemd.Units]
    cron_cmd: list[str] | None
    cron_text: str | None
    cron_problem: str | None = None

    @classmethod
    def read(cls, env: Mapping[str, str]) -> Installed:
        folder = systemd.unit_dir(env)
        cmd = crontab.command(env)
        text, problem = None, None if cmd else "there is no crontab command"
        if cmd:
            try:
                text = crontab.read(cmd, env)
            except crontab.CrontabError as exc:
                problem = str(exc)
        return cls(env, folder, systemd.installed(folder), cmd, text, problem)

    def cron_lines(self) -> dict[Path, str]:
        return crontab.entries(self.cron_text or "")

    def describe(self, site_file: Path) -> list[str]:
        """The timers this site file has: 'systemd mirror-x.timer', 'crontab'."""
        found = []
        if site_file in self.units:
            found.append(f"systemd {self.units[site_file].name}.timer")
        if site_file in self.cron_lines():
            found.append("crontab")
        return found

    def current(self, site: Site, python: str = sys.executable) -> bool:
        """Whether the site's timers are what `apply` would write now."""
        if site.schedule is None:
            return not self.describe(site.file)
        argv = scheduled_argv(site.file, python)
        units = self.units.get(site.file)
        if units is not None and units == _units(site, site.schedule, argv):
            return site.file not in self.cron_lines()
        return (units is None and self.cron_lines().get(site.file)
                == crontab.line(site.schedule, site.file, argv))


def _units(site: Site, schedule: Schedule, argv: Sequence[str]) -> systemd.Units:
    return systemd.Units(systemd.unit_name(site.name),
                         systemd.service_text(site.name, site.file, argv),
                         systemd.timer_text(site.name, site.file, schedule))


def backend(choice: str, env: Mapping[str, str]) -> str:
    """"systemd" or "cron", for --timer auto|systemd|cron."""
    if choice == SYSTEMD or (choice == "auto" and systemd.user_manager(env)):
        return SYSTEMD
    if crontab.command(env) is None:
        raise TimerError("no systemd user manager answers here and there is no crontab "
                         "command: install cron (Debian: apt install cron), or run this in a "
                         "session that systemd manages, or pass --timer systemd to write "
                         "the units anyway")
    return CRON


@dataclass
class Changes:
    """What an apply or remove did, as lines for the user, and what went wrong."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # unit names to (re)start
    dropped: list[str] = field(default_factory=list)  # unit names to stop


def converge(sites: Sequence[Site], kind: str, have: Installed,
             say_next: Callable[[Schedule], str], python: str = sys.executable) -> Changes:
    """Give each site the timer its file says, of `kind`, and no other (`have`: what is
    installed now, read just before)."""
    if kind == CRON and have.cron_text is None:
        raise TimerError(f"cannot use the crontab: {have.cron_problem}")
    changes, text = Changes(), have.cron_text
    if have.cron_cmd is not None and text is None:
        changes.lines.append(f"(the crontab was not checked for old lines: {have.cron_problem})")
    owners = {u.name: f for f, u in have.units.items()}
    for site in sites:
        argv = scheduled_argv(site.file, python)
        old, units = have.units.get(site.file), None
        if site.schedule is not None and kind == SYSTEMD:
            units = _units(site, site.schedule, argv)
            owner = owners.setdefault(units.name, site.file)
            if owner != site.file:
                changes.problems.append(
                    f"{site.file}: the unit {units.name}.timer belongs to {owner} (a site of "
                    "the same name); give one of them another [site] name")
                continue
        if old is not None and old != units:
            changes.dropped += [old.name] if units is None or old.name != units.name else []
        if units is not None and old != units:
            systemd.write(have.unit_dir, units)
            changes.written.append(units.name)
        line = (crontab.line(site.schedule, site.file, argv)
                if site.schedule is not None and kind == CRON else None)
        if text is not None:
            text = crontab.with_line(text, site.file, line)
        same = old == units and have.cron_lines().get(site.file) == line
        changes.lines.append(_said(site, have, units, same, say_next))
    _finish(have, text, changes)
    return changes


def _said(site: Site, have: Installed, units: systemd.Units | None, same: bool,
          say_next: Callable[[Schedule], str]) -> str:
    if site.schedule is None:
        had = have.describe(site.file)
        why = f" ({site.why})" if site.why else ""
        return (f"{site.name}: removed its {' and '.join(had)}{why}" if had
                else f"{site.name}: not scheduled")
    what = f"systemd timer {units.name}.timer" if units else "crontab line"
    return (f"{site.name}: {what}{' (unchanged)' if same else ''}, {site.schedule.text}, "
            f"next run {say_next(site.schedule)}")


def _finish(have: Installed, text: str | None, changes: Changes) -> None:
    """Install the crontab if it changed, and load the units' changes into systemd."""
    if text is not None and have.cron_cmd is not None and text != (have.cron_text or ""):
        try:
            crontab.install(have.cron_cmd, text, have.env)
        except crontab.CrontabError as exc:
            changes.problems.append(str(exc))
    if not (changes.written or changes.dropped):
        return
    manager = systemd.user_manager(have.env)
    for name in changes.dropped:
        if manager:
            _note(changes, systemd.systemctl(["disable", "--now", f"{name}.timer"], have.env))
        systemd.delete(have.unit_dir, name)
    if not manager:
        enable = shlex.join(f"{n}.timer" for n in changes.written)  # \x2d: quoted
        changes.lines.append(
            f"systemctl --user does not answer here: the units in {have.unit_dir} take "
            "effect once you run `systemctl --user daemon-reload"
            + (f" && systemctl --user enable --now {enable}`" if enable else "`")
            + " in your session")
        return
    _note(changes, systemd.systemctl(["daemon-reload"], have.env))
    for name in changes.written:
        _note(changes, systemd.systemctl(["enable", f"{name}.timer"], have.env))
        # restart: a changed OnCalendar= counts from now (a new timer simply starts)
        _note(changes, systemd.systemctl(["restart", f"{name}.timer"], have.env))


def _note(changes: Changes, problem: str | None) -> None:
    if problem is not None:
        changes.problems.append(problem)
