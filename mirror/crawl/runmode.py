"""How this process takes part in a run, chosen once where the crawl is built: alone on
one machine (localrun.LocalRun) or as one worker of a run shared by several
(sharedrun.SharedRun). A run mode opens the manifest, begins the run (its id, a CaptureStore
with the one WARC writer, a frontier), says under which host lease a URL is written, checks
on each heartbeat that the worker still belongs to the run, and finishes it (index, run
state, uploads). The crawler holds one and never asks which."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from mirror.archive import index, warcwriter
from mirror.archive.warcwriter import WarcWriter
from mirror.config import SiteConfig
from mirror.crawl.frontier import Frontier
from mirror.crawl.sharedfrontier import SharedFrontier
from mirror.crawl.startup import Discover, NewStore, Stored
from mirror.crawl.store import CaptureStore
from mirror.errors import Interrupted
from mirror.layout import ArchiveLayout
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import HostLease

if TYPE_CHECKING:
    from mirror.crawl.sharedfiles import FilesResult
    from mirror.store.sync import PushResult

log = logging.getLogger(__name__)


class StopRequested(Interrupted):
    """A signal asked the run to stop during a long synchronous step."""


class Halt(Protocol):
    """What the crawler tells its run mode about a stop: asked for, or forced by an error."""

    @property
    def interrupted(self) -> bool: ...

    @property
    def fatal(self) -> str | None: ...

    def check_stop(self) -> bool:
        """False, or StopRequested when a signal asked to stop (checked in long steps)."""
        ...


@dataclass(frozen=True)
class RunParts:
    """What the crawler hands its run mode to begin the run with."""

    cfg: SiteConfig
    manifest: Manifest
    layout: ArchiveLayout
    new_store: NewStore  # a CaptureStore with the crawler's parts (the mode adds its own)
    discover: Discover  # link discovery in this process (captures adopted at start-up)
    stored: Stored  # told of each capture adopted at start-up
    halt: Halt
    opener: Callable[[Path], IO[bytes]] | None = None  # fault injection in tests (ENOSPC)
    clock: Callable[[], datetime] = warcwriter.utc_now  # WARC-Date of each record

    def writer(self, name: str, run_id: int) -> WarcWriter:
        """The run's WARC writer (files named after `name`): the one place it is built."""
        cfg = self.cfg
        return WarcWriter(
            self.layout.warc,
            name,
            cfg.archive.warc_max_bytes,
            warcwriter.default_info(cfg.digest(), f"{cfg.site.name}/run-{run_id}"),
            fsync=cfg.archive.durability == "power",
            opener=self.opener,
            clock=self.clock,
        )


@dataclass(frozen=True)
class Begun:
    """A run begun: its id, whether it is resumed, its store and its frontier."""

    run_id: int
    resumed: bool
    store: CaptureStore
    frontier: Frontier | SharedFrontier


class RunMode(Protocol):
    """Local or shared: everything in a run that differs between the two."""

    #: learned trap patterns: a process's figures must be the manifest's (not when shared)
    learns: bool
    #: the host lease robots.txt is fetched under; None when URLs are not leased by host
    robots_lease: Callable[[str], HostLease | None] | None

    def open(self, cfg: SiteConfig) -> Manifest:
        """The run's manifest (before the run begins: the CLI reads it too)."""
        ...

    async def begin(self, parts: RunParts) -> Begun | None:
        """Choose, join or start the run and repair what a crash left; None when there is
        nothing to do (a worker told to join only, and no run to join)."""
        ...

    def lease_of(self, item: UrlItem) -> HostLease | None:
        """The host lease `item` is written under (fences its commit), or None."""
        ...

    def heartbeat(self) -> str | None:
        """After this process's session was refreshed: why the run must stop, or None."""
        ...

    def end(self) -> bool:
        """The crawl is over and its store closed; False when told to stop meanwhile."""
        ...

    async def finish(self, code: int, state: str) -> PushResult | None:
        """The run's state recorded (when this process may), and its files settled."""
        ...

    def files(self) -> FilesResult | None:
        """A shared run's worker: what became of its WARC files."""
        ...

    def close(self) -> None:
        """The crawler is closed: nothing more is pushed."""
        ...


def write_index(manifest: Manifest, path: Path, stop_check: Callable[[], bool]) -> None:
    """index.cdxj from every capture of the manifest; StopRequested, the old index left
    as it was, when `stop_check` raises it while the index is written."""
    log.info("writing %s", path)
    lines = (index.capture_line(row) for row in manifest.captures.all() if not stop_check())
    n = index.write_index(path, lines)
    log.info("wrote %s (%d lines)", path, n)
