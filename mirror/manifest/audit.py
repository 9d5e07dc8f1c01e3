"""What `mirror verify` asks of a manifest beyond its captures: each revisit's original,
rows in a state mirror does not know, and, for a shared run, the files not yet uploaded,
URLs captured twice and URLs a complete run left. Read-only; a part of ManifestReader."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Literal

from mirror.manifest.db import SqlDb
from mirror.manifest.schema import FRONTIER_URLS

#: rows of the revisit query fetched at a time from PostgreSQL's server-side cursor
BATCH = 2000


class Audit:
    """verify's queries, each row as the checks read it (pure tuples)."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql
        self._cursors = 0  # server-side cursors opened (each gets its own name)

    def revisit_originals(self) -> Generator[tuple[int, str | None], None, None]:
        """(capture id, its original's record id; None if original_id names no capture) of
        every capture that has an original_id, in id order, in bounded memory: on
        PostgreSQL through a server-side cursor, BATCH rows at a time (psycopg's plain
        cursor would hold every row of the result at once)."""
        query = ("SELECT c.id, o.record_id FROM captures c LEFT JOIN captures o ON o.id = "
                 "c.original_id WHERE c.original_id IS NOT NULL ORDER BY c.id")
        if self.sql.dialect == "sqlite":
            cursor = self.sql.execute(query)
            try:
                yield from cursor
            finally:
                cursor.close()
            return
        self._cursors += 1  # WITH HOLD: the connection is in autocommit, a cursor outlives it
        server: Any = self.sql.raw.cursor(name=f"mirror_verify_{self._cursors}", withhold=True)
        try:
            server.execute(query)
            while rows := server.fetchmany(BATCH):
                yield from rows
        finally:
            server.close()

    def unknown_states(self, table: Literal["runs", "urls"],
                       known: Sequence[str]) -> Generator[tuple[int, str], None, None]:
        """(id, state) of the rows of `table` whose state is not one of `known`, by id."""
        marks = ", ".join("?" for _ in known)
        cursor = self.sql.execute(f"SELECT id, state FROM {table} "  # noqa: S608 - a literal
                                  f"WHERE state NOT IN ({marks}) ORDER BY id", tuple(known))
        try:
            yield from cursor
        finally:
            cursor.close()

    # -- a shared run ---------------------------------------------------------------------
    def unsettled_capture_files(self) -> list[tuple[str, int, str | None, str | None]]:
        """(file name, captures in it, files.worker, files.state) of each file that holds
        captures and is not 'uploaded' (worker and state None: the file has no files row)."""
        return [(str(name), int(n), worker, state) for name, n, worker, state in self.sql.execute(
            "SELECT c.filename, COUNT(*), f.worker, f.state FROM captures c "
            "LEFT JOIN files f ON f.name = c.filename "
            "WHERE f.state IS NULL OR f.state != 'uploaded' "
            "GROUP BY c.filename, f.worker, f.state ORDER BY c.filename")]

    def captured_twice(self) -> list[tuple[int, str, int, str, str | None]]:
        """(run id, url, capture id, file name, files.worker) of each capture of a URL
        captured more than once in one run, by run, url and capture id."""
        return [(int(r), str(u), int(c), str(n), w) for r, u, c, n, w in self.sql.execute(
            "SELECT c.run_id, c.url, c.id, c.filename, f.worker FROM captures c "
            "JOIN (SELECT run_id, url_id FROM captures GROUP BY run_id, url_id "
            "      HAVING COUNT(*) > 1) d ON d.run_id = c.run_id AND d.url_id = c.url_id "
            "LEFT JOIN files f ON f.name = c.filename ORDER BY c.run_id, c.url, c.id")]

    def unfinished_urls(self, run_id: int) -> list[tuple[str, str, str | None]]:
        """(url, state, lease owner) of the run's URLs still to fetch, as the workers count
        them (robots.txt, fetched out of band by the robots gate, is not one of them)."""
        return [(str(u), str(s), o) for u, s, o in self.sql.execute(
            "SELECT url, state, lease_owner FROM urls WHERE run_id=? "
            f"AND state IN ('pending', 'leased') AND {FRONTIER_URLS} ORDER BY url", (run_id,))]
