"""The fleet's tick, a periodic task that Procrastinate defers once per period whatever the
number of workers: it queues the runs that are due, by each site's own schedule, and hands
the runs of workers that stopped sending heartbeats to the others.

Both halves are safe when two ticks overlap: due sites are taken with FOR UPDATE SKIP
LOCKED and moved to their next due time in the transaction that defers their run, and the
hand-over runs under a transaction-level advisory lock, one tick at a time."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mirror.fleet.db import first
from mirror.fleet.duetime import next_due
from mirror.fleet.queue import RUN_TASK, TICK_TASK, defer_run
from mirror.fleet.records import mark_lost
from mirror.schedule.spec import ScheduleError, parse_schedule

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger(__name__)

_HAND_OVER_LOCK = "mirror-fleet-hand-over"
#: the server started less than stall_after seconds ago (a restart): heartbeats older than
#: that say nothing of their workers, which reconnect with backoff (connector.py)
_RESTARTED = "SELECT now() - pg_postmaster_start_time() < make_interval(secs => %s)"


#: seconds after which a silent worker is forgotten (the fleet page shows it until then)
FORGET_AFTER = 3600.0
#: hours a failed run's job stays in the queue
KEEP_FAILED_HOURS = 24 * 7


async def tick(app: procrastinate.App, stall_after: float) -> dict[str, Any]:
    """One tick; what it did (the job's result, in the worker's log)."""
    done = {"queued": await queue_due_runs(app),
            "handed_over": await hand_over_stalled(app, stall_after)}
    # a worker that died is forgotten after a while; Procrastinate itself does it only
    # when a worker starts
    await app.job_manager.prune_stalled_workers(max(FORGET_AFTER, stall_after))
    # failed runs stay in the queue for a week, to be seen (succeeded ones are deleted at
    # once: mirror_fleet_runs keeps every run)
    await app.job_manager.delete_old_jobs(nb_hours=KEEP_FAILED_HOURS, include_failed=True)
    return done


async def queue_due_runs(app: procrastinate.App) -> list[str]:
    """Queue a run of every site whose next due time has come (by the database's clock),
    and move it to the next one. A site whose run still waits gets no second one: like a
    cron job with concurrencyPolicy Forbid, that due time is dropped. A site due many
    times while no worker ran (the fleet was down) gets one run, as a systemd timer with
    Persistent=true does."""
    from procrastinate.exceptions import AlreadyEnqueued
    from psycopg.rows import dict_row

    queued = []
    async with app.connector.pool.connection() as conn:  # type: ignore[attr-defined]
        async with conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute("SELECT name, schedule, timezone, next_due, now() AS now "
                              "FROM mirror_fleet_sites WHERE next_due <= now() "
                              "ORDER BY next_due FOR UPDATE SKIP LOCKED")
            for row in await cur.fetchall():
                try:
                    after = next_due(parse_schedule(row["schedule"]), row["timezone"],
                                     row["now"])
                except (ScheduleError, ValueError) as exc:  # registered by another version
                    log.error("%s: cannot read its schedule %r: %s", row["name"],
                              row["schedule"], exc)
                    continue
                await conn.execute("UPDATE mirror_fleet_sites SET next_due = %s "
                                   "WHERE name = %s", (after, row["name"]))
                due = row["next_due"].strftime("%Y-%m-%d %H:%M UTC")
                try:
                    async with conn.transaction():  # a savepoint: a refusal keeps the rest
                        job = await defer_run(app, row["name"], f"schedule ({due})",
                                              connection=conn)
                except AlreadyEnqueued:
                    log.info("%s: a run is still waiting; the run due at %s is not queued "
                             "again", row["name"], due)
                    continue
                log.info("%s: queued its run due at %s (job %d)", row["name"], due, job)
                queued.append(row["name"])
    return queued


async def hand_over_stalled(app: procrastinate.App, stall_after: float) -> list[int]:
    """Hand over each site run whose worker has sent no heartbeat for `stall_after` seconds
    (Procrastinate's JobManager.get_stalled_jobs): a new run job is queued, which restores
    the site's archive from its last checkpoint, and the stalled job is failed.

    Not Procrastinate's retry_job: it reuses the job's id, so a worker that was only cut
    off, finishing late, would mark the new attempt done and free its lock while it runs;
    and it breaks the queueing lock when another run of the site waits (procrastinate#1446).
    A new job, blocked by the site's lock until the old one is failed, avoids both: when a
    run waits already, that run resumes from the same checkpoint."""
    from procrastinate import exceptions
    from procrastinate.jobs import Status

    handed: list[int] = []
    async with app.connector.pool.connection() as conn:  # type: ignore[attr-defined]
        async with conn.transaction():
            got = await (await conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))",
                                            (_HAND_OVER_LOCK,))).fetchone()
            if not first(got):
                return handed  # another tick is at it
            if first(await (await conn.execute(_RESTARTED, (stall_after,))).fetchone()):
                return handed  # no worker could send a heartbeat while the server was down
            manager = app.job_manager
            for job in await manager.get_stalled_jobs(task_name=RUN_TASK,
                                                      seconds_since_heartbeat=stall_after):
                assert job.id is not None
                site = str(job.task_kwargs.get("site", "?"))
                attempt = job.task_kwargs.get("attempt", 1)
                attempt = attempt if isinstance(attempt, int) else 1
                lost = (f"worker {job.worker_id} sent no heartbeat for {stall_after:g} s"
                        if job.worker_id is not None else "its worker is gone")
                try:
                    new = await defer_run(app, site, f"taken over: {lost}",
                                          attempt=attempt + 1)
                    then = f"queued again (job {new})"
                except exceptions.AlreadyEnqueued:
                    then = "the run already waiting resumes it"
                await mark_lost(app, job.id, lost)
                try:
                    await manager.finish_job(job, status=Status.FAILED, delete_job=False)
                except exceptions.ConnectorException as exc:  # it ended meanwhile
                    log.info("%s: job %d changed while handed over: %s", site, job.id, exc)
                    continue
                log.warning("%s: its run (job %d) was lost (%s); %s from the last "
                            "checkpoint", site, job.id, lost, then)
                handed.append(job.id)
            for job in await manager.get_stalled_jobs(task_name=TICK_TASK,
                                                      seconds_since_heartbeat=stall_after):
                # a lost tick is not worth another try: the next one comes soon
                await manager.finish_job(job, status=Status.FAILED, delete_job=False)
    return handed
