"""What workers write into mirror's tables while they work (async, on the App's pool): who
they are, and each run attempt from restore to outcome."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mirror.fleet.registry import SITE_COLUMNS, Registration

if TYPE_CHECKING:
    import procrastinate


async def _execute(app: procrastinate.App, query: str, params: Any = None) -> list[Any]:
    """One statement on the App's pool, run again after a lost connection (connector.py:
    each statement here is safe to run twice)."""
    from psycopg.rows import dict_row

    from mirror.fleet.connector import again

    async def once() -> list[Any]:
        async with app.connector.pool.connection() as conn:  # type: ignore[attr-defined]
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query, params)
            return await cur.fetchall() if cur.description else []

    return await again(app.connector.outages, once, "the fleet's records")  # type: ignore[attr-defined]


async def site(app: procrastinate.App, name: str) -> Registration | None:
    rows = await _execute(app, f"SELECT {SITE_COLUMNS} FROM mirror_fleet_sites "
                               "WHERE name = %s", (name,))
    return Registration(**rows[0]) if rows else None


async def announce_worker(app: procrastinate.App, worker_id: int, *, name: str, host: str,
                          pid: int, data_dir: str, concurrency: int, version: str) -> None:
    await _execute(app, "INSERT INTO mirror_fleet_workers (worker_id, name, host, pid, "
                        "data_dir, concurrency, version) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (worker_id) DO NOTHING",
                   (worker_id, name, host, pid, data_dir, concurrency, version))


async def start_run(app: procrastinate.App, *, site: str, job_id: int | None, attempt: int,
                    reason: str, worker_id: int | None, host: str, pid: int) -> int:
    """The new run's id; the same row when it is made again (its INSERT's answer was lost
    with the connection)."""
    rows = await _execute(app, _START_RUN, {"site": site, "job": job_id, "attempt": attempt,
                                            "reason": reason, "worker": worker_id,
                                            "host": host, "pid": pid})
    return int(rows[0]["id"])


_START_RUN = """
WITH old AS (
    SELECT id FROM mirror_fleet_runs WHERE job_id = %(job)s AND attempt = %(attempt)s
    AND worker_id IS NOT DISTINCT FROM %(worker)s AND host = %(host)s AND pid = %(pid)s
), new AS (
    INSERT INTO mirror_fleet_runs (site, job_id, attempt, reason, worker_id, host, pid, state)
    SELECT %(site)s, %(job)s, %(attempt)s, %(reason)s, %(worker)s, %(host)s, %(pid)s,
           'restoring'
    WHERE NOT EXISTS (SELECT 1 FROM old) RETURNING id
)
SELECT id FROM old UNION ALL SELECT id FROM new"""


async def update_run(app: procrastinate.App, run: int, **values: Any) -> None:
    """Set columns of a run record (json ones given as dicts)."""
    allowed = {"state", "pid", "exit_code", "message", "restored", "progress", "checkpoint",
               "checkpoint_at", "finished_at"}
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"no such run columns: {sorted(unknown)}")
    params = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in values.items()}
    sets = ", ".join(f"{k} = %({k})s" for k in values)
    await _execute(app, f"UPDATE mirror_fleet_runs SET {sets} WHERE id = %(run)s",
                   {**params, "run": run})


async def finish_run(app: procrastinate.App, run: int, state: str, exit_code: int | None,
                     message: str) -> None:
    await _execute(app, "UPDATE mirror_fleet_runs SET state = %s, exit_code = %s, "
                        "message = %s, finished_at = now() WHERE id = %s "
                        "AND state IN ('restoring', 'running')",
                   (state, exit_code, message, run))


async def mark_lost(app: procrastinate.App, job_id: int, message: str) -> None:
    """The job's run attempts still going on are lost (their worker stopped sending
    heartbeats); a later attempt resumes from the last checkpoint."""
    await _execute(app, "UPDATE mirror_fleet_runs SET state = 'lost', message = %s, "
                        "finished_at = now() WHERE job_id = %s "
                        "AND state IN ('restoring', 'running')", (message, job_id))


async def job_owner(app: procrastinate.App, job_id: int) -> tuple[str, int | None] | None:
    """The job's status and worker, or None when it is gone."""
    rows = await _execute(app, "SELECT status::text AS status, worker_id FROM "
                               "procrastinate_jobs WHERE id = %s", (job_id,))
    return (rows[0]["status"], rows[0]["worker_id"]) if rows else None
