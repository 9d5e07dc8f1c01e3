"""A shared run's WARC files (`mirror run --db postgresql://...`): a worker's repair of its
own files at its start, and the states of the files it writes (open -> closed -> uploaded;
DISTRIBUTED.md §5.2).

Each worker has its own folder and writes only its own WARC files (its id in their
names), so it alone repairs them: after a crash it cuts each `.open` file back to the last
record the manifest has committed (a record past it was never committed, or was fenced
off: its URL is fetched again, by whichever worker holds its host), and closes it. Closed
files are recorded (size, SHA-256) and uploaded to the store in a thread, then marked
uploaded; a file the manifest declared lost (its worker was forgotten: `--forget-worker`)
is deleted instead, here and in the store, since its captures were forgotten and fetched
again by others. So every uploaded file holds committed captures only.

An upload the store did not take (unreachable, a 5xx) is tried again with backoff and
jitter (mirror.store.retry): during the crawl when its wait is over, and after it for up to
`[archive] store_retry` seconds. A file stays on disk until it is uploaded; what is still
pending then makes the worker exit UPLOAD_PENDING, and `mirror push SITE --db DSN` (or the
worker's next `mirror run --db`) uploads it.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirror import crashpoints
from mirror.archive.warcwriter import FILE_RE, OPEN_SUFFIX
from mirror.crawl.startup import roll_back_short
from mirror.manifest.db import ManifestError
from mirror.manifest.writer import Manifest
from mirror.store.objstore import (
    INDEX_KEY,
    WARC_PREFIX,
    ObjectStore,
    StoreError,
    StoreRefused,
    file_digest,
    open_store,
)
from mirror.store.retry import Backoff
from mirror.upkeep import recovery
from mirror.upkeep.recovery import file_size

log = logging.getLogger(__name__)

#: closed files waiting for the thread (more are settled at the end anyway)
QUEUE_SIZE = 64
#: how often an idle thread looks whether the run has ended (seconds)
POLL = 0.1


def repair_files(manifest: Manifest, warc_dir: Path, run_id: int) -> list[str]:
    """A worker (re)starting: each of its `.open` files cut back to its last committed
    record and closed (deleted when it has none); files declared lost deleted. Returns
    the closed files still to record or upload, in name order."""
    for path in recovery.open_files(warc_dir):
        name = path.name[: -len(OPEN_SUFFIX)]
        if _deleted_if_lost(manifest.filemarks.file_state(name), path):
            continue
        end = _committed_end(manifest, run_id, path, name)
        if end < file_size(path):
            log.warning("cut %s back to its last committed record (%d -> %d bytes)",
                        name, file_size(path), end)
            recovery.truncate(path, end)
        if end == 0:
            path.unlink()
            continue
        os.replace(path, path.with_name(name))
        log.warning("closed %s left open by this worker's last run", name)
    todo = []
    for name in sorted(os.listdir(warc_dir)) if warc_dir.is_dir() else ():
        if not FILE_RE.match(name) or name.endswith(OPEN_SUFFIX):
            continue
        state = manifest.filemarks.file_state(name)
        if _deleted_if_lost(state, warc_dir / name):
            continue
        _committed_end(manifest, run_id, warc_dir / name, name)
        if state in ("open", "closed"):
            todo.append(name)
    return todo


def _deleted_if_lost(state: str | None, path: Path) -> bool:
    if state != "lost":
        return False
    log.warning("deleting %s: the manifest declared it lost (its captures were fetched "
                "again)", path.name)
    path.unlink()
    return True


def _committed_end(manifest: Manifest, run_id: int, path: Path, name: str) -> int:
    """Where the file's committed records end, after forgetting the captures past its
    actual end (a file cut short by a power loss: startup.roll_back_short)."""
    end = manifest.filemarks.committed_end(name)
    if roll_back_short(manifest, run_id, name, file_size(path), end):
        end = manifest.filemarks.committed_end(name)
    return end


@dataclass
class FilesResult:
    """What the worker's file thread did with its closed files."""

    store: str | None
    uploaded: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # declared lost
    index: bool = False

    def lines(self) -> list[str]:
        if self.store is None:
            return []
        out = [f"store {self.store}: {len(self.uploaded)} WARC files uploaded"
               + (", index" if self.index else "")
               + (f"; {len(self.deleted)} lost files deleted" if self.deleted else "")]
        out += [f"  not uploaded: {name} ({why})" for name, why in self.failed[:20]]
        if len(self.failed) > 20:
            out.append(f"  ... and {len(self.failed) - 20} more not uploaded")
        return out

    def pending_line(self, site_file: object) -> str:
        """What a worker that ends with uploads pending says (and how to finish them)."""
        why = self.failed[0][1] if self.failed else ""
        return (f"{len(self.failed)} files not uploaded to {self.store}: {why}; they stay "
                f"in this worker's folder: `mirror push {site_file} --db DSN` (or this "
                "worker's next `mirror run --db`) uploads them")

    @property
    def complete(self) -> bool:
        return not self.failed


