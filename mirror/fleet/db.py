"""The fleet database: its address (--db, else $MIRROR_DB), the extra it needs, and the
schema: Procrastinate's own, applied once, and mirror's three small tables beside it. The
connection itself (timeout, autocommit, the address without its password) is the
manifest's connection layer's (manifest/db.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mirror.errors import UsageError
from mirror.manifest.db import INSTALL, Unreachable, connect_postgres, shown

if TYPE_CHECKING:
    import psycopg

#: the environment variable that names the fleet database when --db is not given
ENV = "MIRROR_DB"
#: pg_advisory_xact_lock key held while the schema is checked and applied, so that workers
#: starting together do not both create it (hashtext('mirror-fleet-schema'))
_SCHEMA_LOCK = "mirror-fleet-schema"

#: mirror's own tables. Sites: what `schedule apply --db` registered (the site file's text,
#: so that any machine can run it). Runs: one row per attempt of a site run, by the worker
#: that made it. Workers: what Procrastinate's heartbeat table does not say (host, pid,
#: data folder), gone with the worker's own row.
TABLES = """
CREATE TABLE IF NOT EXISTS mirror_fleet_sites (
    name text PRIMARY KEY,
    site_file text NOT NULL,
    host text NOT NULL,
    toml text NOT NULL,
    store text NOT NULL,
    schedule text NOT NULL,
    timezone text NOT NULL,
    next_due timestamptz NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS mirror_fleet_runs (
    id bigserial PRIMARY KEY,
    site text NOT NULL,
    job_id bigint,
    attempt integer NOT NULL DEFAULT 1,
    reason text NOT NULL DEFAULT '',
    worker_id bigint,
    host text NOT NULL,
    pid integer,
    state text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    exit_code integer,
    message text NOT NULL DEFAULT '',
    restored jsonb,
    progress jsonb,
    checkpoint jsonb,
    checkpoint_at timestamptz
);
CREATE INDEX IF NOT EXISTS mirror_fleet_runs_site ON mirror_fleet_runs (site, id DESC);
CREATE INDEX IF NOT EXISTS mirror_fleet_runs_job ON mirror_fleet_runs (job_id);
CREATE TABLE IF NOT EXISTS mirror_fleet_workers (
    worker_id bigint PRIMARY KEY REFERENCES procrastinate_workers (id) ON DELETE CASCADE,
    name text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    data_dir text NOT NULL,
    concurrency integer NOT NULL,
    version text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
"""


class FleetError(UsageError):
    """The fleet cannot be used as asked (no database given, the extra missing, the
    database unreachable); str says what to do."""


def dsn_from(given: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """The database the user named: --db, else $MIRROR_DB, else None."""
    return given or env.get(ENV) or None


def require_extra() -> None:
    """FleetError naming the install command when psycopg or procrastinate is missing."""
    try:
        import procrastinate  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise FleetError(f"the fleet needs psycopg and procrastinate ({exc.name} is not "
                         f"installed): {INSTALL}") from None


#: databases whose schema this process has checked already (the app reads every 5 s)
_ENSURED: set[str] = set()


def connect(dsn: str) -> psycopg.Connection[Any]:
    """A connection (psycopg, dict rows, autocommit) to the fleet database, its schema in
    place (checked once per process)."""
    require_extra()
    try:
        conn: psycopg.Connection[Any] = connect_postgres(dsn, dict_rows=True)  # autocommit
    except Unreachable as exc:
        raise FleetError(f"cannot reach the fleet database {shown(dsn, scheme=False)}: "
                         f"{exc}") from None
    if dsn not in _ENSURED:
        try:
            ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        _ENSURED.add(dsn)
    return conn


_MISSING = "SELECT to_regclass('procrastinate_jobs') IS NULL"


def first(row: Any) -> Any:
    """The first column of a row, dict or tuple (None for no row)."""
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Procrastinate's schema (applied when its job table is missing) and mirror's tables,
    in one transaction under an advisory lock: idempotent, and safe when several workers
    start at once."""
    from procrastinate.schema import SchemaManager

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_SCHEMA_LOCK,))
        if first(conn.execute(_MISSING).fetchone()):
            conn.execute(SchemaManager.get_schema())  # no parameters: its % are literal
        conn.execute(TABLES)
