"""Manifest: the crawl's writer of the manifest (runs, URL states, captures, links), in a
SQLite file or, for a crawl shared by several workers, a PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from mirror.manifest.captures import Captures
from mirror.manifest.db import (
    DatabaseGone,
    ManifestConflict,
    ManifestReconnected,
    ManifestWriteError,
    PostgresDb,
    SqlDb,
    Tx,
)
from mirror.manifest.filemarks import FileMarks
from mirror.manifest.patterns import Patterns
from mirror.manifest.pruning import Prune
from mirror.manifest.reader import ManifestReader
from mirror.manifest.robotsanswers import RobotsAnswers
from mirror.manifest.runs import Runs
from mirror.manifest.schema import ManifestError, create_or_upgrade, create_or_upgrade_postgres
from mirror.manifest.sharedrun import SharedRun
from mirror.manifest.sitemaps import Sitemaps
from mirror.manifest.texts import Texts
from mirror.manifest.urls import KnownUrls, Urls
from mirror.model import CaptureRow, NewUrl, Original, Previous, Run, UrlItem

__all__ = ["CaptureRow", "Manifest", "ManifestConflict", "ManifestError", "ManifestReconnected",
           "ManifestWriteError", "DatabaseGone",
           "NewUrl", "Original", "Previous", "Run", "UrlItem", "open_manifest"]


def open_manifest(target: Path | str, *, durable: bool = False) -> Manifest:
    """The manifest `target` names, opened read-write: a file path (SQLite, the default), or
    postgresql://... (a database several workers share; needs `mirror[fleet]`)."""
    return Manifest(target, durable=durable)


class Manifest(ManifestReader):
    """Crawl state, opened read-write: an older schema is upgraded on opening. In a SQLite
    file (WAL; one writer at a time) or a PostgreSQL database (several workers: its
    parts sharedrun and filemarks lease hosts to them and follow their WARC files). Every
    write of its parts is one short transaction (or a part of a group()'s): they share
    its transactions (`tx`): runs, urls, captures, texts, patterns, sitemaps, prune,
    sharedrun, filemarks, robots_answers. The queries are ManifestReader's parts, which
    these extend. The state machines are in manifest.schema's docstring."""

    def __init__(self, path: Path | str, *, durable: bool = False) -> None:
        self.durable = durable  # SQLite: synchronous=FULL (PostgreSQL: the server decides)
        super().__init__(path)
        seen = KnownUrls()  # what the transactions wrote: links to those need no upsert
        self.tx = Tx(self.sql, seen.settle)  # what every write and every part's joins
        self.patterns: Patterns = Patterns(self.sql)
        self.sitemaps = Sitemaps(self.sql, self.tx)
        self.texts: Texts = Texts(self.sql, self.tx)
        self.urls: Urls = Urls(self.sql, self.tx, seen, lambda: self.sharedrun.host_slots)
        self.runs: Runs = Runs(self.sql, self.tx, self.texts, self.urls)
        self.captures: Captures = Captures(self.sql, self.tx, self.texts, self.urls)
        self.prune: Prune = Prune(self.sql, self.tx, self.texts)
        self.sharedrun: SharedRun = SharedRun(self.sql, self.tx, self.runs.new,
                                              self.counts.done_pages)
        self.filemarks = FileMarks(self.sql, self.tx, self.captures.forget)
        self.robots_answers = RobotsAnswers(self.sql, self.tx)

    def _connect(self) -> SqlDb:
        if isinstance(self.path, str):
            db = PostgresDb(self.path)
            try:
                create_or_upgrade_postgres(db)
            except db.errors as exc:
                db.close()
                raise ManifestError(f"{db.name}: not a usable manifest: {exc}") from exc
            except BaseException:
                db.close()
                raise
            return db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self._open(self.path, partial(create_or_upgrade, durable=self.durable))

    @contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for several writes (a group commit of captures): every
        commit_capture inside it joins it, and all of them are committed at its end, or
        none (ManifestWriteError). The search index is not updated inside a group: call
        texts.index_due after it."""
        assert not self.tx.grouped, "groups do not nest"
        with self.sql.transaction(self.tx.settle):
            self.tx.grouped = True
            try:
                yield
            finally:
                self.tx.grouped = False
