"""ManifestReader: the manifest opened read-only, with every query that changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror.archive.workerfolder import no_manifest
from mirror.manifest.captures import CaptureReads
from mirror.manifest.counts import Counts
from mirror.manifest.db import PostgresDb, SqlDb, SqliteDb, is_database_url
from mirror.manifest.patterns import PatternReads
from mirror.manifest.renders import RenderReads
from mirror.manifest.robots import Robots
from mirror.manifest.runs import RunReads
from mirror.manifest.schema import ManifestError, check_postgres, read_as_current
from mirror.manifest.sharedreads import SharedRunReads
from mirror.manifest.urls import UrlReads
from mirror.model import Original, Previous, Run

if TYPE_CHECKING:
    from mirror.manifest.audit import Audit
    from mirror.manifest.pruning import PruneReads
    from mirror.manifest.texts import TextReads

__all__ = ["ManifestError", "ManifestReader", "Original", "Previous", "Run",
           "open_reader"]

def open_reader(target: Path | str) -> ManifestReader:
    """The manifest `target` names, read-only: a file path (SQLite), or postgresql://...
    (PostgreSQL; needs `mirror[fleet]`)."""
    return ManifestReader(target)


class ManifestReader:
    """The manifest, read-only: for `mirror status`, `runs`, `diff`, `explain`, `verify`,
    the replay server and run reports, also beside a running crawl (WAL lets it read). It
    never writes to the file, not even to upgrade it, and has no writing method. The
    writer, Manifest, extends it. Its queries are in its parts: runs, urls (the frontier's
    rows), captures, counts (a run's numbers), sharedrun (a run shared by several
    workers), texts (full-text search), robots, patterns, prune, audit (verify's).

    An older schema version is read as if it were upgraded: the connection gets temporary
    views with the values the migration would write (manifest.migrations.READ_AS_CURRENT), and
    empty temporary tables for tables the file lacks; the file is left as it is. A read must
    not change what it reads (verify checks an archive, and may be pointed at a backup or
    read-only media), and there is no upgrade
    command but `mirror run`, which crawls: refusing would make an old archive unreadable
    until it is crawled again. A newer schema version is refused with ManifestError: its
    meaning is unknown to this code, so reading it could only guess."""

    def __init__(self, path: Path | str) -> None:
        #: a file (SQLite), or a database URL, postgresql://... (PostgreSQL)
        self.path: Path | str = path if is_database_url(path) else Path(path)
        self.sql: SqlDb = self._connect()
        #: the driver's own connection (sqlite3's, or psycopg's): every query of the
        #: manifest goes through `sql`, which speaks both dialects; outside the manifest's
        #: package neither is used (tests/test_quality.py), only the parts below
        self.db: Any = self.sql.raw
        self.runs = RunReads(self.sql)
        self.urls = UrlReads(self.sql)
        self.captures = CaptureReads(self.sql)
        self.counts = Counts(self.sql)
        self.renders = RenderReads(self.sql)  # pages loaded in a browser
        self.sharedrun = SharedRunReads(self.sql)
        self.patterns = PatternReads(self.sql)
        self.robots = Robots(self.sql)

    #: parts made at their first use (`__getattr__`): their modules are the costly ones to
    #: import (the full-text index and its ranking), and `mirror status` needs none of them
    texts: TextReads
    prune: PruneReads
    audit: Audit

    def __getattr__(self, name: str) -> object:
        if name not in _LAZY_PARTS or "sql" not in self.__dict__:
            raise AttributeError(name)
        part = _LAZY_PARTS[name](self.sql)
        setattr(self, name, part)
        return part

    @property
    def name(self) -> str:
        """The manifest for messages: its file, or its database without the password."""
        return self.sql.name

    def _connect(self) -> SqlDb:
        if isinstance(self.path, str):
            db = PostgresDb(self.path, read_only=True)
            try:
                check_postgres(db)
            except BaseException:
                db.close()
                raise
            return db
        if not self.path.exists():
            raise ManifestError(no_manifest(self.path))
        return self._open(f"{self.path.resolve().as_uri()}?mode=ro", read_as_current)

    def _open(self, target: str | Path,
              setup: Callable[[sqlite3.Connection, Path], object]) -> SqlDb:
        """Connect (autocommit; a str is a URI) and set up; ManifestError when either fails."""
        assert isinstance(self.path, Path)
        db = None
        try:
            db = sqlite3.connect(target, uri=isinstance(target, str), isolation_level=None)
            setup(db, self.path)
        except (sqlite3.DatabaseError, ManifestError) as exc:
            if db is not None:
                db.close()
            if isinstance(exc, ManifestError):
                raise
            if isinstance(exc, sqlite3.DatabaseError) and "malformed" in str(exc):
                raise ManifestError(
                    f"{self.path}: damaged ({exc}); refusing to use it. Move the archive "
                    "folder aside, or restore manifest.sqlite3 from a backup and run again."
                ) from exc
            raise ManifestError(f"{self.path}: not a usable manifest: {exc}") from exc
        return SqliteDb(db, str(self.path))

    def close(self) -> None:
        self.sql.close()

    def quick_check(self) -> str:
        """'ok', or SQLite's description of the damage (run after an unclean stop). A
        PostgreSQL server recovers from a crash by itself: 'ok'."""
        if self.sql.dialect != "sqlite":
            return "ok"
        try:
            rows = self.sql.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return "; ".join(" ".join(str(r[0]).split()) for r in rows[:5])


def _texts(sql: SqlDb) -> TextReads:
    from mirror.manifest.texts import TextReads

    return TextReads(sql)


def _prune(sql: SqlDb) -> PruneReads:
    from mirror.manifest.pruning import PruneReads

    return PruneReads(sql)


def _audit(sql: SqlDb) -> Audit:
    from mirror.manifest.audit import Audit

    return Audit(sql)


_LAZY_PARTS: dict[str, Callable[[SqlDb], object]] = {
    "texts": _texts, "prune": _prune, "audit": _audit}
