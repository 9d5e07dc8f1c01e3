"""A consistent copy of a SQLite manifest while a crawl writes it: SQLite's backup API.

Copying the file would not do: a live manifest is a WAL database, its newest commits are
in manifest.sqlite3-wal, and a copy taken during a commit is torn. The backup API copies
the pages a read transaction sees, in one step, so the copy is the manifest as of one
commit. A reader does not block the writer in WAL mode. No SQL is run here.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def copy_manifest(source: Path, dest: Path) -> None:
    """Write a consistent copy of the SQLite file `source` to `dest` (replaced), as one
    self-contained file (no -wal beside it), fsynced."""
    dest.unlink(missing_ok=True)
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)  # pages=-1: every page in one step, under one read transaction
        finally:
            out.close()
    finally:
        src.close()
    for suffix in ("-wal", "-shm"):  # closing the last connection folds and removes them
        if dest.with_name(dest.name + suffix).exists():
            raise OSError(f"{dest}: a {suffix} file remained beside the copy")
    with open(dest, "rb") as f:
        os.fsync(f.fileno())
