"""A run shared by several workers, read-only (tables workers, hosts, files): the
reader's part `sharedrun` (the writer's, manifest.sharedrun.SharedRun, extends it with the
verbs). The state machines are in manifest.schema's docstring."""

from __future__ import annotations

from mirror.manifest.db import SqlDb
from mirror.model import FileRow, HostLease, HostRow, Worker


class SharedRunReads:
    """The workers, their host slots and the WARC files they wrote."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def lease_left(self, lease: HostLease) -> float | None:
        """Seconds the lease has left by the database's clock (not the worker's: a worker
        frozen or with a wrong clock cannot think it holds a lease it lost); None when it
        is lost (taken over, or ended)."""
        row = self.sql.execute(
            f"SELECT lease_until - {self.sql.now_ms} FROM hosts WHERE id=? AND lease_owner=? "
            "AND lease_epoch=?", (lease.host_id, lease.owner, lease.epoch)).fetchone()
        return None if row is None else int(row[0]) / 1000

    def workers(self) -> list[Worker]:
        """Every worker that registered, with how long ago (database time) it was alive."""
        now = self.sql.now_ms
        return [Worker(*r) for r in self.sql.execute(
            f"SELECT id, run_id, started, alive, {now} - alive FROM workers ORDER BY id")]

    def lost_workers(self, after: float) -> list[str]:
        """The workers whose last heartbeat is more than `after` seconds old."""
        return [w for (w,) in self.sql.execute(
            f"SELECT id FROM workers WHERE alive < {self.sql.now_ms} - ? ORDER BY id",
            (int(after * 1000),))]

    def hosts(self) -> list[HostRow]:
        """Every host slot: its politeness times and its lease, if it has one."""
        return [HostRow(*r) for r in self.sql.execute(
            "SELECT id, site, slot, next_fetch_at, block_until, lease_owner, lease_epoch, "
            "lease_until FROM hosts ORDER BY site, slot")]

    def files(self, worker: str | None = None) -> list[FileRow]:
        """The WARC files workers wrote (one worker's), by name."""
        mine = "" if worker is None else "WHERE worker=? "
        return [FileRow(*r) for r in self.sql.execute(
            f"SELECT name, worker, state, size, sha256 FROM files {mine}ORDER BY name",
            () if worker is None else (worker,))]
