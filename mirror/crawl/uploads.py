"""A run's uploads to its archive's object store ([archive] store): a worker thread.

The crawl only tells it the names of WARC files it closed; the thread pushes (storesync:
the closed files, then a manifest snapshot) while the crawl goes on, and at the end of the
run pushes once more, with the index. The event loop never waits on the store: telling
is a put into a bounded queue that never blocks (a name that does not fit is uploaded at
the end anyway). A store that cannot be reached is tried once more at the end, then the
run ends all the same, saying what was not uploaded; the next run or `mirror push`
uploads it. Nothing here writes to the archive folder but the snapshot's temporary copy
and the folder's note of its store: the durability order of the crawl is untouched.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

from mirror.store.objstore import ObjectStore, StoreError, open_store
from mirror.store.sync import PushResult, push

log = logging.getLogger(__name__)

#: closed files waiting for the thread; more are uploaded by the push at the end
QUEUE_SIZE = 64
#: how often an idle thread looks whether the run has ended (seconds)
POLL = 0.1


class Uploader:
    """Pushes the archive at `root` to the store at `url` during and after a run."""

    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root
        self.store: ObjectStore | None = None
        self.down: str | None = None  # why the store is not tried again until the end
        self.result: PushResult | None = None  # the last push's, once it is done
        self._sent: list[str] = []  # files the pushes during the run uploaded
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
                continue
            while not self._queue.empty():  # several closed meanwhile: one push for all
                self._queue.get_nowait()
            if self.down is None and not self._abandoned.is_set():
                self._push(final=False)
        if not self._abandoned.is_set():
            earlier = list(self._sent)  # the run's uploads, not only the last push's
            result = self._push(final=True)  # also when the store was down: once more
            result.uploaded = earlier + result.uploaded
            result.present = [n for n in result.present if n not in set(earlier)]
            self.result = result

    def _push(self, *, final: bool) -> PushResult:
        try:
            if self.store is None:
                self.store = open_store(self.url)
            result = push(self.root, self.store, index_too=final, delete_unnamed=final)
        except StoreError as exc:
            result = PushResult(self.url, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - an upload never stops the crawl
            log.exception("uploading to %s failed", self.url)
            result = PushResult(self.url, error=f"{type(exc).__name__}: {exc}")
        self._sent += result.uploaded
        if result.error is not None or result.failed:
            self.down = result.error
            log.warning("store %s: %s; %s", self.url, result.error or "some files were not "
                        "uploaded", "`mirror push` uploads them later" if final else
                        "uploads are tried again at the end of the run")
        return result
