"""A run on one machine: the manifest in the archive folder, the run resumed or begun by
Startup (repairing what a crash left), its index written at the end, and with [archive]
store, its closed files uploaded during the run and the last push after it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mirror import crashpoints
from mirror.config import SiteConfig
from mirror.crawl.frontier import Frontier
from mirror.crawl.runmode import Begun, Halt, RunParts, StopRequested, write_index
from mirror.crawl.startup import Startup, now_iso
from mirror.layout import ArchiveLayout
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import HostLease

if TYPE_CHECKING:
    from mirror.crawl.sharedfiles import FilesResult
    from mirror.crawl.uploads import Uploader
    from mirror.store.sync import PushResult

log = logging.getLogger(__name__)


def check_store(url: str) -> None:
    """A store that refuses (no such bucket, the credentials refused) stops the run before
    it begins: StoreRefused, naming the bucket. One that cannot be reached now does not:
    its uploads are tried again (mirror.crawl.uploads)."""
    from mirror.store.objstore import StoreError, StoreRefused, open_store

    try:
        open_store(url).check()
    except StoreRefused:
        raise
    except StoreError as exc:
        log.warning("%s; the run goes on and its uploads are tried again", exc)


class LocalRun:
    """This process alone on the archive (under its lock): the run mode of `mirror run`."""

    learns = True
    #: no host leases on one machine
    robots_lease: Callable[[str], HostLease | None] | None = None

    def __init__(self, *, new_run: bool = False) -> None:
        self.new_run = new_run  # --new-run: an unfinished run is abandoned, a new one begun
        self.uploader: Uploader | None = None  # [archive] store: started with the run
        self._manifest: Manifest | None = None
        self._parts: RunParts | None = None
        self._run_id = 0

    def open(self, cfg: SiteConfig) -> Manifest:
        layout = ArchiveLayout(cfg.site.output_dir)
        self._manifest = Manifest(layout.manifest, durable=cfg.archive.durability == "power")
        return self._manifest

    async def begin(self, parts: RunParts) -> Begun:
        """Choose and repair the run, then open its WARC writer and frontier."""
        self._parts = parts
        cfg, m = parts.cfg, parts.manifest
        if cfg.archive.store:  # before anything is fetched or begun
            await asyncio.to_thread(check_store, cfg.archive.store)
        startup = Startup(cfg, m, parts.new_store, parts.discover, parts.stored,
                          force_new_run=self.new_run)
        self._run_id, resumed = startup.begin()
        self._start_uploads(cfg)
        store = parts.new_store(
            writer=parts.writer(cfg.site.name, self._run_id), history=startup.history,
            closed_file=self.uploader.closed if self.uploader is not None else None)
        frontier = Frontier(
            m,
            per_host=cfg.crawl.per_host,
            delay=cfg.crawl.delay,
            max_pages=cfg.scope.max_pages,
            pages_done=m.counts.done_pages(self._run_id),
            on_dry=store.commit_pending,  # the group's new URLs are not leasable yet
        )
        return Begun(self._run_id, resumed, store, frontier)

    def _start_uploads(self, cfg: SiteConfig) -> None:
        """[archive] store: a thread uploads each WARC file the writer closes (loaded only
        then: a run without a store imports and starts nothing of it)."""
        if not cfg.archive.store:
            return
        from mirror.crawl.uploads import Uploader

        self.uploader = Uploader(cfg.archive.store, cfg.site.output_dir,
                                 cfg.archive.store_retry)

    def lease_of(self, item: UrlItem) -> HostLease | None:
        return None  # no host leases on one machine

    def heartbeat(self) -> str | None:
        return None

    def end(self) -> bool:
        """The index, from every capture of the manifest."""
        assert self._parts is not None
        path = self._parts.layout.index
        try:
            write_index(self._parts.manifest, path, self._parts.halt.check_stop)
        except StopRequested:
            log.warning("%s not written: the run was told to stop (the next `mirror run` "
                        "writes it, as does `mirror index`)", path)
            return False
        crashpoints.reached("run:before-finish", "run")
        return True

    async def finish(self, code: int, state: str) -> PushResult | None:
        assert self._parts is not None
        self._parts.manifest.runs.finish(self._run_id, now_iso(), state, code)
        return await self._last_push(self._parts.halt, self._parts.cfg.archive.store)

    async def _last_push(self, halt: Halt, store: str) -> PushResult | None:
        """The run's last push (every closed file, the index, the snapshot), in its thread;
        not waited for once the run is told to stop (the next run or `mirror push` does
        it)."""
        if self.uploader is None:
            return None
        self.uploader.end()
        while self.uploader.running:
            if halt.interrupted and not halt.fatal:
                log.warning("not waiting for the uploads to %s: the next run or `mirror "
                            "push` does them", store)
                self.uploader.abandon()
                return None
            await asyncio.sleep(0.05)
        return self.uploader.result

    def files(self) -> FilesResult | None:
        return None

    def close(self) -> None:
        if self.uploader is not None:
            self.uploader.abandon()  # no push after the run (it is done, or not wanted)
