"""The one connection layer to SQL: the manifest's SQLite (a file, the embedded default) or
PostgreSQL (psycopg 3, for a run shared by several machines) behind one small interface,
and the PostgreSQL connection itself (timeout, autocommit, the address shown without its
password), which the fleet's database uses too (fleet/db.py).

The manifest's SQL is written once, in the subset both understand (`?` placeholders,
`INSERT ... ON CONFLICT`, `RETURNING`, partial indexes, `"offset"` quoted); PostgresDb
translates the placeholders once per statement and caches the result. What only one of them
has is an attribute here: SKIP LOCKED, advisory locks, database time as an SQL expression.
Driver errors are translated to ManifestWriteError by Transaction (below), the one
boundary where a write meets the driver, using each dialect's `errors` and `retryable`.

psycopg is imported only when a PostgreSQL database is opened: the desktop install has none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol
from urllib.parse import urlsplit

from mirror.errors import MirrorError, UsageError

#: what `pip` installs for a PostgreSQL manifest
INSTALL = "pip install 'mirror[fleet]'"
#: seconds to wait for the database to answer a connection
CONNECT_TIMEOUT = 10
#: SQLSTATE classes of errors after which the transaction can simply run again: PostgreSQL
#: rolled it back to break a deadlock or a serialization conflict (40001, 40P01)
RETRYABLE_STATES = ("40001", "40P01")


class ManifestError(UsageError):
    """The manifest cannot be used (damaged, written by a newer mirror, unreachable)."""


class ManifestWriteError(ManifestError):
    """A transaction could not be committed (disk full, I/O error, the database gone); it
    was rolled back."""


class ManifestConflict(ManifestWriteError):
    """The database rolled the transaction back to break a deadlock or a serialization
    conflict with another worker's: running it again is safe (it was all or nothing)."""


class Cursor(Protocol):
    """What the manifest reads of a cursor (sqlite3's and psycopg's both fit)."""

    @property
    def rowcount(self) -> int: ...
    @property
    def description(self) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Any: ...
    def close(self) -> None: ...


class Row(Protocol):
    """A row read by column name: sqlite3.Row, or a dict (PostgreSQL)."""

    def __getitem__(self, key: str, /) -> Any: ...
    def keys(self) -> Any: ...


def is_database_url(target: object) -> bool:
    """Whether a manifest target names a PostgreSQL database (else it is a file path)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def shown(dsn: str, *, scheme: bool = True) -> str:
    """A database for messages, without its password (nor its query string): a manifest's
    URL as 'postgresql://u@db.example:5433/crawl'; without `scheme` (the fleet's messages,
    which also take libpq's 'host=... dbname=...' form) 'u@db.example:5433/crawl'."""
    if scheme:
        parts = urlsplit(dsn)
        return f"{parts.scheme}://{_user(parts.username)}{parts.hostname or ''}" \
            f"{_port(parts.port)}{parts.path}"
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - only for a message: a DSN psycopg cannot read
        return "(an unreadable connection string)"
    return f"{_user(info.get('user'))}{info.get('host') or 'localhost'}" \
        f"{_port(info.get('port'))}/{info.get('dbname') or ''}"


def _user(name: object) -> str:
    return f"{name}@" if name else ""


def _port(port: object) -> str:
    return f":{port}" if port else ""


class Unreachable(MirrorError):
    """The PostgreSQL server did not take the connection; str is the driver's reason."""


def connect_postgres(dsn: str, *, read_only: bool = False, dict_rows: bool = False,
                     application_name: str | None = None) -> Any:
    """A psycopg connection in autocommit mode (a transaction is an explicit BEGIN, or
    psycopg's `transaction()` block), given CONNECT_TIMEOUT seconds to answer: for the
    manifest and the fleet alike. Unreachable when the server does not answer or refuses;
    ImportError when psycopg is not installed (each caller names what to install)."""
    import psycopg
    from psycopg.rows import dict_row, tuple_row

    options = "-c default_transaction_read_only=on" if read_only else None
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                               row_factory=dict_row if dict_rows else tuple_row,
                               application_name=application_name, options=options)
    except psycopg.Error as exc:
        raise Unreachable(" ".join(str(exc).split()) or type(exc).__name__) from None


