"""`mirror push SITE --db DSN` for the folder of a worker of a shared run (`mirror run
--db`): what that worker left not uploaded (a store outage longer than its retries, exit
UPLOAD_PENDING) uploaded now, without crawling.

The folder has no manifest of its own: the run's is in PostgreSQL, which says which of the
worker's files are not uploaded yet (closed, or open when the worker died). The push does
what the worker's own next start would do with its files (sharedfiles.repair_files: an
`.open` file cut back to its last committed record and closed), then uploads them with the
worker's file thread (SharedFiles: recorded, uploaded, marked uploaded; a file declared lost
deleted). When this worker completed the run (the folder has its index.cdxj) and every
captured file of the run is uploaded, the index is written again from the manifest and
uploaded, and the run's code, UPLOAD_PENDING when its worker ended so (pendingmark), is
its crawl's again. Nothing is deleted from the folder but files the manifest declared lost.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mirror.crawl.pendingmark import clear_pending
from mirror.crawl.runmode import write_index
from mirror.crawl.sharedfiles import FilesResult, SharedFiles, repair_files
from mirror.layout import ArchiveLayout
from mirror.manifest.writer import Manifest

log = logging.getLogger(__name__)


def push_worker_folder(root: Path, dsn: str, store_url: str, worker: str) -> FilesResult:
    """Upload worker `worker`'s files in `root` that the manifest at `dsn` says are not
    uploaded (the caller holds the folder's lock, so the worker is not running)."""
    layout = ArchiveLayout(root)
    manifest = Manifest(dsn)
    try:
        last = manifest.runs.last()
        todo = repair_files(manifest, layout.warc, last.id if last else 0)
        files = SharedFiles(dsn, worker, layout.warc, store_url)
        for name in todo:
            files.closed(name)
        files.end(_index(manifest, layout, worker, todo))
        files.join()
        if files.result.complete and not manifest.filemarks.unsettled_files("", 0.0):
            clear_pending(manifest)  # every file of the run uploaded: its crawl's code back
    finally:
        manifest.close()
    return files.result


def _index(manifest: Manifest, layout: ArchiveLayout, worker: str,
           todo: list[str]) -> Path | None:
    """The run's index, written again from the manifest, when this worker wrote it (it
    completed the run) and no file of the run waits but this worker's `todo` (their
    uploads go first; the index is not uploaded when one of them fails)."""
    last = manifest.runs.last()
    if not layout.index.exists() or last is None or last.finished_at is None:
        return None
    others = manifest.filemarks.unsettled_files(worker, 0.0)
    if others:
        log.warning("index.cdxj not uploaded: workers %s have files not uploaded",
                    ", ".join(sorted(others)))
        return None
    write_index(manifest, layout.index, lambda: False)
    return layout.index
