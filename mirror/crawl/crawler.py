"""Crawl orchestration: workers, frontier, fetch, archive writer, manifest; resume and stop."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mirror import crashpoints
from mirror.archive import index, recovery, warcwriter, workerfolder
from mirror.archive.manifest import (
    Manifest,
    NewUrl,
    Previous,
    UrlItem,
)
from mirror.archive.warcwriter import (
    Exchange,
    WarcWriter,
)
from mirror.config import SiteConfig
from mirror.crawl import history, requisites
from mirror.crawl.cookies import CookieFileError
from mirror.crawl.discover import MAX_PARSE_BYTES, Discovery, is_sitemap
from mirror.crawl.fetch import (
    FetchError,
    Limits,
    Session,
    SiteCookieJar,
    fetch,
    open_session,
    site_cookie_jar,
)
from mirror.crawl.frontier import Frontier
from mirror.crawl.growth import NewUrlTally
from mirror.crawl.hostlease import SharedFrontier, default_ttl
from mirror.crawl.learned import Learner
from mirror.crawl.login import LoginError, LoginKeeper
from mirror.crawl.parsepool import ParserPool, helper_count, parse_cut
from mirror.crawl.politeness import (
    BACKOFF_BASE,
    SOFT_FAILURES,
    DeadHosts,
    HostBackoffs,
    host_delay,
    host_failure,
    http_error,
    out_of_time,
    retry_delay,
)
from mirror.crawl.robots import ROBOTS_RULE, RobotsRules, robots_url
from mirror.crawl.robotsgate import RobotsGate, RunRobots
from mirror.crawl.scope import PAGE, Scope
from mirror.crawl.sharedrun import FilesResult, SharedFiles, SharedRun, repair_files
from mirror.crawl.sitemapbudget import SitemapBudget
from mirror.crawl.startup import RunSession, Startup, now_iso
from mirror.crawl.store import CaptureStore, StorageError
from mirror.layout import ArchiveLayout
from mirror.model import (
    NOTHING,
    SITEMAP_BUDGET,
    UNREACHABLE,
    Discovered,
    ExitCode,
    HostLease,
    Progress,
    RunState,
    UrlState,
    Via,
)

if TYPE_CHECKING:
    from mirror.archive.storesync import PushResult
    from mirror.crawl.uploads import Uploader
from mirror.web.http import header_map
from mirror.web.urls import site_key

log = logging.getLogger(__name__)


@dataclass
class Counters:
    """This process's live numbers for `Crawler.progress()` (the manifest holds the truth)."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)

    def snapshot(self, run_id: int, queued: int, held_back: int) -> Progress:
        return Progress(run_id=run_id, done=self.done, queued=queued, failed=self.failed,
                        retried=self.retried, bytes=self.bytes,
                        elapsed=time.monotonic() - self.started, held_back=held_back)


class StopRequested(Exception):
    """A signal asked the run to stop during a long synchronous step."""


@dataclass(frozen=True)
class RunResult:
    run_id: int
    exit_code: int
    state: str
    resumed: bool
    duration: float
    error: str | None = None  # why the run stopped early (e.g. the disk is full)
    uploads: PushResult | None = None  # [archive] store: what the run's last push did
    files: FilesResult | None = None  # a shared crawl: this worker's files and uploads


