"""A prune's view of the manifest (mirror.upkeep.prune): what dropping some runs takes,
its journal, the switch that drops them in one transaction, and the file's compaction.
PruneReads is a part of ManifestReader (`reader.prune`), Prune the writer's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mirror import crashpoints
from mirror.manifest.db import SqlDb, Tx
from mirror.manifest.renders import DROP_ORPHANS
from mirror.manifest.schema import HELD_BY_OTHERS, SET_META
from mirror.manifest.texts import Texts


@dataclass(frozen=True)
class PruneTargets:
    """What dropping some runs takes from the manifest (reader.prune.targets)."""

    captures: int  # captures that go
    held: int  # captures of those runs that stay: a kept revisit's payload is in them
    #: each file holding a record that goes -> (id, offset, length, req_offset,
    #: req_length, render_offset) of each capture in it that stays (none: the file goes);
    #: render_offset: its rendered DOM's conversion record, None for a page not rendered
    files: dict[str, list[tuple[int, int, int, int, int, int | None]]]
    revisits_without_original: int  # kept revisits whose original is unknown: unsafe


class PruneReads:
    """What a prune reads: the runs' captures that go, and a journal left unfinished."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def journal(self) -> str | None:
        """The journal of a prune that has not ended (JSON), or None."""
        row = self.sql.execute("SELECT value FROM meta WHERE key='prune'").fetchone()
        return None if row is None else str(row[0])

    def targets(self, runs: Sequence[int]) -> PruneTargets:
        """What dropping `runs` takes away: their captures, but those a capture of another
        run refers to (its original_id: the response that holds a revisit's payload)."""
        marks = ",".join("?" * len(runs))
        held = HELD_BY_OTHERS.format(marks)
        gone = f"run_id IN ({marks}) AND id NOT IN ({held})"
        count = self.sql.execute(f"SELECT COUNT(*) FROM captures WHERE {gone}",
                                 (*runs, *runs)).fetchone()[0]
        kept = self.sql.execute(f"SELECT COUNT(*) FROM captures WHERE run_id IN ({marks}) "
                                f"AND id IN ({held})", (*runs, *runs)).fetchone()[0]
        files: dict[str, list[tuple[int, int, int, int, int, int | None]]] = {
            name: [] for (name,) in self.sql.execute(
                f"SELECT DISTINCT filename FROM captures WHERE {gone}", (*runs, *runs))}
        if files:
            names = ",".join("?" * len(files))
            for name, cid, offset, length, req_offset, req_length, render in self.sql.execute(
                    'SELECT c.filename, c.id, c."offset", c.length, c.req_offset, '
                    'c.req_length, r."offset" FROM captures c LEFT JOIN renders r ON '
                    f"r.capture_id = c.id AND r.warc_file = c.filename "
                    f"WHERE c.filename IN ({names}) AND (c.run_id NOT IN ({marks}) OR c.id IN "
                    f"({held})) ORDER BY c.id", (*files, *runs, *runs)):
                files[name].append((cid, offset, length, req_offset, req_length, render))
        orphans = self.sql.execute(
            f"SELECT COUNT(*) FROM captures WHERE run_id NOT IN ({marks}) "
            "AND record_type != 'response' AND original_id IS NULL", runs).fetchone()[0]
        return PruneTargets(int(count), int(kept), files, int(orphans))


class Prune(PruneReads):
    """A prune's writes: each one transaction (or a part of the writer's open group)."""

    def __init__(self, sql: SqlDb, tx: Tx, texts: Texts) -> None:
        super().__init__(sql)
        self._tx = tx
        self._texts = texts  # the captures' texts go with them

    def set_journal(self, journal: str | None) -> None:
        """Record a prune's journal (JSON) before it changes anything; None: it ended."""
        with self._tx():
            if journal is None:
                self.sql.execute("DELETE FROM meta WHERE key='prune'")
            else:
                self.sql.execute(SET_META, ("prune", journal))

    def drop_runs(self, runs: Sequence[int], moves: Iterable[Sequence[object]],
                  journal: str) -> None:
        """A prune's switch, in one transaction: the captures of `runs` go (with their
        texts, and the runs' rows, sessions, notes and errors), but those a capture of
        another run refers to; the captures of rewritten files move (`moves`: capture id,
        filename, offset, length, req_offset, req_length, render_offset: their rendered
        DOM's with them); the journal says it is done."""
        marks = ",".join("?" * len(runs))
        gone = f"run_id IN ({marks}) AND id NOT IN ({HELD_BY_OTHERS.format(marks)})"
        with self._tx():
            texts = self.sql.execute(f"SELECT DISTINCT text_id FROM captures WHERE {gone} "
                                    "AND text_id IS NOT NULL", (*runs, *runs)).fetchall()
            self.sql.execute(f"DELETE FROM captures WHERE {gone}", (*runs, *runs))
            self.sql.execute(DROP_ORPHANS)
            self._texts.relatest([u for (u,) in self.sql.execute(
                "SELECT url_id FROM latest_texts WHERE capture_id NOT IN "
                "(SELECT id FROM captures)").fetchall()])
            self._texts.drop(texts)
            self._texts.sync_latest(build=True)
            moves = list(moves)
            self.sql.executemany(
                'UPDATE captures SET filename=?, "offset"=?, length=?, req_offset=?, '
                "req_length=? WHERE id=?", [(*m[1:6], m[0]) for m in moves])
            self.sql.executemany(  # a rendered DOM moves with its capture
                'UPDATE renders SET warc_file=?, "offset"=? WHERE capture_id=?',
                [(m[1], m[6], m[0]) for m in moves if m[6] is not None])
            self.sql.execute(f"DELETE FROM runs WHERE id IN ({marks})", runs)
            for table in ("sessions", "notes", "page_robots", "errors", "sitemap_reads",
                          "robots_answers", "learned_patterns", "workers"):
                self.sql.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", runs)
            self.sql.execute(SET_META, ("prune", journal))
            crashpoints.reached("prune:switch-inside")

    def compact(self, share: float = 0.25) -> bool:
        """VACUUM when at least `share` of the file is free pages (what a large prune
        leaves; a run reuses them, so after a nightly prune of one run it is not worth
        rewriting the file), then empty the WAL. Atomic, like any transaction. (SQLite's:
        PostgreSQL's autovacuum does its own; False.)"""
        if self.sql.dialect != "sqlite":
            return False
        free = self.sql.execute("PRAGMA freelist_count").fetchone()[0]
        if free <= share * self.sql.execute("PRAGMA page_count").fetchone()[0]:
            return False
        self.sql.execute("VACUUM")
        self.sql.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True
