"""The fleet as `mirror ui --db` shows it, read in one go: the workers (Procrastinate's
heartbeats with mirror's facts about each), their runs, the queue of site runs, and each
registered site's last and next run."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from mirror.fleet import registry
from mirror.fleet.db import connect
from mirror.fleet.queue import RUN_TASK
from mirror.fleet.registry import Registration, RunRecord
from mirror.manifest.db import shown

#: failed runs the page lists (the newest)
FAILED_SHOWN = 20


@dataclass(frozen=True)
class Job:
    """A site run in Procrastinate's queue."""

    id: int
    site: str
    status: str  # todo (waiting), doing (running), failed
    attempt: int
    reason: str
    worker_id: int | None
    since: dt.datetime | None  # queued, started or failed at
    run: RunRecord | None = None  # the attempt's record, for a running job


@dataclass(frozen=True)
class Worker:
    id: int
    name: str
    host: str
    pid: int | None
    data_dir: str
    concurrency: int | None
    last_heartbeat: dt.datetime
    alive: bool  # a heartbeat within stall_after
    jobs: tuple[Job, ...] = ()


@dataclass(frozen=True)
class SiteRow:
    reg: Registration
    last: RunRecord | None
    running: Job | None
    waiting: Job | None


@dataclass(frozen=True)
class Fleet:
    database: str  # without its password
    now: dt.datetime
    stall_after: float
    workers: list[Worker] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # run jobs by status
    waiting: list[Job] = field(default_factory=list)
    running: list[Job] = field(default_factory=list)
    failed: list[Job] = field(default_factory=list)
    sites: list[SiteRow] = field(default_factory=list)
    orphans: list[Job] = field(default_factory=list)  # running on no worker of the list


_JOBS = """
SELECT j.id, j.status::text AS status, j.worker_id, j.args,
       (SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = j.id AND e.type =
        CASE j.status WHEN 'doing' THEN 'started'::procrastinate_job_event_type
                      WHEN 'failed' THEN 'failed'::procrastinate_job_event_type
                      ELSE 'deferred'::procrastinate_job_event_type END) AS since
  FROM procrastinate_jobs j
 WHERE j.task_name = %(task)s AND (j.status IN ('todo', 'doing') OR j.id IN (
       SELECT id FROM procrastinate_jobs WHERE task_name = %(task)s AND status = 'failed'
        ORDER BY id DESC LIMIT %(failed)s))
 ORDER BY j.id
"""
_WORKERS = """
SELECT w.id, w.last_heartbeat, w.last_heartbeat > now() - make_interval(secs => %s) AS alive,
       m.name, m.host, m.pid, m.data_dir, m.concurrency
  FROM procrastinate_workers w LEFT JOIN mirror_fleet_workers m ON m.worker_id = w.id
 ORDER BY w.id
"""


def read(dsn: str, stall_after: float = 30.0) -> Fleet:
    """The whole fleet, now (FleetError when the database cannot be reached)."""
    conn = connect(dsn)
    try:
        now = conn.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]
        jobs = [_job(row) for row in conn.execute(
            _JOBS, {"task": RUN_TASK, "failed": FAILED_SHOWN}).fetchall()]
        counts = {row["status"]: row["n"] for row in conn.execute(
            "SELECT status::text AS status, count(*) AS n FROM procrastinate_jobs "
            "WHERE task_name = %s GROUP BY status", (RUN_TASK,)).fetchall()}
        running = {r.job_id: r for r in registry.runs(conn, running=True, limit=1000)}
        jobs = [_with_run(j, running) for j in jobs]
        rows = conn.execute(_WORKERS, (stall_after,)).fetchall()
        sites, last = registry.sites(conn), registry.last_runs(conn)
    finally:
        conn.close()
    workers = [Worker(r["id"], r["name"] or "(not a mirror worker)", r["host"] or "?",
                      r["pid"], r["data_dir"] or "", r["concurrency"], r["last_heartbeat"],
                      bool(r["alive"]),
                      tuple(j for j in jobs if j.status == "doing" and j.worker_id == r["id"]))
               for r in rows]
    known = {w.id for w in workers}
    by_site = {(j.site, j.status): j for j in jobs}
    return Fleet(
        shown(dsn, scheme=False), now, stall_after, workers, counts,
        waiting=[j for j in jobs if j.status == "todo"],
        running=[j for j in jobs if j.status == "doing"],
        failed=sorted((j for j in jobs if j.status == "failed"), key=lambda j: -j.id),
        sites=[SiteRow(s, last.get(s.name), by_site.get((s.name, "doing")),
                       by_site.get((s.name, "todo"))) for s in sites],
        orphans=[j for j in jobs if j.status == "doing" and j.worker_id not in known])


def _job(row: dict[str, Any]) -> Job:
    args = row["args"] or {}
    return Job(row["id"], str(args.get("site", "?")), row["status"],
               int(args.get("attempt", 1) or 1), str(args.get("reason", "")),
               row["worker_id"], row["since"])


def _with_run(job: Job, running: dict[int | None, RunRecord]) -> Job:
    run = running.get(job.id) if job.status == "doing" else None
    return Job(**{**job.__dict__, "run": run}) if run else job
