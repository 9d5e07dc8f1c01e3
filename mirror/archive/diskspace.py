"""A full disk: telling it from other write failures, and what a run then says.

A run that meets a full disk stops (ExitCode.DISK_FULL) wherever it is: appending a WARC
record (the torn tail is cut off again), committing to the manifest (SQLite's "database or
disk is full": the group's records are cut off the WARC file again), writing index.cdxj or
the run's report (a temporary file renamed into place: the old one stays whole until the
rename). progress.json is skipped, not fatal. Nothing committed is lost, and the next
`mirror run` resumes the run once there is space.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from mirror.errors import MirrorError
from mirror.model import ExitCode

#: the errno values of a file system that has no room left (for anyone, or for this user)
_FULL = (errno.ENOSPC, errno.EDQUOT)
#: how SQLite (SQLITE_FULL) and a message built from an OSError say it
_FULL_TEXTS = ("database or disk is full", os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))


class DiskFull(MirrorError):
    """The disk holding `path` is full: the run stopped, nothing is lost."""

    exit_code = ExitCode.DISK_FULL

    def __init__(self, path: Path | str, said: str | None = None) -> None:
        """`said`: the message of the first full-disk error of the run, when there was one
        before this (the WARC record whose write failed, rather than the index after it)."""
        self.path, self.free = Path(path), free_bytes(Path(path))
        super().__init__(said or disk_full_message(self.path, self.free))


#: how the message of a full disk begins
DISK_FULL_SAYS = "disk full writing "


def disk_full_message(path: Path, free: int) -> str:
    return (f"{DISK_FULL_SAYS}{path}: {free:,} bytes free; nothing lost; run `mirror run` "
            "again when there is space")


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from, says the disk is full."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in _FULL:
            return True
        if any(text in str(exc) for text in _FULL_TEXTS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def where_full(exc: BaseException, default: Path) -> Path:
    """The file a full-disk error names (an OSError raised by open() names it), else
    `default` (a write() or SQLite names none)."""
    while exc is not None:
        if isinstance(exc, DiskFull):
            return exc.path
        if isinstance(exc, OSError) and exc.filename:
            return Path(os.fsdecode(exc.filename))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return default


def free_bytes(path: Path) -> int:
    """Bytes free for this user on the file system holding `path` (or its nearest
    existing folder); -1 when it cannot be told."""
    for folder in (path, *path.parents):
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return -1
