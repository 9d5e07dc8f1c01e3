"""A run's start: resume the unfinished run or begin the next one, after repairing what a
crash left (torn tails cut, lost captures re-queued, unrecorded captures adopted exactly)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from mirror import crashpoints
from mirror.archive.warcwriter import NOT_MODIFIED, OPEN_SUFFIX, Exchange
from mirror.config import SiteConfig
from mirror.crawl import history
from mirror.crawl.parsehelper import Page
from mirror.crawl.politeness import http_error
from mirror.crawl.scope import PAGE
from mirror.crawl.store import CaptureStore
from mirror.manifest.writer import Manifest, ManifestError, NewUrl, UrlItem
from mirror.model import UNFINISHED, Discovered, LinkKind, RunState, Via
from mirror.upkeep import recovery
from mirror.upkeep.recovery import file_size
from mirror.web.urls import normalize, site_key

log = logging.getLogger(__name__)

#: link discovery in this process, for captures adopted before the helpers start
Discover = Callable[[UrlItem, Page], Discovered]
#: told of every capture adopted: (item, exchange, error, URLs found)
Stored = Callable[[UrlItem, Exchange, str | None, list[NewUrl]], None]
#: a CaptureStore with the crawler's parts; its keywords add the run's (writer, history...)
NewStore = Callable[..., CaptureStore]


class RunSession:
    """This process's share of a run, in the manifest: when it took the run up and when it
    was last seen working (refreshed about once a second), so that a run killed and resumed
    reports the time of all its processes."""

    def __init__(self, manifest: Manifest, run_id: int) -> None:
        self.manifest = manifest
        self.id = manifest.runs.begin_session(run_id, time.time())
        self._alive = time.monotonic()

    def beat(self, force: bool = False) -> bool:
        """Whether it refreshed the session now (about once a second)."""
        now = time.monotonic()
        if force or now - self._alive >= 1.0:
            self._alive = now
            self.manifest.runs.touch_session(self.id, time.time())
            return True
        return False


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Startup:
    """Chooses the run (the unfinished one, or a new one seeded with the start URLs) and
    repairs the archive before the first fetch. Adoption commits each unrecorded capture
    group through the same CaptureStore.commit, with the same row, links and outcome, as
    the process that wrote it would have (a store made by `new_store`, without a writer:
    adoption writes nothing)."""

    def __init__(self, cfg: SiteConfig, manifest: Manifest, new_store: NewStore,
                 discover: Discover, stored: Stored, *, force_new_run: bool = False) -> None:
        self.cfg = cfg
        self.manifest = manifest
        self.new_store = new_store
        self.discover = discover
        self.stored = stored
        self.force_new_run = force_new_run
        self.run_id = 0
        self.history = False  # the run recovered last has captures of earlier runs
        self.check_whole = True  # open WARC files read whole (begin: unless only killed)

    def begin(self) -> tuple[int, bool]:
        """(the run to work on, whether it is resumed)."""
        last = self.manifest.runs.last()
        resumed = last is not None and last.state in UNFINISHED
        # a machine crash may have damaged what was committed; a killed process cannot
        self.check_whole = last is None or recovery.rebooted_since(
            self.manifest.runs.last_alive(last.id))
        died = last is not None and last.state == RunState.RUNNING
        if died and self.check_whole:  # the last run died with its machine: check first
            damage = self.manifest.quick_check()
            if damage != "ok":
                raise ManifestError(
                    f"{self.manifest.path}: damaged after an unclean stop ({damage}); "
                    "refusing to resume. Move the archive folder aside, or restore "
                    "manifest.sqlite3 from a backup and run again."
                )
        if last is not None and resumed and self.force_new_run:
            self.recover(last.id)  # its open file still belongs to it
            self.manifest.runs.abandon(last.id, now_iso())
            log.warning("run %d left unfinished (abandoned); starting a new run", last.id)
            resumed = False
        if last is not None and resumed:
            back = self.manifest.runs.resume(last.id)
            log.info("resuming run %d (%d leased URLs back to pending)", last.id, back)
            run_id = last.id
        else:
            run_id = self.manifest.runs.start(now_iso(), self.cfg.digest(), seeds(self.cfg))
            crashpoints.reached("run:started")
        self.recover(run_id)
        return run_id, resumed

    def recover(self, run_id: int) -> None:
        """Repair what a crash left, adopting captures into `run_id` (the run that wrote
        them): torn tails cut, captures the manifest lost (a file cut short by power loss)
        re-queued, captures it never recorded adopted, .open files closed."""
        self.run_id = run_id
        self.history = self.manifest.captures.any_before(run_id)
        store = self.new_store(history=self.history)
        warc_dir = store.warc_dir
        recovery.remove_temporaries(self.cfg.site.output_dir)
        open_paths = recovery.open_files(warc_dir)
        ends = self.manifest.captures.committed_ends()
        for path in open_paths:  # after a kill, what the manifest recorded is whole
            whole_to = 0 if self.check_whole else ends.get(path.name[: -len(OPEN_SUFFIX)], 0)
            recovery.cut_torn_tail(path, whole_to)
        for name, end in ends.items():
            size = file_size(warc_dir / name) or file_size(warc_dir / (name + OPEN_SUFFIX))
            roll_back_short(self.manifest, run_id, name, size, end)
        for path in open_paths:
            self._adopt_tail(store, path, ends.get(path.name[: -len(OPEN_SUFFIX)], 0))

    def _adopt_tail(self, store: CaptureStore, path: Path, committed_end: int) -> None:
        """Commit the complete capture groups past the last commit, each exactly as the
        normal path would have; cut the file after the last one adopted, then close it."""
        final = path.name[: -len(OPEN_SUFFIX)]
        size = file_size(path)
        found, good_end = recovery.scan_groups(path, min(committed_end, size), final)
        adopted = 0
        try:
            for f in found:
                if not self._adopt(store, f):  # then neither it nor what follows is kept
                    good_end = f.location.response.offset
                    break
                adopted += 1
        finally:
            for f in found:
                f.exchange.body.close()
        if good_end < size:
            log.warning("cut %s back to its last complete capture (%d -> %d bytes)",
                        final, size, good_end)
            recovery.truncate(path, good_end)
        crashpoints.reached("recover:before-close", "file")
        if good_end == 0:
            path.unlink()
            return
        os.replace(path, path.with_name(final))
        log.warning("closed %s left open by an earlier run (%d captures adopted)",
                    final, adopted)

    def _adopt(self, store: CaptureStore, f: recovery.Found) -> bool:
        """Commit a capture group the manifest never recorded, with the row, links and
        outcome the normal path would have committed. False when that cannot be done
        exactly (its URL is not waiting in this run, or its revisit's original is unknown)."""
        ex, revisit = f.exchange, f.revisit
        item = self.manifest.urls.item_for(self.run_id, ex.url)
        captures = self.manifest.captures
        original = (captures.original_by_record(revisit.refers_to, revisit.payload_digest)
                    if item is not None and revisit is not None else None)
        if f.rendered:  # its links and text came from the browser: fetched, rendered again
            log.warning("not adopting the page %s loaded in a browser at %s@%d; it will be "
                        "fetched and rendered again", ex.url, f.location.response.filename,
                        f.location.response.offset)
            return False
        if item is None or (revisit is not None and original is None):
            log.warning("cannot adopt the capture of %s at %s@%d; it will be fetched again",
                        ex.url, f.location.response.filename, f.location.response.offset)
            return False
        if crashpoints.hook is not None:
            crashpoints.label = "adopted " + history.capture_kind(ex, revisit, original,
                                                                  item.via, self.run_id)
        robots = item.via == Via.ROBOTS  # stored out of band: no previous capture, no error
        prev = None if robots else store.previous(self.run_id, item)
        payload = original if revisit is not None and revisit.profile != NOT_MODIFIED else None
        links = self.discover(item, store.page(ex, prev, payload, item))
        error = None if robots else http_error(ex.status, ex.truncated)
        store.commit(self.run_id, item, ex, f.location, error, revisit, original, prev,
                          links)
        self.stored(item, ex, error, links[1])
        return True


def seeds(cfg: SiteConfig) -> list[NewUrl]:
    """The run's start URLs, as the manifest queues them."""
    out = []
    for raw in cfg.site.start_urls:
        url = normalize(raw, cfg.scope.ignore_query)
        out.append(NewUrl(url, site_key(url), 0, cfg.crawl.max_redirects, PAGE,
                          Via.START, LinkKind.LINK))
    return out


def roll_back_short(manifest: Manifest, run_id: int, name: str, size: int,
                    end: int) -> bool:
    """A WARC file cut short (a power loss) below the end of its committed records:
    the captures past `size` are forgotten, their URLs fetched again. Whether it was."""
    if size >= end:
        return False
    lost = manifest.captures.rollback_past(run_id, name, size)
    log.warning("%s is shorter than the manifest says (%d < %d): %d captures will be "
                "fetched again", name, size, end, len(lost))
    return True
