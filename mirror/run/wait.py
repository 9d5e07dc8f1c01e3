"""A scheduled run's turn: wait for a run still going, at most one waiter per archive.

Two flocks: the archive's own lock (archive/lock.py), held by whatever run works on the
archive, and one of the same kind in <archive>/.schedule-wait/, held by the one scheduled
run that waits for it.
A scheduled start that finds the wait lock taken ends at once (AlreadyWaiting), so however
long a run takes, at most one run works and one waits: runs never pile up. The waiter lets
go of the wait lock as soon as it holds the archive's, so the next scheduled start may wait
for it in turn. Both locks die with their process, even on SIGKILL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mirror.archive.lock import ArchiveLock, ArchiveLocked
from mirror.errors import LockedError

#: the waiter's lock: a lock of the archive's kind (archive/lock.py) in this subfolder
WAIT_DIR = ".schedule-wait"
#: seconds between two tries of the archive's lock while waiting
POLL = 2.0


class AlreadyWaiting(LockedError):
    """Another scheduled run already waits for this archive; str says which."""

    def __init__(self, pid: str, folder: Path) -> None:
        super().__init__(f"{folder}: a scheduled run (pid {pid}) is already waiting for the "
                         "run still going; this one is skipped so that runs never pile up")
        self.pid = pid


def wait_folder(archive: Path) -> Path:
    return archive / WAIT_DIR


@contextmanager
def scheduled_turn(archive: Path, say: Callable[[str], None], *,
                   poll: float = POLL) -> Iterator[ArchiveLock]:
    """Hold the archive's lock for a scheduled run, waiting for a run still going (and
    saying so through `say`); raises AlreadyWaiting when another scheduled run waits."""
    try:
        waiter = ArchiveLock(wait_folder(archive)).__enter__()
    except ArchiveLocked as exc:
        raise AlreadyWaiting(exc.pid, archive) from None
    try:
        lock = _wait_for_archive(archive, say, poll)
    finally:
        waiter.__exit__(None, None, None)  # the wait is over: the next start may wait in turn
    try:
        yield lock
    finally:
        lock.__exit__(None, None, None)


def _wait_for_archive(archive: Path, say: Callable[[str], None], poll: float) -> ArchiveLock:
    waited_for: str | None = None
    while True:
        try:
            lock = ArchiveLock(archive).__enter__()
        except ArchiveLocked as exc:
            if waited_for is None:
                say(f"{archive}: a run is still going (pid {exc.pid}); this scheduled run "
                    "waits for it to finish")
            waited_for = exc.pid
            time.sleep(poll)
            continue
        if waited_for is not None:
            say(f"{archive}: the run before (pid {waited_for}) has finished; this scheduled "
                "run starts")
        return lock


def waiting(archive: Path) -> str | None:
    """The pid of the scheduled run waiting for this archive, or None (a probe that never
    blocks a waiter's start: ArchiveLock.holder)."""
    return ArchiveLock.holder(wait_folder(archive))
