"""Crawl orchestration: one run over one site in the run mode chosen for it (runmode), its
worker tasks (urlwork), its live numbers, its end; resume and stop."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from mirror.archive import warcwriter
from mirror.archive.warcwriter import Exchange
from mirror.config import SiteConfig
from mirror.crawl.cookies import CookieFileError
from mirror.crawl.discover import Discovery
from mirror.crawl.fetch import Limits, Session, SiteCookieJar, open_session, site_cookie_jar
from mirror.crawl.frontier import Frontier
from mirror.crawl.growth import NewUrlTally
from mirror.crawl.learned import Learner
from mirror.crawl.localrun import LocalRun
from mirror.crawl.login import LoginError, LoginKeeper
from mirror.crawl.outcomes import Counters, UrlOutcomes
from mirror.crawl.parsepool import ParserPool, helper_count
from mirror.crawl.pendingmark import mark_pending
from mirror.crawl.politeness import BACKOFF_BASE
from mirror.crawl.render import Renderer
from mirror.crawl.runmode import Begun, RunMode, RunParts, StopRequested
from mirror.crawl.scope import Scope
from mirror.crawl.sharedfrontier import SharedFrontier
from mirror.crawl.startup import RunSession
from mirror.crawl.store import CaptureStore
from mirror.crawl.urlwork import UrlWork
from mirror.layout import ArchiveLayout
from mirror.manifest.writer import NewUrl, UrlItem
from mirror.model import SNAPSHOT_CODES, ExitCode, Progress, RunState, UrlState
from mirror.web.urls import site_key

if TYPE_CHECKING:
    from mirror.crawl.sharedfiles import FilesResult
    from mirror.store.sync import PushResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    run_id: int
    exit_code: int
    state: str
    resumed: bool
    duration: float
    error: str | None = None  # why the run stopped early (e.g. the disk is full)
    uploads: PushResult | None = None  # [archive] store: what the run's last push did
    files: FilesResult | None = None  # a shared run: this worker's files and uploads
    browser_loads: int = 0  # pages loaded in the browser by this process ([browser])


class Crawler:
    """One run over one site: fresh, resumed, or the next snapshot of a finished archive;
    on one machine or as a worker of a shared run, as its `mode` says (LocalRun unless
    given)."""

    def __init__(
        self,
        cfg: SiteConfig,
        mode: RunMode | None = None,
        *,
        backoff_base: float = BACKOFF_BASE,
        seed: int | None = None,
        warc_opener: Callable[[Path], IO[bytes]] | None = None,
        clock: Callable[[], datetime] = warcwriter.utc_now,
        group_size: int | None = None,
        group_wait: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.mode: RunMode = mode if mode is not None else LocalRun()
        self.counters = Counters()
        self.new_urls = NewUrlTally()  # the patterns of new URLs, for the live progress
        self.backoff_base = backoff_base
        self.rng = random.Random(seed)
        self.manifest = self.mode.open(cfg)
        self.frontier: Frontier | SharedFrontier | None = None
        self.store: CaptureStore | None = None
        self.work: UrlWork | None = None  # the begun run's URLs, from frontier to store
        self.run_id = 0
        self._interrupted = False
        # set by a signal handler at once, even while the event loop is busy in synchronous
        # work (the final index): what checks it stops there (stopsignals.RunSignals)
        self.stop_requested = False
        self._fatal: str | None = None
        self._fatal_code = ExitCode.INTERNAL  # USAGE when the site file's [login] failed
        self._workers: list[asyncio.Task[None]] = []
        self._session: RunSession | None = None  # this process's time on the run
        self.login: LoginKeeper | None = None  # [login]: keeps the run logged in
        self.scope = Scope.from_config(cfg)
        self.renderer = Renderer.from_config(cfg)  # [browser]: launched at its first page
        self.limits = Limits.from_config(cfg.crawl)
        discovery = Discovery(cfg, self.scope)
        self.parsers = ParserPool(cfg, discovery, helper_count(cfg.crawl.parse_processes))
        # learned trap patterns: this process's figures must be the manifest's
        self.learner = (Learner(self.manifest, cfg.scope.fetch_patterns)
                        if cfg.scope.learn_traps and self.mode.learns else None)
        layout = ArchiveLayout(cfg.site.output_dir)
        # captures are committed in groups (store.GROUP_SIZE, GROUP_WAIT unless given)
        new_store = functools.partial(
            CaptureStore, self.manifest, layout.warc, discovery.wants_body,
            group_size=group_size, group_wait=group_wait, committed=self._stored,
            failed=self._fail_run, learn=self.learner.observe if self.learner else None)
        self.parts = RunParts(cfg, self.manifest, layout, new_store,
                              self.parsers.discover_in_process, self._stored, self,
                              warc_opener, clock)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def interrupted(self) -> bool:
        return self._interrupted

    @property
    def fatal(self) -> str | None:
        return self._fatal

    def stop(self) -> None:
        """Graceful stop: no new URLs are handed out; in-flight fetches get `stop_grace`
        seconds to finish, then are abandoned. A second call abandons them at once. Sitemaps
        are abandoned at once: one can list 50,000 URLs to parse and commit, and it is
        fetched again on resume."""
        if self._interrupted:
            self.abort()
            return
        self._interrupted = True
        if self.frontier is not None:
            self.frontier.stop()
        if self.work is not None:
            self.work.stop()
        asyncio.get_running_loop().call_later(self.cfg.crawl.stop_grace, self.abort)

    def abort(self) -> None:
        """Cancel in-flight fetches. Records are written without an await, so a cancelled
        fetch never leaves a partial record; its URL goes back to pending."""
        finishing = self.work.finishing if self.work is not None else set()
        for task in [*self._workers, *finishing]:
            task.cancel()

    async def run(self) -> RunResult:
        begun = await self.mode.begin(self.parts)
        if begun is None:  # --join, and no run to join: only this worker's files settled
            return RunResult(0, ExitCode.OK, "none", False, 0.0, files=self.mode.files())
        self._begun(begun)
        frontier = begun.frontier
        if self._interrupted:  # told to stop while starting up
            frontier.stop()
        try:
            await self.parsers.start()
            async with open_session(
                self.cfg.crawl.user_agent, self.cfg.crawl.workers, self._cookie_jar(),
                self._sent,
            ) as session, self.renderer:
                await self._log_in(session)
                await self._crawl(session, self._url_work(begun))
        finally:
            await self.parsers.close(abandon=self._interrupted)
            frontier.close()
            self._end_files(begun.store)
        code, state = self._outcome()
        self._heartbeat(force=True)
        uploads = await self.mode.finish(code, state)
        if self.renderer.loads:
            log.info("browser: %d page loads (%s)", self.renderer.loads, self.renderer.version)
        files = self.mode.files()
        if code in SNAPSHOT_CODES and not all(  # the archive is whole here, not in the store
                done.complete for done in (uploads, files) if done is not None):
            code = ExitCode.UPLOAD_PENDING
            mark_pending(self.manifest, self.run_id)  # status, list, the app: not complete
        return RunResult(self.run_id, code, state, begun.resumed,
                         self.manifest.runs.time(self.run_id)[0], self._fatal, uploads,
                         files, self.renderer.loads)

    def _begun(self, begun: Begun) -> None:
        self.run_id, self.store, self.frontier = begun.run_id, begun.store, begun.frontier
        self._session = RunSession(self.manifest, self.run_id)

    def _url_work(self, begun: Begun) -> UrlWork:
        outcomes = UrlOutcomes(self.cfg, self.manifest, begun.run_id, begun.frontier,
                               self.counters, rng=self.rng, backoff_base=self.backoff_base,
                               lease_of=self.mode.lease_of, heartbeat=self._heartbeat)
        self.work = UrlWork(self.cfg, self.manifest, begun.run_id, begun.store,
                            begun.frontier, outcomes, scope=self.scope, limits=self.limits,
                            parsers=self.parsers,
                            learner=self.learner, login=self.login,
                            fail_run=self._fail_run, lease_of=self.mode.lease_of,
                            robots_lease=self.mode.robots_lease,
                            renderer=None if self.renderer.mode == "off" else self.renderer)
        return self.work

    async def _crawl(self, session: Session, work: UrlWork) -> None:
        self._workers = [asyncio.create_task(work.work(session), name=f"worker-{i}")
                         for i in range(self.cfg.crawl.workers)]
        try:
            await asyncio.wait(self._workers)
            await work.drain()
        finally:
            self.abort()
            await asyncio.gather(*self._workers, *work.finishing, return_exceptions=True)
        for task in self._workers:
            if not task.cancelled() and task.exception():
                raise task.exception()  # type: ignore[misc]

    def _sent(self, url: str) -> None:
        """A request just went out: its host's delay counts from now."""
        if self.frontier is not None:
            self.frontier.sent(site_key(url))

    def _cookie_jar(self) -> SiteCookieJar | None:
        """The run's cookie jar; a cookies_file that cannot be read stops the run."""
        try:
            return site_cookie_jar(self.cfg.crawl, self.scope.on_site)
        except CookieFileError as exc:
            self._fail_run(str(exc))
            return None

    async def _log_in(self, session: Session) -> None:
        """[login]: log in before the first request; a failed login stops the run."""
        if not self.cfg.login.url or self._fatal:
            return
        self.login = LoginKeeper(session, self.cfg, self.limits)
        try:
            await self.login.log_in()
        except LoginError as exc:  # the [login] settings do not log in: exit 2
            self._fail_run(str(exc), ExitCode.USAGE)

    def _end_files(self, store: CaptureStore) -> None:
        store.close()  # the last group is committed first; a failure stops the run
        if not self.mode.end():  # the index: told to stop while it was written
            self._interrupted = True

    def check_stop(self) -> bool:
        if self.stop_requested:
            raise StopRequested
        return False

    def _outcome(self) -> tuple[int, str]:
        assert self.frontier is not None
        if self._fatal:
            return self._fatal_code, RunState.INTERRUPTED
        if self._interrupted:
            return ExitCode.INTERRUPTED, RunState.INTERRUPTED
        if self.frontier.limit_reached and self.manifest.urls.count_pending(pages_only=True):
            return ExitCode.LIMIT, RunState.LIMIT
        if self.manifest.counts.url_states(self.run_id).get(UrlState.FAILED):
            return ExitCode.FAILED_URLS, RunState.COMPLETE
        return ExitCode.OK, RunState.COMPLETE

    def close(self) -> None:
        self.mode.close()
        self.manifest.close()

    # -- what the store and the workers tell ------------------------------------------------
    def _stored(self, item: UrlItem, ex: Exchange, error: str | None,
                found: list[NewUrl]) -> None:
        """After a capture's commit, with its group (also one adopted at start-up)."""
        self._heartbeat()
        if self.work is not None:
            self.work.outcomes.failing_since.pop(item.id, None)
        log.info("%d %s (%d bytes)", ex.status, item.url, ex.body_length)
        if found and self.frontier is not None:
            self.frontier.notify()
        for new in found:
            self.new_urls.add(new.url)
        if error:
            log.warning("giving up on %s: %s", item.url, error)
            self.counters.failed += 1
        else:
            self.counters.done += 1
        self.counters.bytes += ex.body_length

    def progress(self) -> Progress | None:
        """The run's live numbers now (a progress display pulls them); None before the run
        has begun. `queued` is counted in the manifest: every URL still to fetch, not only
        those the frontier holds in memory."""
        if self.frontier is None:
            return None
        return self.counters.snapshot(self.run_id, self.manifest.urls.count_pending(),
                                      self.frontier.held_back())

    def _fail_run(self, message: str, code: ExitCode = ExitCode.INTERNAL) -> None:
        if self._fatal is None:
            self._fatal, self._fatal_code = message, code
            log.error("%s; stopping (the run resumes with the next `mirror run`)", message)
            self.stop()

    def _heartbeat(self, force: bool = False) -> None:
        if self._session is None:
            return
        if self._session.beat(force) and (why := self.mode.heartbeat()) is not None:
            self._fail_run(why)