class SqlDb:
    """One connection, in autocommit mode: a transaction is begin() ... commit() or
    rollback(); a statement outside one commits by itself."""

    dialect: str  # "sqlite" | "postgresql"
    name: str  # for messages: the file, or the database without its password
    raw: Any  # the driver's connection (sqlite3.Connection, psycopg.Connection)
    #: the driver's errors: what the manifest's transaction turns into ManifestWriteError
    errors: tuple[type[Exception], ...]
    #: several processes write at once (they do not on SQLite: BEGIN IMMEDIATE waits)
    concurrent: bool
    #: SQL expression: the database's time now, in integer milliseconds since the epoch
    now_ms: str
    #: appended to a SELECT that claims rows: others skip what this transaction locks
    skip_locked: str
    #: appended to a SELECT whose rows must not change before the transaction ends
    for_update: str
    execute: Callable[..., Cursor]  # (sql, params=()) -> cursor
    executemany: Callable[[str, Iterable[Sequence[object]]], Cursor]

    def begin(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        self.raw.execute("COMMIT")

    def rollback(self) -> None:
        self.raw.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    def lock(self, key: int) -> None:
        """Hold an exclusive lock named `key` to the end of the transaction (across
        processes and machines)."""

    def retryable(self, exc: BaseException) -> bool:
        """Whether running the failed transaction again may succeed (a broken deadlock)."""
        return False

    def transaction(self, settle: Callable[[bool], None]) -> Transaction:
        return Transaction(self, settle)

    def write_error(self, exc: BaseException) -> ManifestWriteError:
        """The driver's error as the manifest's (the one place they are translated)."""
        kind = ManifestConflict if self.retryable(exc) else ManifestWriteError
        return kind(f"manifest write failed: {' '.join(str(exc).split())}")

    def close(self) -> None:
        self.raw.close()


class SqliteDb(SqlDb):
    """A manifest file. Statements go straight to the sqlite3 connection (its `execute` is
    the connection's own bound method: nothing is added on the single machine's path)."""

    dialect = "sqlite"
    concurrent = False
    now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    skip_locked = for_update = ""  # BEGIN IMMEDIATE: the one writer holds every row
    errors = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection, name: str) -> None:
        self.raw = conn
        self.name = name
        self.execute = conn.execute
        self.executemany = conn.executemany

    def begin(self) -> None:
        self.raw.execute("BEGIN IMMEDIATE")  # the one writer: others wait here

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.in_transaction)


class PostgresDb(SqlDb):
    """A manifest in a PostgreSQL database (psycopg 3, autocommit, explicit BEGIN)."""

    dialect = "postgresql"
    concurrent = True
    now_ms = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    for_update = " FOR UPDATE"

    def __init__(self, dsn: str, *, read_only: bool = False) -> None:
        try:
            import psycopg
        except ImportError:
            raise ManifestError(f"a PostgreSQL manifest needs psycopg, which is not "
                                f"installed: {INSTALL}") from None
        self.name = shown(dsn)
        self.errors = (psycopg.Error,)
        self._sql: dict[str, str] = {}
        try:
            self.raw = connect_postgres(dsn, read_only=read_only,
                                        application_name="mirror manifest")
        except Unreachable as exc:
            raise ManifestError(f"{self.name}: cannot reach the manifest database: "
                                f"{exc}") from None
        self._idle = psycopg.pq.TransactionStatus.IDLE

    def _translated(self, sql: str) -> str:
        """`?` -> `%s` outside quotes, `%` -> `%%`; once per statement."""
        out = self._sql.get(sql)
        if out is None:
            parts, quote = [], ""
            for char in sql:
                if quote:
                    quote = "" if char == quote else quote
                elif char in "'\"":
                    quote = char
                elif char == "?":
                    char = "%s"
                if char == "%":
                    char = "%%"
                parts.append(char)
            out = self._sql[sql] = "".join(parts)
        return out

    def execute(self, sql: str, params: Sequence[object] = ()) -> Cursor:
        return self.raw.execute(self._translated(sql), params)  # type: ignore[no-any-return]

    def executemany(self, sql: str, params: Iterable[Sequence[object]]) -> Cursor:
        """psycopg pipelines the rows: one round trip."""
        cur = self.raw.cursor()
        rows = list(params)
        if rows:
            cur.executemany(self._translated(sql), rows)
        return cur  # type: ignore[no-any-return]

    def begin(self) -> None:
        self.raw.execute("BEGIN")

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != self._idle)

    def lock(self, key: int) -> None:
        self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (key,))

    def retryable(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) in RETRYABLE_STATES


class Tx:
    """The writer's transactions, which its parts share: calling it opens one for a write
    (ManifestWriteError when it fails), or joins the open group's (`grouped`)."""

    def __init__(self, sql: SqlDb, settle: Callable[[bool], None]) -> None:
        self.sql = sql
        self.settle = settle  # told whether each transaction committed
        self.grouped = False  # a group() transaction is open: writes join it

    def __call__(self) -> AbstractContextManager[None]:
        return nullcontext() if self.grouped else self.sql.transaction(self.settle)


class Transaction:
    """begin() ... commit(), rollback() on error; the driver's errors become
    ManifestWriteError (ManifestConflict when the transaction may simply run again)."""

    def __init__(self, db: SqlDb, settle: Callable[[bool], None]) -> None:
        self.db = db
        self.settle = settle  # told whether the transaction committed

    def __enter__(self) -> None:
        try:
            self.db.begin()
        except self.db.errors as exc:  # locked, read-only, I/O error: nothing was written
            raise self.db.write_error(exc) from exc

    def __exit__(self, exc_type: object, exc: BaseException | None, _tb: object) -> None:
        try:
            if exc_type:
                self.db.rollback()
            else:
                self.db.commit()
        except self.db.errors as end_exc:
            try:
                if self.db.in_transaction:
                    self.db.rollback()
            except self.db.errors:  # the connection is gone: so is the transaction
                pass
            self.settle(False)
            raise self.db.write_error(end_exc) from end_exc
        self.settle(not exc_type)
        if isinstance(exc, self.db.errors):
            raise self.db.write_error(exc) from exc
