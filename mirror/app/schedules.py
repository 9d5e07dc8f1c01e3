"""The app's schedules: each site's OS timer, read as `mirror schedule list` reads it (the
user's crontab, systemd user timers), at most every REFRESH seconds and in a thread, never
per row or per tick; the last scheduled run; and the Apply / Remove actions, which do what
`mirror schedule apply | remove SITE_FILE` does."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import jinja2
from aiohttp import web

from mirror.app.jobs import ActionError
from mirror.app.library import SiteEntry
from mirror.app.status import SiteStatus, schedule_view
from mirror.app.views import ago
from mirror.schedule import lastrun, listing, osview, timers
from mirror.schedule.lastrun import ScheduledStart
from mirror.schedule.osview import OsTimers, TimerState, TimerView
from mirror.schedule.spec import Schedule

#: seconds between two reads of the crontab and systemd's timers
REFRESH = 5.0
STATE_CLASS = {TimerState.INSTALLED: "ok", TimerState.MISSING: "warn",
               TimerState.STALE: "warn", TimerState.STRAY: "warn", TimerState.UNKNOWN: "bad"}


class TimerCache:
    """The OS's timers, read again in a thread when the last read is REFRESH seconds old;
    `version` goes up when a read differs from the one before."""

    def __init__(self, env: Mapping[str, str],
                 read: Callable[[Mapping[str, str]], OsTimers] = osview.read) -> None:
        self._env, self._read = env, read
        self._lock = threading.Lock()
        self._timers: OsTimers | None = None
        self._read_at = 0.0
        self._busy = False
        self.version = 0
        self.reads = 0  # how many times the OS was read

    def current(self) -> OsTimers:
        """The last read (the first call reads, blocking: call it from a thread)."""
        found = self._timers
        if found is None:
            return self.refresh()
        if time.monotonic() - self._read_at >= REFRESH:
            self._start()
        return found

    def stamp(self) -> int:
        """Cheap, for every row at every tick: the version of what the OS has."""
        self.current()
        return self.version

    def refresh(self) -> OsTimers:
        """Read the OS now."""
        found = self._read(self._env)
        with self._lock:
            self.reads += 1
            if self._timers is None or found.key() != self._timers.key():
                self.version += 1
            self._timers, self._read_at = found, time.monotonic()
        return found

    def _start(self) -> None:
        with self._lock:
            if self._busy:
                return
            self._busy, self._read_at = True, time.monotonic()
        threading.Thread(target=self._background, name="timers", daemon=True).start()

    def _background(self) -> None:
        try:
            self.refresh()
        finally:
            self._busy = False


@dataclass(frozen=True)
class SiteSchedule:
    """The schedule column and block of a site."""

    every: str | None  # the file's [schedule] every
    timer: TimerView | None  # what the OS has (None: not scheduled, no timer)
    flags: tuple[str, ...] = ()  # a missed run, a failed one, a run waiting
    last: str = ""  # the last scheduled start, said


def site_schedule(site: timers.Site, found: OsTimers, status: SiteStatus,
                  record: ScheduledStart | None, now: dt.datetime) -> SiteSchedule | None:
    """Pure: what the app says of a site's schedule, `now` aware."""
    timer = osview.timer_view(site, found, now)
    if site.schedule is None and timer is None:
        return None
    flags: tuple[str, ...] = ()
    if site.schedule is not None:
        view = schedule_view(site.schedule, status, now)
        flags = view.flags if view else ()
        if timer is not None and timer.state == TimerState.MISSING:
            # no timer: a due time passing is no missed run (the row says why none ran)
            flags = tuple(f for f in flags if not f.startswith("missed"))
    return SiteSchedule(site.schedule.text if site.schedule else None, timer, flags,
                        last_text(record))


def last_text(record: ScheduledStart | None, now: float | None = None) -> str:
    """'run 5, 3 h ago, exit 0', 'started 2 min ago, still going', 'skipped 1 h ago: ...'."""
    if record is None:
        return ""
    if record.finished is None:
        return f"started {ago(record.started, now)}, still going"
    if record.skipped:
        return f"skipped {ago(record.started, now)}: {record.skipped.partition(': ')[2]}"
    run = f"run {record.run}, " if record.run is not None else "no run, "
    return f"{run}{ago(record.started, now)}, exit {record.exit_code}"


def site_of(entry: SiteEntry, *, remove: bool = False) -> timers.Site:
    """The site file as `mirror schedule` sees it (cli._schedule_sites)."""
    assert entry.config is not None
    cfg = entry.config
    return timers.Site(cfg.path, cfg.site.name, None if remove else cfg.schedule.every,
                       "" if remove else "no [schedule] every")


class Shown(Protocol):
    """A row of the app (server.Row): the site and its status."""

    @property
    def entry(self) -> SiteEntry: ...
    @property
    def status(self) -> SiteStatus: ...


#: the app's way to do an action on a site and come back to its page (actions.SiteActions.act)
Act = Callable[..., Awaitable[web.Response]]


class Schedules:
    """The app's part: the template's `site_schedule(row)` and the two actions."""

    def __init__(self, pages: jinja2.Environment, act: Act,
                 env: Mapping[str, str] = os.environ) -> None:
        self.act, self.env = act, env
        self.cache = TimerCache(env)
        pages.globals["site_schedule"] = self.of
        pages.filters["timer_class"] = lambda s: STATE_CLASS.get(s, "none")

    def of(self, row: Shown) -> SiteSchedule | None:
        entry = row.entry
        if entry.config is None:
            return None
        return site_schedule(site_of(entry), self.cache.current(), row.status,
                             lastrun.read(entry.config.site.output_dir),
                             dt.datetime.now().astimezone())

    async def apply(self, request: web.Request) -> web.Response:
        return await self.act(request, self._apply, to_site=True)

    async def remove(self, request: web.Request) -> web.Response:
        return await self.act(request, self._remove, to_site=True)

    async def _apply(self, entry: SiteEntry) -> str:
        site = site_of(entry)
        if site.schedule is None:
            raise ActionError(f"{entry.file} has no [schedule] every: say when in Settings "
                              "first, then Apply")
        return await asyncio.to_thread(self.change, site, install=True)

    async def _remove(self, entry: SiteEntry) -> str:
        return await asyncio.to_thread(self.change, site_of(entry, remove=True), install=False)

    def change(self, site: timers.Site, *, install: bool) -> str:
        try:
            return change_timer(site, self.env, install=install)
        finally:
            self.cache.refresh()


def change_timer(site: timers.Site, env: Mapping[str, str], *, install: bool) -> str:
    """What `mirror schedule apply|remove SITE_FILE` does (the same functions), for one
    site; the lines it says. ActionError when it did not all go through."""
    have = timers.Installed.read(env)
    try:
        kind = timers.backend("auto", env) if install else timers.SYSTEMD
        changes = timers.converge([site], kind, have, _say_next)
    except timers.TimerError as exc:
        raise ActionError(str(exc)) from exc
    if changes.problems:
        raise ActionError("; ".join(changes.lines + changes.problems))
    return "; ".join(changes.lines)


def _say_next(every: Schedule) -> str:
    return listing.next_text(every, dt.datetime.now())


def routes(schedules: Schedules) -> list[Any]:
    """The two POST routes (through the app's guard, with its CSRF check)."""
    return [web.post("/site/{id}/schedule/apply", schedules.apply),
            web.post("/site/{id}/schedule/remove", schedules.remove)]
