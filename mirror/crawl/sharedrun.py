"""One run shared by several workers (`mirror run --db postgresql://...`): the worker's
identity, its start (join the run, end its own leases, repair its own WARC files), its
frontier of host leases, and its end (the worker that finds the run over finishes it and
writes the index of every worker's captures). Its WARC files: sharedfiles."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mirror import crashpoints
from mirror.archive import workerfolder
from mirror.config import SiteConfig
from mirror.crawl.localrun import check_store
from mirror.crawl.runmode import Begun, RunParts, write_index
from mirror.crawl.sharedfiles import FilesResult, SharedFiles, repair_files
from mirror.crawl.sharedfrontier import SharedFrontier, default_ttl
from mirror.crawl.startup import now_iso, seeds
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import HostLease, Via
from mirror.upkeep import recovery

if TYPE_CHECKING:
    from mirror.store.sync import PushResult

log = logging.getLogger(__name__)

#: what a worker id may be made of (it is part of WARC file names)
WORKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def default_worker_id(output_dir: Path) -> str:
    """This machine's name and a digest of the folder: the same after a restart, and
    different for two folders (two workers) on one machine."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()) or "worker"
    folder = hashlib.sha1(str(output_dir.resolve()).encode()).hexdigest()[:6]
    return f"{host[:48]}-{folder}"


def check_worker_id(owner: str) -> str | None:
    """Why `owner` cannot be a worker id, or None."""
    if WORKER_ID.fullmatch(owner):
        return None
    return (f"worker id {owner!r}: expected 1-63 letters, digits, '_', '.' or '-', "
            "beginning with a letter or digit (it is part of the WARC file names)")


