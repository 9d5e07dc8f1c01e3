"""Atomic replacement of files outside SQLite (write temp, fsync, rename, fsync dir)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from mirror import crashpoints

#: what a crash in the middle of atomic_write_lines can leave beside the file
TEMP_GLOB = ".*.tmp"


def atomic_write_lines(path: Path, lines: Iterable[str], *, keep_mode: bool = False) -> None:
    """Replace `path` with `lines` so that a reader sees either the old or the new file.
    The new file is private (0600) unless keep_mode: then it gets the old file's mode, or
    for a new file what the umask allows (a file people edit, such as a site file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path) if keep_mode else None
    import tempfile  # here: random and its seeding cost every start (`mirror status`)

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        crashpoints.reached("file:before-rename", path.name)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make the names in `folder` (a rename, a new or deleted file) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, *, keep_mode: bool = False) -> None:
    atomic_write_lines(path, [text], keep_mode=keep_mode)


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def disk_usage(root: Path) -> int:
    """Bytes the folder's files take on disk (blocks, as du counts them); 0 if absent."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                pass
    return total
