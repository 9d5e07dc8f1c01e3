"""The runs in the manifest (tables runs and sessions): the reader's part `runs`
(RunReads), and the writer's (Runs), which starts, resumes, finishes and abandons them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from mirror.manifest.db import SqlDb, Tx
from mirror.manifest.sharedrun import retried
from mirror.manifest.urls import TO_PENDING, Urls
from mirror.model import NewUrl, Run

if TYPE_CHECKING:
    from mirror.manifest.texts import Texts

#: the columns of runs, in the order of model.Run's fields
_RUN = "id, started_at, finished_at, state, config_digest, exit_code"


class RunReads:
    """The runs, read-only: each run's row, its working time and what it stored."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def last(self) -> Run | None:
        row = self.sql.execute(f"SELECT {_RUN} FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return Run(*row) if row else None

    def all(self) -> list[Run]:
        return [Run(*r) for r in self.sql.execute(f"SELECT {_RUN} FROM runs ORDER BY id")]

    def time(self, run_id: int) -> tuple[float, int]:
        """(seconds some process worked on the run, how many processes there were): the
        sessions of a resumed run follow each other, those of a run shared by several
        workers overlap, so their union is counted, not their sum."""
        spans = self.sql.execute("SELECT started, alive FROM sessions WHERE run_id=? "
                                 "ORDER BY started", (run_id,)).fetchall()
        return union_length((float(a), float(b)) for a, b in spans), len(spans)

    def last_alive(self, run_id: int) -> float | None:
        """When a process was last seen working on the run (Unix time), or None."""
        row = self.sql.execute("SELECT MAX(alive) FROM sessions WHERE run_id=?",
                               (run_id,)).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def walk(self, run_id: int) -> Iterator[tuple[str, int, str]]:
        """(url, status, payload digest) of every capture in a run, by URL (a URL captured
        twice: in the order of its captures), read as they are used."""
        # by code point, as Python compares (PostgreSQL's default collation follows a locale)
        by_url = "url" if self.sql.dialect == "sqlite" else 'url COLLATE "C"'
        yield from self.sql.execute("SELECT url, status, payload_digest FROM captures "
                                    f"WHERE run_id=? ORDER BY {by_url}, id", (run_id,))

    def contents(self, run_id: int) -> dict[str, tuple[int, str]]:
        """url -> (status, payload digest) of every capture in a run."""
        rows = self.sql.execute(
            "SELECT url, status, payload_digest FROM captures WHERE run_id=?", (run_id,))
        return {u: (s, d) for u, s, d in rows}

    def totals(self) -> dict[int, tuple[int, int]]:
        """run id -> (captures, payload bytes)."""
        rows = self.sql.execute(
            "SELECT run_id, COUNT(*), COALESCE(SUM(payload_length), 0) FROM captures "
            "GROUP BY run_id"
        )
        return {r: (n, int(b)) for r, n, b in rows}  # int: PostgreSQL's SUM is numeric


class Runs(RunReads):
    """The writer's part for runs: each method is one transaction (or a part of the
    writer's open group, `tx`). The state machine is in manifest.schema's docstring."""

    def __init__(self, sql: SqlDb, tx: Tx, texts: Texts, urls: Urls) -> None:
        super().__init__(sql)
        self.tx = tx
        self._texts = texts  # the writer's: a finished run is searchable whole
        self._urls = urls  # the writer's: a new run's start URLs, leases that end

    @retried
    def start(self, started_at: str, config_digest: str,
              seeds: Sequence[NewUrl] = ()) -> int:
        """A new run and its start URLs, in one transaction: a run killed between the two
        would resume with nothing to fetch and end 'complete' with nothing stored."""
        with self.tx():
            run_id = self.new(started_at, config_digest, seeds)
        return run_id

    def new(self, started_at: str, config_digest: str, seeds: Sequence[NewUrl]) -> int:
        """start's statements, in the caller's transaction (sharedrun's join_or_start_run)."""
        run_id: int = self.sql.execute(
            "INSERT INTO runs (started_at, state, config_digest) VALUES (?, 'running', ?) "
            "RETURNING id", (started_at, config_digest)).fetchone()[0]
        self._urls.insert(run_id, None, seeds)
        return run_id

    def resume(self, run_id: int) -> int:
        """Leased URLs of an unfinished run go back to pending; returns how many. The texts
        a killed process had not indexed yet go into the search index first. Every lease
        ends: this is the single machine's restart (a worker sharing a crawl calls
        sharedrun.recover(owner), which ends only its own and the expired ones)."""
        self._texts.index()
        with self.tx():
            self.sql.execute(
                "UPDATE runs SET state='running', finished_at=NULL WHERE id=?", (run_id,)
            )
            cur = self.sql.execute(f"UPDATE urls SET {TO_PENDING} WHERE state='leased'")
            self._free_hosts()
        return cur.rowcount

    def begin_session(self, run_id: int, now: float) -> int:
        """This process works on `run_id` from `now` on; returns the session's id."""
        with self.tx():
            session: int = self.sql.execute(
                "INSERT INTO sessions (run_id, started, alive) VALUES (?, ?, ?) RETURNING id",
                (run_id, now, now)).fetchone()[0]
        return session

    def touch_session(self, session_id: int, now: float) -> None:
        with self.tx():
            self.sql.execute("UPDATE sessions SET alive=? WHERE id=?", (now, session_id))

    @retried
    def finish(self, run_id: int, finished_at: str, state: str, exit_code: int) -> None:
        self._texts.index()  # a finished run is searchable whole
        with self.tx():
            self.sql.execute(
                "UPDATE runs SET finished_at=?, state=?, exit_code=? WHERE id=?",
                (finished_at, state, exit_code, run_id),
            )

    def set_exit_code(self, run_id: int, exit_code: int) -> None:
        """A finished run's code changed after its end (its uploads pending, then done)."""
        with self.tx():
            self.sql.execute("UPDATE runs SET exit_code=? WHERE id=?", (exit_code, run_id))

    def abandon(self, run_id: int, finished_at: str) -> None:
        """An unfinished run left behind by `mirror run --new-run`."""
        with self.tx():
            self.sql.execute(
                "UPDATE runs SET state='abandoned', finished_at=? WHERE id=?",
                (finished_at, run_id))
            self.sql.execute(f"UPDATE urls SET {TO_PENDING} WHERE state='leased'")
            self._free_hosts()

    def _free_hosts(self) -> None:
        self.sql.execute("UPDATE hosts SET lease_owner=NULL, lease_until=0 "
                         "WHERE lease_owner IS NOT NULL")


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """The length of the union of intervals (start, end), given in order of start."""
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total
