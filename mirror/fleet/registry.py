"""The fleet's registered sites (mirror_fleet_sites) and their runs (mirror_fleet_runs), as
the commands and the app read and change them: one site file's text per site name, with
its schedule, the time zone its wall clock is read in and when it is next due."""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror.config import SiteConfig
from mirror.fleet.duetime import ZoneError, next_due, zone
from mirror.schedule.spec import Schedule, parse_schedule

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class Registration:
    """A site as the fleet runs it."""

    name: str
    site_file: str  # where it was registered from, on `host`
    host: str
    toml: str  # the site file's text: what every worker runs
    store: str  # [archive] store
    schedule: str  # canonical schedule text
    timezone: str
    next_due: dt.datetime
    registered_at: dt.datetime
    updated_at: dt.datetime

    def parsed_schedule(self) -> Schedule:
        return parse_schedule(self.schedule)


@dataclass(frozen=True)
class RunRecord:
    """One attempt at a site's run, as the worker that made it recorded it."""

    id: int
    site: str
    job_id: int | None
    attempt: int
    reason: str
    worker_id: int | None
    host: str
    state: str  # restoring, running, complete, failed, interrupted, lost
    started_at: dt.datetime
    finished_at: dt.datetime | None
    exit_code: int | None
    message: str
    progress: dict[str, Any] | None
    checkpoint: dict[str, Any] | None
    checkpoint_at: dt.datetime | None

    @property
    def running(self) -> bool:
        return self.state in ("restoring", "running")


def this_host() -> str:
    return socket.gethostname()


def local_zone(env: Mapping[str, str] = os.environ) -> str:
    """This machine's time zone as an IANA name: $TZ, else what /etc/localtime links to,
    else /etc/timezone, else UTC. A schedule registered from here is read on its clock."""
    candidates = [env.get("TZ", "").lstrip(":")]
    try:
        target = os.readlink("/etc/localtime")
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                zone(name)
                return name
            except ZoneError:
                continue
    return "UTC"


def fleet_problem(cfg: SiteConfig) -> str | None:
    """Why this site cannot run on a fleet, or None."""
    if not store_of(cfg):
        return ("a fleet site needs [archive] store = \"s3://bucket/prefix\": its archive "
                "lives there between runs, so that any worker can run it and take over a "
                "run whose worker died")
    if cfg.crawl.cookies_file is not None:
        return (f"[crawl] cookies_file ({cfg.crawl.cookies_file}) is a file on this machine, "
                "which the workers do not have; a fleet site cannot use one")
    return None


def store_of(cfg: SiteConfig) -> str:
    """The site's [archive] store URL, "" for none."""
    return cfg.archive.store


SITE_COLUMNS = ("name, site_file, host, toml, store, schedule, timezone, next_due, "
                 "registered_at, updated_at")


def site(conn: psycopg.Connection[Any], name: str) -> Registration | None:
    row = conn.execute(f"SELECT {SITE_COLUMNS} FROM mirror_fleet_sites WHERE name = %s",
                       (name,)).fetchone()
    return Registration(**row) if row else None


def sites(conn: psycopg.Connection[Any]) -> list[Registration]:
    rows = conn.execute(f"SELECT {SITE_COLUMNS} FROM mirror_fleet_sites ORDER BY name")
    return [Registration(**row) for row in rows.fetchall()]


def register(conn: psycopg.Connection[Any], cfg: SiteConfig, text: str, schedule: Schedule,
             now: dt.datetime, *, host: str, tz: str) -> str:
    """Register or update the site of `cfg` (its file's `text`); "registered", "updated"
    or "unchanged". The caller checked fleet_problem and name clashes."""
    old = site(conn, cfg.site.name)
    fields = {"site_file": str(cfg.path), "host": host, "toml": text, "store": store_of(cfg),
              "schedule": schedule.text, "timezone": tz}
    if old is not None and all(getattr(old, k) == v for k, v in fields.items()):
        return "unchanged"
    due = (old.next_due if old is not None and (old.schedule, old.timezone) == (
        schedule.text, tz) else next_due(schedule, tz, now))
    conn.execute(
        "INSERT INTO mirror_fleet_sites (name, site_file, host, toml, store, schedule, "
        "timezone, next_due) VALUES (%(name)s, %(site_file)s, %(host)s, %(toml)s, %(store)s, "
        "%(schedule)s, %(timezone)s, %(next_due)s) ON CONFLICT (name) DO UPDATE SET "
        "site_file = EXCLUDED.site_file, host = EXCLUDED.host, toml = EXCLUDED.toml, "
        "store = EXCLUDED.store, schedule = EXCLUDED.schedule, timezone = EXCLUDED.timezone, "
        "next_due = EXCLUDED.next_due, updated_at = now()",
        {"name": cfg.site.name, **fields, "next_due": due})
    return "registered" if old is None else "updated"


def unregister(conn: psycopg.Connection[Any], name: str) -> int:
    """Forget the site, and cancel its run waiting in the queue (a run going on finishes);
    the number of cancelled jobs."""
    from procrastinate import SyncPsycopgConnector
    from procrastinate.manager import JobManager

    from mirror.fleet.queue import site_lock

    conn.execute("DELETE FROM mirror_fleet_sites WHERE name = %s", (name,))
    waiting = conn.execute("SELECT id FROM procrastinate_jobs WHERE queueing_lock = %s "
                           "AND status = 'todo'", (site_lock(name),)).fetchall()
    manager = JobManager(SyncPsycopgConnector())  # on `conn`: it opens no pool of its own
    return sum(manager.cancel_job_by_id(row["id"], connection=conn) for row in waiting)


RUN_COLUMNS = ("id, site, job_id, attempt, reason, worker_id, host, state, started_at, "
                "finished_at, exit_code, message, progress, checkpoint, checkpoint_at")


def last_runs(conn: psycopg.Connection[Any]) -> dict[str, RunRecord]:
    """Each site's newest run record."""
    rows = conn.execute(f"SELECT DISTINCT ON (site) {RUN_COLUMNS} FROM mirror_fleet_runs "
                        "ORDER BY site, id DESC").fetchall()
    return {row["site"]: RunRecord(**row) for row in rows}


def runs(conn: psycopg.Connection[Any], *, running: bool = False,
         limit: int = 50) -> list[RunRecord]:
    """The newest run records (only those going on, with `running`)."""
    where = "WHERE state IN ('restoring', 'running')" if running else ""
    rows = conn.execute(f"SELECT {RUN_COLUMNS} FROM mirror_fleet_runs {where} "
                        "ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
    return [RunRecord(**row) for row in rows]