class SharedFiles:
    """The worker's closed WARC files: recorded (size, SHA-256) and uploaded in a thread
    of their own, with its own connection to the manifest; the crawl only tells it names
    (never blocking). Owner of the `files` rows of this worker."""

    def __init__(self, dsn: str, owner: str, warc_dir: Path, store_url: str | None,
                 retry_for: float = 0.0) -> None:
        self.dsn, self.owner, self.warc_dir, self.store_url = dsn, owner, warc_dir, store_url
        self.retry_for = retry_for  # seconds of retries after the crawl ([archive] store_retry)
        self.result = FilesResult(store_url)
        self._pending: dict[str, str] = {}  # name -> why its upload failed (to try again)
        self._backoff: Backoff | None = None  # the retries during the crawl
        self._retry_at = float("inf")
        self._index_failed: str | None = None
        self._store: ObjectStore | None = None
        self._manifest: Manifest | None = None
        self._queue: queue.Queue[str] = queue.Queue(QUEUE_SIZE)
        self._overflow: list[str] = []  # names that did not fit: settled at the end
        self._lock = threading.Lock()
        self._ending = threading.Event()
        self._index: Path | None = None
        self._awaited = (0, 0.0)  # (run, seconds): whose uploads the index waits for
        self._thread = threading.Thread(target=self._work, name="warc-files", daemon=True)
        self._thread.start()

    def closed(self, name: str) -> None:
        """The writer closed `name` (or start-up found it closed and not uploaded)."""
        try:
            self._queue.put_nowait(name)
        except queue.Full:
            with self._lock:
                self._overflow.append(name)

    def end(self, index: Path | None = None, run_id: int = 0, alive_within: float = 0.0
            ) -> None:
        """The worker is done: settle what is left (and upload `index`, when given: the
        worker that completed the run `run_id` wrote it, once the other workers heard of
        within `alive_within` seconds have uploaded their files of the run), then stop."""
        self._index = index
        self._awaited = (run_id, alive_within)
        self._ending.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        """Wait for the thread (after end())."""
        self._thread.join()

    def _work(self) -> None:
        try:
            while not self._ending.is_set() or not self._queue.empty():
                try:
                    name = self._queue.get(timeout=POLL)
                except queue.Empty:
                    if time.monotonic() >= self._retry_at:
                        self._try_pending()
                    continue
                self._settle(name)
                if self._pending and self._retry_at == float("inf"):
                    self._schedule()  # the first failure of an outage
            with self._lock:
                rest, self._overflow = self._overflow, []
            for name in rest:
                self._settle(name)
            self._last_tries()
        finally:
            if self._manifest is not None:
                self._manifest.close()

    def _try_pending(self) -> None:
        """The crawl goes on: the failed uploads tried again (a wait of the backoff over)."""
        names, self._pending = list(self._pending), {}
        log.info("store %s: trying %d uploads again", self.store_url, len(names))
        for name in names:
            self._settle(name)
        self._schedule()

    def _schedule(self) -> None:
        """When the pending uploads are tried again during the crawl (never: none)."""
        now = time.monotonic()
        if not self._pending:
            self._backoff, self._retry_at = None, float("inf")
            return
        if self._backoff is None:  # no budget during the crawl: the crawl ends by itself
            self._backoff = Backoff(float("inf"), now)
        self._retry_at = now + (self._backoff.next_wait(now) or 0.0)

    def _last_tries(self) -> None:
        """After the crawl: what is pending (and the index) tried again with backoff for
        up to `retry_for` seconds; what is still pending is `result.failed`."""
        backoff = Backoff(self.retry_for, time.monotonic())
        index = self._index if self.store_url else None
        while True:
            if index is not None and not self._pending and not self.result.failed:
                self._await_others()  # the index goes after every file it names
                index = None if self._upload_index(index) else index
            if not self._pending and (index is None or self.result.failed):
                break
            wait = backoff.next_wait(time.monotonic())
            if wait is None:
                break
            time.sleep(wait)
            log.info("store %s: trying the uploads again (retry %d)", self.store_url,
                     backoff.tries)
            names, self._pending = list(self._pending), {}
            for name in names:
                self._settle(name)
        self.result.failed += list(self._pending.items())
        if index is not None and self._index is not None:
            self.result.failed.append((self._index.name, self._index_failed or "not tried"))
        if self.result.failed:
            log.warning("store %s: %d uploads still pending after %d retries; `mirror "
                        "push SITE --db DSN` uploads them", self.store_url,
                        len(self.result.failed), backoff.tries)

    def _settle(self, name: str) -> None:
        """One closed file: closed in the manifest, then uploaded and marked so; deleted
        when the manifest declared it lost. A failure is kept for the end (the next start
        of this worker tries again)."""
        path = self.warc_dir / name
        try:
            if self._manifest is None:
                self._manifest = Manifest(self.dsn)
            m = self._manifest
            state = m.filemarks.file_state(name)
            if state == "open" and not m.filemarks.close_file(name, path.stat().st_size,
                                                    file_digest(path, "sha256")):
                state = m.filemarks.file_state(name)
            if state == "lost":
                self._delete(name, path)
                return
            if self.store_url is None or state == "uploaded":
                return
            if self._store is None:
                self._store = open_store(self.store_url)
            crashpoints.reached("upload:before", "file")
            self._store.upload(path, WARC_PREFIX + name)
            log.info("uploaded %s to %s", name, self.store_url)  # before the mark the
            crashpoints.reached("upload:before-mark", "file")  # index waits for
            if m.filemarks.mark_uploaded(name):
                self.result.uploaded.append(name)
            elif m.filemarks.file_state(name) == "lost":  # declared lost while it was uploaded
                self._delete(name, path)
        except (StoreError, OSError) as exc:
            why = getattr(exc, "reason", None) or str(exc)
            if isinstance(exc, StoreRefused):  # a conflict, a refusal: not by itself
                self.result.failed.append((name, why))
            else:
                self._pending[name] = why
            log.warning("%s not uploaded to %s: %s", name, self.store_url, why)
        except ManifestError as exc:  # the database is gone: the run is stopping
            log.warning("%s not settled (%s): this worker's next start settles it", name,
                        str(exc).partition(": ")[2][:120] or type(exc).__name__)
            self.result.failed.append((name, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a file's upload never stops the crawl
            log.exception("settling %s failed", name)
            self.result.failed.append((name, f"{type(exc).__name__}: {exc}"))

    def _delete(self, name: str, path: Path) -> None:
        if self.store_url is not None:
            if self._store is None:
                self._store = open_store(self.store_url)
            self._store.delete(WARC_PREFIX + name)
        path.unlink(missing_ok=True)
        self.result.deleted.append(name)
        log.warning("deleted %s: the manifest declared it lost", name)

    def _await_others(self) -> None:
        """Until the run's files of the other workers still heard of are uploaded (the
        index goes after every file it names; a worker silent for longer is not waited
        for: `mirror run --db --join` of it, or --forget-worker, settles its files)."""
        run_id, alive_within = self._awaited
        if self._manifest is None:
            self._manifest = Manifest(self.dsn)
        waited = False
        while names := self._manifest.filemarks.uploads_awaited(run_id, self.owner,
                                                                  alive_within):
            if not waited:
                log.info("the index waits for %d WARC files of other workers (%s)",
                         len(names), ", ".join(names[:3]))
                waited = True
            time.sleep(POLL)

    def _upload_index(self, index: Path) -> bool:
        """Whether index.cdxj was uploaded (why not in `_index_failed`)."""
        try:
            if self._store is None:
                self._store = open_store(self.store_url or "")
            self._store.put_file(index, INDEX_KEY)
            self.result.index = True
            log.info("uploaded the index to %s", self.store_url)
            return True
        except (StoreError, OSError) as exc:
            self._index_failed = getattr(exc, "reason", None) or str(exc)
            log.warning("%s not uploaded to %s: %s", index.name, self.store_url,
                        self._index_failed)
            return False