class Crawler:
    """One run over one site: fresh, resumed, or the next snapshot of a finished archive."""

    def __init__(
        self,
        cfg: SiteConfig,
        *,
        backoff_base: float = BACKOFF_BASE,
        seed: int | None = None,
        warc_opener: Callable[[Path], IO[bytes]] | None = None,
        new_run: bool = False,
        clock: Callable[[], datetime] = warcwriter.utc_now,
        group_size: int | None = None,
        group_wait: float | None = None,
        shared: SharedRun | None = None,
    ) -> None:
        self.cfg = cfg
        self.shared = shared  # `mirror run --db`: one crawl shared by several workers
        self.scope = Scope.from_config(cfg)
        self.counters = Counters()
        self.new_urls = NewUrlTally()  # the patterns of new URLs, for the live progress
        self.backoff_base = backoff_base
        self.rng = random.Random(seed)
        self.limits = Limits.from_config(cfg.crawl)
        layout = ArchiveLayout(cfg.site.output_dir)
        manifest_path, self.warc_dir, self.index_path = layout.manifest, layout.warc, layout.index
        self.durable = cfg.archive.durability == "power"
        self.manifest = (Manifest(shared.dsn) if shared is not None
                         else Manifest(manifest_path, durable=self.durable))
        self.frontier: Frontier | SharedFrontier | None = None
        self.files: SharedFiles | None = None  # a shared crawl's WARC files and uploads
        self.completed = False  # a shared crawl: this worker found the run over
        self.unsettled: dict[str, list[str]] = {}  # ... and others' files not uploaded
        self.run_id = 0
        self._interrupted = False
        # set by a signal handler at once, even while the event loop is busy in synchronous
        # work (the final index): what checks it stops there (stopsignals.RunSignals)
        self.stop_requested = False
        self._fatal: str | None = None
        self._fatal_code = ExitCode.INTERNAL  # USAGE when the site file's [login] failed
        self._workers: list[asyncio.Task[None]] = []
        self._finishing: set[asyncio.Task[None]] = set()  # responses being stored
        # fetching or storing a sitemap: abandoned at once on a stop (fetched again on resume)
        self._sitemap_tasks: set[asyncio.Task[None]] = set()
        # responses fetched and waiting to be stored, at most one per worker
        self._backlog = asyncio.Semaphore(cfg.crawl.workers)
        self._warc_opener = warc_opener  # fault injection in tests (ENOSPC)
        self._clock = clock  # WARC-Date of each record (tests pin it to tell runs apart)
        self._session: RunSession | None = None  # this process's time on the run
        self._backoffs = HostBackoffs(self.rng, backoff_base, cfg.crawl.max_retry_after)
        self._dead = DeadHosts(cfg.crawl.dead_host_after)
        self.login: LoginKeeper | None = None  # [login]: keeps the run logged in
        # url id -> when it first failed in this process (the retry budget runs from there)
        self._failing_since: dict[int, float] = {}
        self._usage: dict[str, tuple[int, int]] = {}  # site -> (URLs, bytes) this run
        self.discovery = Discovery(cfg, self.scope)
        self.sitemap_budget = SitemapBudget(self.manifest, cfg.scope.max_sitemap_urls)
        self.parsers = ParserPool(cfg, self.discovery, helper_count(cfg.crawl.parse_processes))
        # captures are committed in groups (store.GROUP_SIZE, GROUP_WAIT unless given)
        self.store = CaptureStore(self.manifest, self.warc_dir, self.discovery.wants_body,
                                  group_size=1 if shared else group_size,
                                  group_wait=group_wait, committed=self._stored,
                                  failed=self._fail_run)
        # learned trap patterns: this process's figures must be the manifest's, so not in a
        # crawl shared by several workers
        self.learner = (Learner(self.manifest, cfg.scope.fetch_patterns)
                        if cfg.scope.learn_traps and shared is None else None)
        self.store.learn = self.learner.observe if self.learner else None
        self.startup = Startup(cfg, self.manifest, self.store, self.parsers.discover_in_process,
                               self._stored, force_new_run=new_run)
        self.uploader: Uploader | None = None  # [archive] store: started with the run
        self.robots = RobotsGate(self._fetch_robots, RunRobots(
            self.manifest, lambda: self.run_id, self.store.warc_path, self.store_out_of_band,
            self.parsers.discover_in_process, self._site_lease if shared else None))

    # -- lifecycle -------------------------------------------------------------------------
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
        for task in self._sitemap_tasks:
            task.cancel()
        asyncio.get_running_loop().call_later(self.cfg.crawl.stop_grace, self.abort)

    def abort(self) -> None:
        """Cancel in-flight fetches. Records are written without an await, so a cancelled
        fetch never leaves a partial record; its URL goes back to pending."""
        for task in [*self._workers, *self._finishing]:
            task.cancel()

    async def run(self) -> RunResult:
        resumed = self._begin_shared() if self.shared is not None else self._begin()
        if resumed is None:  # --join, and no run to join: only this worker's files settled
            await self._files_done(None)
            return RunResult(0, ExitCode.OK, "none", False, 0.0, files=self._files_result())
        frontier = self.frontier
        assert frontier is not None
        if self._interrupted:  # told to stop while starting up
            frontier.stop()
        try:
            await self.parsers.start()
            async with open_session(
                self.cfg.crawl.user_agent, self.cfg.crawl.workers, self._cookie_jar(),
                self._sent,
            ) as session:
                await self._log_in(session)
                self._workers = [
                    asyncio.create_task(self._work(session), name=f"worker-{i}")
                    for i in range(self.cfg.crawl.workers)
                ]
                try:
                    await asyncio.wait(self._workers)
                    while self._finishing:  # responses still being stored
                        await asyncio.wait(set(self._finishing))
                finally:
                    self.abort()
                    await asyncio.gather(*self._workers, *self._finishing,
                                         return_exceptions=True)
                for task in self._workers:
                    if not task.cancelled() and task.exception():
                        raise task.exception()  # type: ignore[misc]
        finally:
            await self.parsers.close(abandon=self._interrupted)
            frontier.close()
            self._end_files()
        code, state = self._outcome()
        self._heartbeat(force=True)
        if self.shared is None:
            self.manifest.finish_run(self.run_id, now_iso(), state, code)
            uploads = await self._last_push()
        else:
            uploads = None
            await self._files_done(self._finish_shared(code, state))
        return RunResult(self.run_id, code, state, resumed,
                         self.manifest.run_time(self.run_id)[0], self._fatal, uploads,
                         self._files_result())

    def _start_uploads(self) -> None:
        """[archive] store: a thread uploads each WARC file the writer closes (loaded only
        then: a run without a store imports and starts nothing of it)."""
        if not self.cfg.archive.store:
            return
        from mirror.crawl.uploads import Uploader

        self.uploader = Uploader(self.cfg.archive.store, self.cfg.site.output_dir)
        self.store.closed_file = self.uploader.closed

    async def _last_push(self) -> PushResult | None:
        """The run's last push (every closed file, the index, the snapshot), in its thread;
        not waited for once the run is told to stop (the next run or `mirror push` does
        it)."""
        if self.uploader is None:
            return None
        self.uploader.end()
        while self.uploader.running:
            if self._interrupted and not self._fatal:
                log.warning("not waiting for the uploads to %s: the next run or `mirror "
                            "push` does them", self.cfg.archive.store)
                self.uploader.abandon()
                return None
            await asyncio.sleep(0.05)
        return self.uploader.result

    def _begin(self) -> bool:
        """Choose and repair the run, then open its WARC writer and frontier."""
        self.run_id, resumed = self.startup.begin()
        self._start_uploads()
        self._session = RunSession(self.manifest, self.run_id)
        self.store.writer = WarcWriter(
            self.warc_dir,
            self.cfg.site.name,
            self.cfg.archive.warc_max_bytes,
            warcwriter.default_info(self.cfg.digest(), f"{self.cfg.site.name}/run-{self.run_id}"),
            fsync=self.durable,
            opener=self._warc_opener,
            clock=self._clock,
        )
        self._usage = self.manifest.host_usage(self.run_id)
        self.frontier = Frontier(
            self.manifest,
            per_host=self.cfg.crawl.per_host,
            delay=self.cfg.crawl.delay,
            max_pages=self.cfg.scope.max_pages,
            pages_done=self.manifest.count_done_pages(self.run_id),
            on_dry=self.store.commit_pending,  # the group's new URLs are not leasable yet
        )
        return resumed

    def _begin_shared(self) -> bool | None:
        """A worker of a shared crawl starts: forget the workers named gone, join the run
        (or start it), end its own leases, repair its own WARC files and queue the closed
        ones for the store, then open its writer (its id in the file names) and a frontier
        of host leases. None when told to join only and no run is unfinished."""
        shared, m, cfg = self.shared, self.manifest, self.cfg
        assert shared is not None
        m.set_host_slots(1 if cfg.crawl.delay > 0 else cfg.crawl.per_host)
        for gone in shared.forget:
            lost = m.mark_lost(gone)
            log.warning("forgot worker %s: %d of its WARC files lost, their captures will "
                        "be fetched again", gone, len(lost))
        joined = m.join_or_start_run(now_iso(), cfg.digest(), self.startup.seeds(),
                                     may_start=not shared.join_only)
        last = m.last_run()
        self.run_id = joined.run_id if joined else (last.id if last else 0)
        m.register_worker(shared.owner, self.run_id)
        workerfolder.mark(cfg.site.output_dir, shared.owner)
        back = m.recover(shared.owner, cfg.crawl.delay)
        recovery.remove_temporaries(cfg.site.output_dir)
        todo = repair_files(m, self.warc_dir, self.run_id)
        self.files = SharedFiles(shared.dsn, shared.owner, self.warc_dir,
                                 cfg.archive.store or None)
        for name in todo:
            self.files.closed(name)
        if joined is None:
            log.warning("no unfinished run to join (--join)")
            return None
        log.info("%s run %d as worker %s (%d URLs back to pending)",
                 "started" if joined.started else "joined", self.run_id, shared.owner, back)
        if joined.started:
            crashpoints.reached("run:started")
        self.store.history = m.has_captures_before(self.run_id)
        self.store.lease_of = self._lease
        self.store.opened_file = functools.partial(m.open_file, owner=shared.owner)
        self.store.closed_file = self.files.closed
        self._session = RunSession(m, self.run_id)
        self.store.writer = WarcWriter(
            self.warc_dir,
            f"{cfg.site.name}-{shared.owner}",
            cfg.archive.warc_max_bytes,
            warcwriter.default_info(cfg.digest(), f"{cfg.site.name}/run-{self.run_id}"),
            fsync=self.durable,
            opener=self._warc_opener,
            clock=self._clock,
        )
        self._usage = m.host_usage(self.run_id)
        self.frontier = SharedFrontier(
            m, self.run_id, shared.owner,
            max_hosts=cfg.crawl.workers,
            delay=cfg.crawl.delay,
            ttl=shared.ttl or default_ttl(cfg.crawl.timeout),
            fetch_timeout=cfg.crawl.timeout,
            max_pages=cfg.scope.max_pages,
            pages_done=m.count_done_pages(self.run_id),
            on_dry=self.store.commit_pending,
        )
        return not joined.started

    def _finish_shared(self, code: int, state: str) -> Path | None:
        """A shared crawl's worker is done: when the run is over (no URL pending or leased,
        by anyone) it finishes the run and writes the index of every worker's captures
        (returned, to upload); else the run goes on with the others."""
        assert self.shared is not None
        assert isinstance(self.frontier, SharedFrontier)
        if self._fatal or self._interrupted or self.manifest.unfinished(
                self.run_id, pages=not self.frontier.limit_reached):
            return None
        self.manifest.finish_run(self.run_id, now_iso(), state, code)
        self.completed = True
        self.unsettled = self.manifest.unsettled_files(self.shared.owner, self.frontier.ttl)
        for worker, names in self.unsettled.items():
            log.warning("worker %s is silent and has %d WARC files with captures of "
                        "this run not uploaded (%s): start it again with --join, or if it "
                        "is gone for good, --forget-worker %s to fetch them again", worker,
                        len(names), ", ".join(names[:3]), worker)
        log.info("run %d is complete", self.run_id)
        self._write_index()
        return self.index_path

    async def _files_done(self, index_path: Path | None) -> None:
        """Wait (without blocking the loop) for the file thread to settle and upload this
        worker's closed files; not when the worker was told to stop (its next start does)."""
        if self.files is None:
            return
        self.files.end(index_path)
        while self.files.running:
            if self._interrupted and not self._fatal:
                log.warning("not waiting for the uploads: this worker's next `mirror run "
                            "--db` does them")
                return
            await asyncio.sleep(0.05)

    def _files_result(self) -> FilesResult | None:
        return self.files.result if self.files is not None else None

    def _lease(self, item: UrlItem) -> HostLease | None:
        """The host lease `item` was taken under, which fences what is written of it (a
        shared crawl); robots.txt is fetched under its host's lease. None on one machine."""
        frontier = self.frontier
        if not isinstance(frontier, SharedFrontier):
            return None
        if item.via == Via.ROBOTS:
            return frontier.lease_for(item.site)
        return frontier.lease_of(item)

    def _site_lease(self, site: str) -> HostLease | None:
        frontier = self.frontier
        return frontier.lease_for(site) if isinstance(frontier, SharedFrontier) else None

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

    def _end_files(self) -> None:
        self.store.close()  # the last group is committed first; a failure stops the run
        if self.shared is not None:  # the worker that completes the run writes it
            return
        try:
            self._write_index()
        except StopRequested:
            self._interrupted = True
            log.warning("%s not written: the run was told to stop (the next `mirror run` "
                        "writes it, as does `mirror index`)", self.index_path)
            return
        crashpoints.reached("run:before-finish", "run")

    def _write_index(self) -> None:
        """index.cdxj from every capture of the manifest; StopRequested, the old index left
        as it was, when a signal comes while it is being written."""
        log.info("writing %s", self.index_path)
        lines = (index.capture_line(row) for row in self.manifest.captures()
                 if not self._stop_check())
        n = index.write_index(self.index_path, lines)
        log.info("wrote %s (%d lines)", self.index_path, n)

    def _stop_check(self) -> bool:
        if self.stop_requested:
            raise StopRequested
        return False

    def _outcome(self) -> tuple[int, str]:
        assert self.frontier is not None
        if self._fatal:
            return self._fatal_code, RunState.INTERRUPTED
        if self._interrupted:
            return ExitCode.INTERRUPTED, RunState.INTERRUPTED
        if self.frontier.limit_reached and self.manifest.count_pending(pages_only=True):
            return ExitCode.LIMIT, RunState.LIMIT
        if self.manifest.url_states(self.run_id).get(UrlState.FAILED):
            return ExitCode.FAILED_URLS, RunState.COMPLETE
        return ExitCode.OK, RunState.COMPLETE

    def close(self) -> None:
        if self.uploader is not None:
            self.uploader.abandon()  # no push after the run (it is done, or not wanted)
        self.manifest.close()

    # -- workers ---------------------------------------------------------------------------
    async def _work(self, session: object) -> None:
        frontier = self.frontier
        assert frontier is not None
        while (item := await frontier.take()) is not None:
            handed_off = False
            try:
                with self._guarded(item), self._abandonable(item, asyncio.current_task()):
                    handed_off = await self._process(session, item)
            finally:
                if not handed_off:
                    frontier.release(item)

    @contextmanager
    def _abandonable(self, item: UrlItem, task: asyncio.Task[Any] | None) -> Iterator[None]:
        """While `task` works on `item`, a stop cancels it at once if `item` is a sitemap."""
        if task is None or not is_sitemap(item):
            yield
            return
        self._sitemap_tasks.add(task)
        try:
            yield
        finally:
            self._sitemap_tasks.discard(task)

    @contextmanager
    def _guarded(self, item: UrlItem) -> Iterator[None]:
        """What happens to `item` when its fetch or storing fails."""
        try:
            yield
        except (StorageError, asyncio.CancelledError) as exc:
            self._unlease(item)  # not done: fetched again on resume
            if isinstance(exc, asyncio.CancelledError):
                raise
            self._fail_run(str(exc))
        except Exception as exc:  # a bad page never stops the crawl
            log.exception("internal error on %s", item.url)
            self.manifest.give_up(self.run_id, item, f"internal: {type(exc).__name__}",
                                  lease=self._lease(item))
            self.counters.failed += 1

    async def _process(self, session: object, item: UrlItem) -> bool:
        """Fetch `item`. A response to keep goes to a finishing task, and the worker moves
        on to its next request at once: the CPU work (links, WARC records, manifest) of up
        to `workers` responses waits its turn while `workers` requests are in flight.
        Returns whether it was handed off (the finishing task then releases `item`)."""
        if self._fail_if_dead(item) or not await self._permitted(session, item):
            return False
        prev = self.store.previous(self.run_id, item)
        assert self.frontier is not None
        if not await self.frontier.turn(item.site):
            return False  # a shared crawl's lease on the host is lost: not fetched here
        try:
            ex = await self._fetch_item(session, item, prev)
        except LoginError as exc:  # logging in again failed: stop, resume later
            self._unlease(item)
            self._fail_run(str(exc), ExitCode.USAGE)
            return False
        except FetchError as exc:
            if not self._host_failed(item.site, exc) or not self._fail_if_dead(item):
                self._retry_or_fail(item, str(exc), exc.retryable)
            return False
        self._dead.answered(item.site)
        handed_off = False
        try:
            last_try = item.tries + 1 >= self.cfg.crawl.max_tries
            error = http_error(ex.status, ex.truncated)
            wait = self._host_feedback(item.site, ex)
            if error and not last_try:
                self._retry_or_fail(item, error, True, wait)
                return False
            await self._backlog.acquire()
            assert self.frontier is not None
            self.frontier.fetched(item)
            task = asyncio.create_task(self._finish(item, ex, error, prev))
            self._finishing.add(task)
            if is_sitemap(item):
                self._sitemap_tasks.add(task)
            task.add_done_callback(functools.partial(self._finished, item, ex))
            handed_off = True
            return True
        finally:
            if not handed_off:
                ex.body.close()

    async def _finish(self, item: UrlItem, ex: Exchange, error: str | None,
                      prev: Previous | None) -> None:
        """Links first, then the records, with no await between; the manifest commit
        follows with the capture's group (CaptureStore)."""
        with self._guarded(item):
            async with self.parsers.room(min(ex.body_length, MAX_PARSE_BYTES)):
                page = self.store.page(ex, prev, item=item)
                links = parse_cut(await self.parsers.discover(item, page), page, ex)
            if is_sitemap(item):
                links = self.sitemap_budget.take(self.run_id, item, links)
            links = requisites.bounded(
                links, item, functools.partial(self.manifest.requisite_chain, item.id),
                self.cfg.scope.max_requisite_depth)
            if self.learner is not None:
                links = links._replace(links=self.learner.sift(links.links))
            self._store(item, ex, error, prev, links)
            self._usage[item.site] = _plus(self._usage.get(item.site), ex.body_length)

    def _finished(self, item: UrlItem, ex: Exchange, task: asyncio.Task[None]) -> None:
        """After `_finish`, however it ended: also when it was cancelled before it began."""
        self._finishing.discard(task)
        self._sitemap_tasks.discard(task)
        ex.body.close()
        self._backlog.release()
        if task.cancelled():
            self._unlease(item)  # not stored: fetched again on resume
        assert self.frontier is not None
        self.frontier.release(item, slot_held=False)

    async def _fetch_item(self, session: object, item: UrlItem,
                          prev: Previous | None) -> Exchange:
        """fetch(), through the login keeper with [login]: when the answer asks to log in,
        it logs in again and fetches once more."""
        once = functools.partial(fetch, session, item.url, self.limits,  # type: ignore[arg-type]
                                 self._request_headers(item.url, prev))
        return await (self.login.fetch(once) if self.login else once())

    def _request_headers(self, url: str, prev: Previous | None) -> dict[str, str]:
        return {**self.cfg.headers_for(self.scope.on_site(url)),
                **history.conditional_headers(prev)}

    async def _permitted(self, session: object, item: UrlItem) -> bool:
        """robots.txt and the per-host budgets, checked just before the fetch."""
        pages, nbytes = self._usage.get(item.site, (0, 0))
        rule = self.scope.budget.exceeded(pages, nbytes)
        if rule is None and is_sitemap(item) and self.sitemap_budget.spent(self.run_id):
            rule = SITEMAP_BUDGET
        if rule is None and self.learner is not None and item.mode == PAGE:
            rule = self.learner.rule_for(item.url)  # a pattern stopped since it was queued
        if rule is None and self.cfg.scope.robots and not item.url.endswith("/robots.txt"):
            rules = await self.robots.rules_for(session, item.url)
            self.frontier_delay(item.site, rules)
            if not rules.allowed(item.url, self.cfg.crawl.user_agent):
                if rules.unreachable and self._fail_if_dead(item):
                    return False
                if rules.unreachable:  # try again when robots.txt may be back, max_tries times
                    wait = self.robots.cache.expires_in(robots_url(item.url))
                    self._retry_or_fail(item, f"robots.txt {rules.reason}", True, wait)
                    return False
                rule = ROBOTS_RULE
        if rule is not None:
            log.info("skipping %s (%s)", item.url, rule)
            self.manifest.skip(self.run_id, item, rule, lease=self._lease(item))
            return False
        return True

    def frontier_delay(self, site: str, rules: RobotsRules) -> None:
        delay = rules.crawl_delay(self.cfg.crawl.user_agent)
        if delay and self.frontier is not None:
            self.frontier.set_delay(
                site, host_delay(self.cfg.crawl.delay, delay, self.cfg.crawl.max_crawl_delay))

    def _host_feedback(self, site: str, ex: Exchange) -> float:
        """429/503 slow the whole host down; returns the seconds it is held back."""
        wait = self._backoffs.answer(site, ex.status, header_map(ex.response_headers).get(
            "retry-after"), datetime.now(UTC))
        if not wait:
            return 0.0
        log.warning("%s answered %d: no requests to it for %.1fs", site, ex.status, wait)
        if self.frontier is not None:
            self.frontier.hold(site, wait)
        return wait

    def _retry_or_fail(self, item: UrlItem, error: str, retryable: bool,
                       at_least: float = 0.0) -> None:
        tries = item.tries + 1
        delay = retry_delay(tries, self.cfg.crawl.max_tries, retryable, self.rng,
                            self.backoff_base, at_least)
        now = time.monotonic()
        since = self._failing_since.setdefault(item.id, now)
        if delay is not None and out_of_time(since, now, delay, self.cfg.crawl.max_retry_time):
            error, delay = f"{error} (retries would outlast max_retry_time)", None
        if delay is not None:
            log.info("retrying %s in %.1fs after %s (try %d of %d)",
                     item.url, delay, error, tries, self.cfg.crawl.max_tries)
            self.manifest.retry_later(self.run_id, item, error, time.time() + delay,
                                      lease=self._lease(item))
            self.counters.retried += 1
            self._heartbeat()
        else:
            log.warning("giving up on %s after %d tries: %s", item.url, tries, error)
            self._give_up(item, error)

    def _give_up(self, item: UrlItem, error: str) -> None:
        self._failing_since.pop(item.id, None)
        self.manifest.give_up(self.run_id, item, error, lease=self._lease(item))
        self.counters.failed += 1

    def _host_failed(self, site: str, exc: FetchError, *, first: bool = False) -> bool:
        """Count a fetch error against its host; True when it says the host is unreachable.
        A reset counts a third, as live hosts drop connections now and then, except on a
        `first` request (robots.txt), which a host that serves anything answers."""
        reason = host_failure(exc.kind, str(exc.args[0]))
        if reason is None:
            return False
        known = self._dead.reason(site) is not None
        soft = exc.kind in SOFT_FAILURES and not first
        if self._dead.failed(site, reason, soft) and not known:
            log.warning("%s is unreachable (%s): its other URLs fail at once", site, reason)
        return True

    def _fail_if_dead(self, item: UrlItem) -> bool:
        """Fail `item` at once when its host is known to be unreachable."""
        reason = self._dead.reason(item.site)
        if reason is None:
            return False
        log.info("not fetching %s: host unreachable (%s)", item.url, reason)
        self._give_up(item, f"{UNREACHABLE}: {reason}")
        return True

    async def _fetch_robots(self, session: object, url: str) -> Exchange:
        """robots.txt is a request to its host like any: its turn under `delay`, and its
        connection failures count against the host."""
        site = site_key(url)
        assert self.frontier is not None
        await self.frontier.turn(site)
        try:
            ex = await fetch(session, url, self.limits,  # type: ignore[arg-type]
                             self.cfg.headers_for(self.scope.on_site(url)))
        except FetchError as exc:
            self._host_failed(site, exc, first=True)
            raise
        self._dead.answered(site)
        return ex

    def store_out_of_band(self, item: UrlItem, ex: Exchange,
                          found: Discovered = NOTHING) -> None:
        """Archive a fetch made outside the frontier (robots.txt), with what it links to
        (the sitemaps a robots.txt names), if anything. It is committed at once: the robots
        gate looks for it in the manifest (RunRobots.lookup), and sitemaps are new URLs."""
        self._store(item, ex, None, None, found)
        self.store.commit_group()

    def _store(self, item: UrlItem, ex: Exchange, error: str | None,
               prev: Previous | None, links: Discovered) -> None:
        """The capture joins the store's group; `_stored` follows when it is committed."""
        self.store.store(self.run_id, item, ex, error, prev, links)

    def _stored(self, item: UrlItem, ex: Exchange, error: str | None,
                found: list[NewUrl]) -> None:
        """After a capture's commit, with its group (also one adopted at start-up)."""
        self._heartbeat()
        self._failing_since.pop(item.id, None)
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
        return self.counters.snapshot(self.run_id, self.manifest.count_pending(),
                                      self.frontier.held_back())

    def _fail_run(self, message: str, code: ExitCode = ExitCode.INTERNAL) -> None:
        if self._fatal is None:
            self._fatal, self._fatal_code = message, code
            log.error("%s; stopping (the run resumes with the next `mirror run`)", message)
            self.stop()

    def _unlease(self, item: UrlItem) -> None:
        self.manifest.unlease([item.id], lease=self._lease(item))

    def _heartbeat(self, force: bool = False) -> None:
        if self._session is None:
            return
        beat = self._session.beat(force)
        if beat and self.shared is not None and not self.manifest.heartbeat(self.shared.owner):
            self._fail_run(f"worker {self.shared.owner} was forgotten by another worker "
                           "(--forget-worker): its files are lost")



def _plus(usage: tuple[int, int] | None, nbytes: int) -> tuple[int, int]:
    pages, total = usage or (0, 0)
    return pages + 1, total + nbytes
