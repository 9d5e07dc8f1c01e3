"""One run at a time per archive: an advisory flock that dies with its process."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from mirror.errors import LockedError
from mirror.layout import ArchiveLayout


class ArchiveLocked(LockedError):
    """Another process holds the archive's lock; str says which."""

    def __init__(self, pid: str, folder: Path) -> None:
        super().__init__(
            f"{folder}: another mirror process (pid {pid}) is using this archive; "
            "wait for it to finish"
        )
        self.pid = pid


#: how long taking the lock waits out a `holder` probe (it holds a shared lock for microseconds)
PROBE_GRACE = 0.25


class ArchiveLock:
    """`with ArchiveLock(folder):` -- raises ArchiveLocked if another process holds it.

    flock is released by the kernel when the holder exits, even on SIGKILL, so a lock
    left behind by a dead process never blocks; the pid in the file is only for the message.
    `holder` probes with a shared lock, which never blocks another probe (the app polls every
    archive twice a second); taking the lock retries for PROBE_GRACE so that a probe at the
    same instant is not mistaken for a run.
    """

    def __init__(self, folder: Path) -> None:
        self.path = ArchiveLayout(folder).lock
        self._fd: int | None = None

    def __enter__(self) -> ArchiveLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + PROBE_GRACE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise ArchiveLocked(holder, self.path.parent) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    @staticmethod
    def holder(folder: Path) -> str | None:
        """The pid holding the archive's lock, or None when no run is in progress. Never
        creates anything: an archive that does not exist yet has no holder."""
        path = ArchiveLayout(folder).lock
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
