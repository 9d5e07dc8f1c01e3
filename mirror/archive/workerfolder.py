"""The mark a worker of a shared run (`mirror run --db`) leaves in its archive folder
(ArchiveLayout.worker_mark), and what a command that reads a local archive says of such a
folder: it holds that worker's own WARC files only, the run's manifest is in PostgreSQL,
and the run as a whole is in the site's store. A folder whose mark is there but which has
a manifest of its own (a later `mirror run` without --db) is a local archive again."""

from __future__ import annotations

import json
from pathlib import Path

from mirror.archive.fsutil import atomic_write_text
from mirror.layout import ArchiveLayout


def mark(root: Path, worker: str) -> None:
    """Mark `root` as worker `worker`'s folder (the database's address is not written: it
    may hold a password)."""
    atomic_write_text(ArchiveLayout(root).worker_mark,
                      json.dumps({"worker": worker, "manifest": "postgresql"}) + "\n")


def worker_of(root: Path) -> str | None:
    """The id of the worker whose folder `root` is (None: not a worker's folder)."""
    try:
        worker = json.loads(ArchiveLayout(root).worker_mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = worker.get("worker") if isinstance(worker, dict) else None
    return found if isinstance(found, str) else None


def shared_worker_note(root: Path) -> str | None:
    """Why the archive in `root` cannot be read as a site's archive when it is a worker's
    folder of a shared run, with what to run instead; None when it is not one."""
    layout = ArchiveLayout(root)
    if layout.manifest.exists():
        return None
    try:
        worker = json.loads(layout.worker_mark.read_text(encoding="utf-8")).get("worker")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError):
        worker = None
    who = f"worker {worker}" if isinstance(worker, str) else "a worker"
    return (f"{root} is the folder of {who} of a crawl shared through PostgreSQL (`mirror "
            "run --db`): it holds that worker's WARC files only, and the run's manifest is "
            "in the database. Read the whole run from the site's store: `mirror serve SITE "
            "--from-store`, `mirror export SITE --from-store --to DIR`, `mirror verify SITE "
            "--db DSN`")


def no_manifest(manifest: Path) -> str:
    """What to say of an archive folder without `manifest` (its manifest.sqlite3)."""
    return shared_worker_note(manifest.parent) or \
        f"{manifest}: no manifest (has `mirror run` run yet?)"