class SharedRun:
    """How this process takes part in a shared run: the run mode of `mirror run --db`."""

    learns = False  # a process's pattern figures would not be the manifest's

    def __init__(self, dsn: str, owner: str, join_only: bool = False,
                 ttl: float | None = None, forget: tuple[str, ...] = ()) -> None:
        self.dsn = dsn  # postgresql://... : the manifest every worker shares
        self.owner = owner  # this worker's id: unique among the workers, kept on restart
        self.join_only = join_only  # only join an unfinished run; never start one
        self.ttl = ttl  # seconds a host lease lasts (None: sharedfrontier.default_ttl)
        self.forget = forget  # workers gone with their disks: their files are lost
        self.completed = False  # this worker found the run over (and finished it)
        self.unsettled: dict[str, list[str]] = {}  # ... and others' files not uploaded
        self.robots_lease: Callable[[str], HostLease | None] | None = self._site_lease
        self.frontier: SharedFrontier | None = None
        self._files: SharedFiles | None = None  # this worker's WARC files and uploads
        self._parts: RunParts | None = None
        self._run_id = 0

    def open(self, cfg: SiteConfig) -> Manifest:
        return Manifest(self.dsn)

    async def begin(self, parts: RunParts) -> Begun | None:
        """Forget the workers named gone, join the run (or start it), end this worker's own
        leases, repair its own WARC files and queue the closed ones for the store, then
        open its writer (its id in the file names) and a frontier of host leases. None when
        told to join only and no run is unfinished (its files settled first)."""
        self._parts = parts
        m, cfg = parts.manifest, parts.cfg
        if cfg.archive.store:  # a missing bucket, refused credentials: before anything
            await asyncio.to_thread(check_store, cfg.archive.store)
        m.sharedrun.set_host_slots(1 if cfg.crawl.delay > 0 else cfg.crawl.per_host)
        for gone in self.forget:
            lost = m.filemarks.mark_lost(gone)
            log.warning("forgot worker %s: %d of its WARC files lost, their captures will "
                        "be fetched again", gone, len(lost))
        joined = m.sharedrun.join_or_start_run(now_iso(), cfg.digest(), seeds(cfg),
                                     may_start=not self.join_only)
        last = m.runs.last()
        self._run_id = run_id = joined.run_id if joined else (last.id if last else 0)
        m.sharedrun.register_worker(self.owner, run_id)
        workerfolder.mark(cfg.site.output_dir, self.owner)
        back = m.sharedrun.recover(self.owner, cfg.crawl.delay)
        recovery.remove_temporaries(cfg.site.output_dir)
        files = self._files = SharedFiles(self.dsn, self.owner, parts.layout.warc,
                                          cfg.archive.store or None, cfg.archive.store_retry)
        for name in repair_files(m, parts.layout.warc, run_id):
            files.closed(name)
        if joined is None:
            log.warning("no unfinished run to join (--join)")
            await self._files_done(None)
            return None
        log.info("%s run %d as worker %s (%d URLs back to pending)",
                 "started" if joined.started else "joined", run_id, self.owner, back)
        if joined.started:
            crashpoints.reached("run:started")
        store = parts.new_store(
            writer=parts.writer(f"{cfg.site.name}-{self.owner}", run_id),
            history=m.captures.any_before(run_id), group_size=1, lease_of=self.lease_of,
            opened_file=functools.partial(m.filemarks.open_file, owner=self.owner),
            closed_file=files.closed)
        self.frontier = SharedFrontier(
            m, run_id, self.owner,
            max_hosts=cfg.crawl.workers,
            delay=cfg.crawl.delay,
            ttl=self.ttl or default_ttl(cfg.crawl.timeout),
            fetch_timeout=cfg.crawl.timeout,
            max_pages=cfg.scope.max_pages,
            pages_done=m.counts.done_pages(run_id),
            on_dry=store.commit_pending,
        )
        return Begun(run_id, not joined.started, store, self.frontier)

    def lease_of(self, item: UrlItem) -> HostLease | None:
        """The host lease `item` was taken under, which fences what is written of it;
        robots.txt is fetched under its host's lease."""
        if self.frontier is None:
            return None
        if item.via == Via.ROBOTS:
            return self.frontier.lease_for(item.site)
        return self.frontier.lease_of(item)

    def _site_lease(self, site: str) -> HostLease | None:
        return self.frontier.lease_for(site) if self.frontier is not None else None

    def heartbeat(self) -> str | None:
        assert self._parts is not None
        crashpoints.reached("heartbeat:before")
        if self._parts.manifest.sharedrun.heartbeat(self.owner):
            return None
        return (f"worker {self.owner} was forgotten by another worker (--forget-worker): "
                "its files are lost")

    def end(self) -> bool:
        return True  # the worker that completes the run writes the index (finish)

    async def finish(self, code: int, state: str) -> PushResult | None:
        await self._files_done(self._complete(code, state))
        return None

    def _complete(self, code: int, state: str) -> Path | None:
        """When the run is over (no URL pending or leased, by anyone) this worker finishes
        it and writes the index of every worker's captures (returned, to upload); else the
        run goes on with the others."""
        assert self._parts is not None and self.frontier is not None
        m, halt = self._parts.manifest, self._parts.halt
        if halt.fatal or halt.interrupted or m.sharedrun.unfinished(
                self._run_id, pages=not self.frontier.limit_reached):
            return None
        m.runs.finish(self._run_id, now_iso(), state, code)
        self.completed = True
        self.unsettled = m.filemarks.unsettled_files(self.owner, self.frontier.ttl)
        for worker, names in self.unsettled.items():
            log.warning("worker %s is silent and has %d WARC files with captures of "
                        "this run not uploaded (%s): start it again with --join, or if it "
                        "is gone for good, --forget-worker %s to fetch them again", worker,
                        len(names), ", ".join(names[:3]), worker)
        log.info("run %d is complete", self._run_id)
        write_index(m, self._parts.layout.index, halt.check_stop)
        return self._parts.layout.index

    async def _files_done(self, index_path: Path | None) -> None:
        """Wait (without blocking the loop) for the file thread to settle and upload this
        worker's closed files; not when the worker was told to stop (its next start does)."""
        assert self._files is not None and self._parts is not None
        halt = self._parts.halt
        self._files.end(index_path, self._run_id,
                        self.frontier.ttl if self.frontier is not None else 0.0)
        while self._files.running:
            if halt.interrupted and not halt.fatal:
                log.warning("not waiting for the uploads: this worker's next `mirror run "
                            "--db` does them")
                return
            await asyncio.sleep(0.05)

    def files(self) -> FilesResult | None:
        return self._files.result if self._files is not None else None

    def close(self) -> None:
        pass
