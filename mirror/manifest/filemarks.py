"""The marks of a shared run's WARC files in the manifest: each file a worker writes is
open, closed, uploaded to the store, or lost with its worker's disk (table files; the state
machine is in manifest.schema's docstring). A part of the writer, Manifest.filemarks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mirror.manifest.captures import END
from mirror.manifest.db import SqlDb, Tx
from mirror.manifest.sharedrun import retried


class FileMarks:
    """The WARC files of a shared run: which worker writes each, and how far it got."""

    def __init__(self, sql: SqlDb, tx: Tx,
                 forget_captures: Callable[[int, str, Sequence[object]], list[str]]) -> None:
        self.sql = sql
        self.tx = tx
        self._tx = tx
        self._forget_captures = forget_captures  # the writer's: captures go, URLs to pending

    def file_state(self, name: str) -> str | None:
        """open | closed | uploaded | lost, or None when the manifest has no such file."""
        row = self.sql.execute("SELECT state FROM files WHERE name=?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def uploads_awaited(self, run_id: int, but: str, alive_within: float) -> list[str]:
        """WARC files with captures of the run not uploaded yet, of other workers heard of
        within `alive_within` seconds (which are uploading them, or about to)."""
        return [str(name) for (name,) in self.sql.execute(
            "SELECT name FROM files f WHERE state IN ('open', 'closed') AND worker != ? "
            "AND EXISTS (SELECT 1 FROM captures c WHERE c.filename = f.name "
            "AND c.run_id = ?) AND EXISTS (SELECT 1 FROM workers w WHERE w.id = f.worker "
            f"AND w.alive > {self.sql.now_ms} - ?) ORDER BY name",
            (but, run_id, int(alive_within * 1000))).fetchall()]

    def unsettled_files(self, but: str, silent_for: float) -> dict[str, list[str]]:
        """WARC files with committed captures that are not uploaded, of other workers
        silent for `silent_for` seconds (dead: one alive uploads its own): worker -> file
        names."""
        out: dict[str, list[str]] = {}
        for worker, name in self.sql.execute(
                "SELECT worker, name FROM files f WHERE state IN ('open', 'closed') "
                "AND worker != ? AND EXISTS (SELECT 1 FROM captures c "
                "WHERE c.filename = f.name) AND NOT EXISTS (SELECT 1 FROM workers w WHERE "
                f"w.id = f.worker AND w.alive > {self.sql.now_ms} - ?) ORDER BY worker, name",
                (but, int(silent_for * 1000))).fetchall():
            out.setdefault(str(worker), []).append(str(name))
        return out

    def committed_end(self, name: str) -> int:
        """The offset just past the last record of WARC file `name` the manifest knows
        (0: none): where a worker restarting cuts its file back to."""
        row = self.sql.execute(f"SELECT MAX({END}) FROM captures WHERE filename=?",
                               (name,)).fetchone()
        return int(row[0] or 0)

    @retried
    def open_file(self, name: str, owner: str) -> bool:
        """A worker starts writing WARC file `name` (or goes on with it after a restart);
        False when the file was declared lost: the worker must not write to it."""
        with self._tx():
            self.sql.execute(
                f"INSERT INTO files (name, worker, state, opened) VALUES (?, ?, 'open', "
                f"{self.sql.now_ms}) ON CONFLICT(name) DO NOTHING", (name, owner))
            row = self.sql.execute("SELECT state FROM files WHERE name=?", (name,)).fetchone()
        return bool(row[0] == "open")

    def close_file(self, name: str, size: int, sha256: str) -> bool:
        """The file is complete (open -> closed); False when it was declared lost."""
        return self._file_step(name, "open", "closed",
                               f", size=?, sha256=?, closed={self.sql.now_ms}", (size, sha256))

    def mark_uploaded(self, name: str) -> bool:
        """The closed file is in object storage (closed -> uploaded); False when it was
        declared lost (the worker deletes it instead) or is not closed."""
        return self._file_step(name, "closed", "uploaded", "", ())

    @retried
    def _file_step(self, name: str, old: str, new: str, more: str,
                   params: tuple[object, ...]) -> bool:
        with self._tx():
            row = self.sql.execute(
                f"UPDATE files SET state=?{more} WHERE name=? AND state=? RETURNING name",
                (new, *params, name, old)).fetchone()
        return row is not None

    @retried
    def mark_lost(self, worker: str) -> list[str]:
        """A worker gone with its disk (silent longer than lost_after, or forgotten by
        hand): its files not uploaded are lost, their captures forgotten and those URLs
        back to pending (fetched once more); its leases end. Returns the lost files."""
        with self._tx():
            row = self.sql.execute("SELECT run_id FROM workers WHERE id=?",
                                   (worker,)).fetchone()
            if row is None:
                row = self.sql.execute("SELECT MAX(id) FROM runs").fetchone()
            names = sorted(n for (n,) in self.sql.execute(
                "UPDATE files SET state='lost' WHERE worker=? AND state IN ('open', 'closed') "
                "RETURNING name", (worker,)).fetchall())
            for name in names:
                self._forget_captures(int(row[0] or 0), "filename=?", (name,))
            if names:  # its URLs are to be fetched again: the run is not complete
                self.sql.execute("UPDATE runs SET state='running', finished_at=NULL "
                                 "WHERE id=? AND state != 'running'", (int(row[0] or 0),))
            self.sql.execute("UPDATE urls SET state='pending', lease_owner=NULL, "
                             "lease_epoch=NULL WHERE state='leased' AND lease_owner=?",
                             (worker,))
            self.sql.execute("UPDATE hosts SET lease_owner=NULL, lease_until=0 "
                             "WHERE lease_owner=?", (worker,))
        return names
