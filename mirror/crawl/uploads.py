"""A run's uploads to its archive's object store ([archive] store): a worker thread.

The crawl only tells it the names of WARC files it closed; the thread pushes (storesync:
the closed files, then a manifest snapshot) while the crawl goes on, and at the end of the
run pushes once more, with the index. The event loop never waits on the store: telling
is a put into a bounded queue that never blocks (a name that does not fit is uploaded at
the end anyway). A push that fails is tried again with backoff and jitter
(mirror.store.retry): during the run when its wait is over or the next file closes, and
after the crawl for up to `[archive] store_retry` seconds; a run that ends with uploads
still pending exits with ExitCode.UPLOAD_PENDING, and the next run or `mirror push`
uploads them. Nothing here deletes or writes a file of the archive folder but the
snapshot's temporary copy and the folder's note of its store: every file stays on disk.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from pathlib import Path

from mirror.store.objstore import ObjectStore, StoreError, open_store
from mirror.store.retry import Backoff
from mirror.store.sync import PushResult, push

log = logging.getLogger(__name__)

#: closed files waiting for the thread; more are uploaded by the push at the end
QUEUE_SIZE = 64
#: how often an idle thread looks whether the run has ended (seconds)
POLL = 0.1


class Uploader:
    """Pushes the archive at `root` to the store at `url` during and after a run; after
    the crawl, a failed push is tried again for up to `retry_for` seconds."""

    def __init__(self, url: str, root: Path, retry_for: float = 300.0) -> None:
        self.url, self.root, self.retry_for = url, root, retry_for
        self.store: ObjectStore | None = None
        self.down: str | None = None  # why the last push failed (None: it did not)
        self.result: PushResult | None = None  # the last push's, once it is done
        self._sent: list[str] = []  # files the pushes during the run uploaded
        self._backoff: Backoff | None = None  # the retries of the outage under way
        self._retry_at = math.inf  # when the thread tries again during the run
        self._queue: queue.Queue[str] = queue.Queue(QUEUE_SIZE)
        self._ending = threading.Event()  # the run is over: the last push, then stop
        self._abandoned = threading.Event()  # the run is over without a last push
        self._thread = threading.Thread(target=self._work, name="store-uploads", daemon=True)
        self._thread.start()

    def closed(self, name: str) -> None:
        """A WARC file was closed (the crawl's thread: never blocks)."""
        try:
            self._queue.put_nowait(name)
        except queue.Full:
            pass  # the push at the end uploads it

    def end(self) -> None:
        """The run is over: the last push (closed files, index, snapshot) begins."""
        self._ending.set()

    def abandon(self) -> None:
        """The run is over without its last push (it was stopped, or failed)."""
        self._abandoned.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def finish(self) -> PushResult:
        """end(), then wait for the last push."""
        self.end()
        self._thread.join()
        assert self.result is not None
        return self.result

    def _work(self) -> None:
        while not (self._ending.is_set() or self._abandoned.is_set()):
            try:
                self._queue.get(timeout=POLL)
            except queue.Empty:
                if time.monotonic() < self._retry_at:
                    continue
            while not self._queue.empty():  # several closed meanwhile: one push for all
                self._queue.get_nowait()
            if not self._abandoned.is_set():
                self._push(final=False)
        if not self._abandoned.is_set():
            self.result = self._last_push()

    def _last_push(self) -> PushResult:
        """The push at the end, tried again with backoff for up to `retry_for` seconds
        while it fails for a reason that may pass (the store unreachable)."""
        earlier = list(self._sent)  # the run's uploads, not only the last push's
        backoff = Backoff(self.retry_for, time.monotonic())
        result = self._push(final=True)
        while result.error is not None and not result.lasting:
            wait = backoff.next_wait(time.monotonic())
            if wait is None or self._abandoned.wait(wait):
                break
            log.info("store %s: trying the uploads again (retry %d)", self.url, backoff.tries)
            result = self._push(final=True)
        if result.error is not None or result.failed:
            log.warning("store %s: uploads still pending after %d retries; `mirror push` "
                        "uploads them", self.url, backoff.tries)
        result.uploaded = list(self._sent)  # the run's uploads, not only the last push's
        result.present = [n for n in result.present if n not in set(earlier)]
        return result

    def _push(self, *, final: bool) -> PushResult:
        try:
            if self.store is None:
                self.store = open_store(self.url)
            result = push(self.root, self.store, index_too=final, delete_unnamed=final)
        except StoreError as exc:
            result = PushResult(self.url)
            result.stopped(exc)
        except Exception as exc:  # noqa: BLE001 - an upload never stops the crawl
            log.exception("uploading to %s failed", self.url)
            result = PushResult(self.url, error=f"{type(exc).__name__}: {exc}", lasting=True)
        self._sent += result.uploaded
        self._note(result)
        return result

    def _note(self, result: PushResult) -> None:
        """Remember how the push went: when to try again during the run."""
        if result.error is None and not result.failed:
            self.down, self._backoff, self._retry_at = None, None, math.inf
            return
        now = time.monotonic()
        self.down = result.error or "some files were not uploaded"
        if result.error is None or result.lasting:  # a conflict, a refusal: not by itself
            self._retry_at = math.inf
        else:
            if self._backoff is None:  # no budget during the run: it ends by itself
                self._backoff = Backoff(math.inf, now)
            self._retry_at = now + (self._backoff.next_wait(now) or 0.0)
        log.warning("store %s: %s", self.url, self.down)
