"""A shared run's manifest (PostgreSQL) as a SQLite file, for the commands that read a
manifest file (`mirror serve` and `mirror export` with --db): every table of the schema
copied in one REPEATABLE READ, READ ONLY transaction, so the copy is the database as of one
moment while the workers go on writing (a capture is one transaction: it is in the copy
whole or not at all). SQLite's full-text index is not filled (search is not offered)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirror.manifest.db import connect_postgres, shown
from mirror.manifest.schema import ManifestError
from mirror.manifest.writer import Manifest

#: rows fetched and inserted at a time
BATCH = 5000


def snapshot_to_sqlite(dsn: str, dest: Path) -> None:
    """Write the PostgreSQL manifest `dsn` to the SQLite file `dest` (replaced)."""
    try:
        pg = connect_postgres(dsn, read_only=True, application_name="mirror snapshot")
    except Exception as exc:  # noqa: BLE001 - Unreachable, or psycopg not installed
        raise ManifestError(f"{shown(dsn)}: cannot read the shared run's manifest: {exc}"
                            ) from None
    dest.unlink(missing_ok=True)
    made = Manifest(dest)  # the current schema, empty
    out = made.sql.raw
    try:
        out.execute("PRAGMA foreign_keys=OFF")  # tables copied in any order
        out.execute("BEGIN")
        with pg.transaction():
            pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            for table in _tables(out):
                _copy(pg, out, table)
        out.execute("COMMIT")
    except BaseException:
        made.close()
        dest.unlink(missing_ok=True)
        raise
    finally:
        pg.close()
    made.close()


def _tables(db: Any) -> list[str]:
    """The schema's ordinary tables (not the full-text index or its shadow tables)."""
    virtual = [n for (n,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE 'CREATE VIRTUAL%'")]
    return [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                     "AND name NOT LIKE 'sqlite_%' ORDER BY name")
            if not any(n == v or n.startswith(v + "_") for v in virtual)]


def _copy(pg: Any, out: Any, table: str) -> None:
    """One table's rows, the columns both sides have (meta: the SQLite file's own)."""
    if table == "meta":
        return
    mine = [r[1] for r in out.execute(f"PRAGMA table_info({table})")]
    theirs = {r[0] for r in pg.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
        "AND table_schema = current_schema()", (table,))}
    columns = [c for c in mine if c in theirs]
    if not columns:
        return
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" for _ in columns)
    cursor = pg.cursor(name=f"snapshot_{table}")
    cursor.execute(f"SELECT {names} FROM {table}")
    while rows := cursor.fetchmany(BATCH):
        out.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
    cursor.close()
