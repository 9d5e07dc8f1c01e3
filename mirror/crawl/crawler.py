"""Crawl orchestration: workers, frontier, fetch, archive writer, manifest; resume and stop."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from mirror import crashpoints
from mirror.archive import index, recovery, warcread, warcwriter
from mirror.archive.manifest import (
    CaptureRow,
    Manifest,
    ManifestError,
    ManifestWriteError,
    NewUrl,
    Original,
    Previous,
    UrlItem,
)
from mirror.archive.warcwriter import (
    NOT_MODIFIED,
    OPEN_SUFFIX,
    CaptureLocation,
    Exchange,
    Revisit,
    WarcWriter,
)
from mirror.config import SiteConfig
from mirror.crawl import history
from mirror.crawl.discover import Discovery
from mirror.crawl.fetch import FetchError, Limits, fetch, open_session
from mirror.crawl.frontier import Frontier
from mirror.crawl.parsepool import Links, Page, ParserPool
from mirror.crawl.politeness import BACKOFF_STATUSES, host_backoff, host_delay, parse_retry_after
from mirror.crawl.robots import ROBOTS_RULE, RobotsRules, robots_url
from mirror.crawl.robotsgate import RobotsGate, RunRobots
from mirror.crawl.scope import PAGE, Scope
from mirror.layout import ArchiveLayout
from mirror.model import ExitCode
from mirror.web.http import header_map, mime_of
from mirror.web.urls import normalize, site_key

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: exponential backoff between tries: BACKOFF_BASE * 2**(try-1), capped, with jitter
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0


@dataclass
class Counters:
    """Live numbers for the progress display (the manifest holds the truth)."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class RunResult:
    run_id: int
    exit_code: int
    state: str
    resumed: bool
    duration: float
    error: str | None = None  # why the run stopped early (e.g. the disk is full)


class StorageError(Exception):
    """The archive cannot be written (disk full, I/O error): the run stops, nothing is lost."""


def backoff(tries: int, rng: random.Random, base: float = BACKOFF_BASE) -> float:
    """Seconds before try number `tries + 1`: exponential, capped, with +-50% jitter."""
    return min(BACKOFF_CAP, base * 2 ** max(tries - 1, 0)) * rng.uniform(0.5, 1.5)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Crawler:
    """One run over one site: fresh, resumed, or the next snapshot of a finished archive."""

    def __init__(
        self,
        cfg: SiteConfig,
        *,
        on_progress: Callable[[Crawler], None] | None = None,
        backoff_base: float = BACKOFF_BASE,
        seed: int | None = None,
        warc_opener: Callable[[Path], IO[bytes]] | None = None,
        new_run: bool = False,
        clock: Callable[[], datetime] = warcwriter.utc_now,
    ) -> None:
        self.cfg = cfg
        self.scope = Scope.from_config(cfg)
        self.counters = Counters()
        self.on_progress = on_progress
        self.backoff_base = backoff_base
        self.rng = random.Random(seed)
        self.limits = Limits(
            timeout=cfg.crawl.timeout,
            connect_timeout=cfg.crawl.connect_timeout,
            read_timeout=cfg.crawl.read_timeout,
            max_bytes=cfg.crawl.max_response_bytes,
        )
        layout = ArchiveLayout(cfg.site.output_dir)
        manifest_path, self.warc_dir, self.index_path = layout.manifest, layout.warc, layout.index
        self.durable = cfg.archive.durability == "power"
        self.manifest = Manifest(manifest_path, durable=self.durable)
        self.frontier: Frontier | None = None
        self.writer: WarcWriter | None = None
        self.run_id = 0
        self._interrupted = False
        self._fatal: str | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._finishing: set[asyncio.Task[None]] = set()  # responses being stored
        # responses fetched and waiting to be stored, at most one per worker
        self._backlog = asyncio.Semaphore(cfg.crawl.workers)
        self._warc_opener = warc_opener  # fault injection in tests (ENOSPC)
        self._clock = clock  # WARC-Date of each record (tests pin it to tell runs apart)
        self._force_new_run = new_run
        self._history = False  # an earlier run stored captures: look for previous ones
        self._session: int | None = None  # this process's row in the manifest's sessions
        self._alive = 0.0  # when this session was last recorded as working (monotonic)
        self._host_failures: dict[str, int] = {}
        self._usage: dict[str, tuple[int, int]] = {}  # site -> (URLs, bytes) this run
        self.robots = RobotsGate(self._fetch_robots, RunRobots(
            self.manifest, lambda: self.run_id, self.warc_path, self.store_out_of_band))
        self.discovery = Discovery(cfg, self.scope)
        self.parsers = ParserPool(cfg, self.discovery, cfg.crawl.parse_processes)

    # -- lifecycle -------------------------------------------------------------------------
    def stop(self) -> None:
        """Graceful stop: no new URLs are handed out; in-flight fetches get `stop_grace`
        seconds to finish, then are abandoned. A second call abandons them at once."""
        if self._interrupted:
            self.abort()
            return
        self._interrupted = True
        if self.frontier is not None:
            self.frontier.stop()
        asyncio.get_running_loop().call_later(self.cfg.crawl.stop_grace, self.abort)

    def abort(self) -> None:
        """Cancel in-flight fetches. Records are written without an await, so a cancelled
        fetch never leaves a partial record; its URL goes back to pending."""
        for task in [*self._workers, *self._finishing]:
            task.cancel()

    async def run(self) -> RunResult:
        resumed = self._begin()
        frontier = self.frontier
        assert frontier is not None
        try:
            await self.parsers.start()
            async with open_session(
                self.cfg.crawl.user_agent, self.cfg.crawl.workers
            ) as session:
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
            await self.parsers.close()
            frontier.close()
            self._end_files()
        code, state = self._outcome()
        self._heartbeat(force=True)
        self.manifest.finish_run(self.run_id, now_iso(), state, code)
        return RunResult(self.run_id, code, state, resumed,
                         self.manifest.run_time(self.run_id)[0], self._fatal)

    def _begin(self) -> bool:
        """Resume an unfinished run, or start a new one seeded with the start URLs."""
        last = self.manifest.last_run()
        resumed = last is not None and last.state in ("running", "interrupted")
        if last is not None and last.state == "running":  # the last run died: check first
            damage = self.manifest.quick_check()
            if damage != "ok":
                raise ManifestError(
                    f"{self.manifest.path}: damaged after an unclean stop ({damage}); "
                    "refusing to resume. Move the archive folder aside, or restore "
                    "manifest.sqlite3 from a backup and run again."
                )
        if resumed and self._force_new_run:
            assert last is not None
            self._recover_run(last.id)  # its open file still belongs to it
            self.manifest.abandon_run(last.id, now_iso())
            log.warning("run %d left unfinished (abandoned); starting a new run", last.id)
            resumed = False
        if resumed:
            assert last is not None
            self.run_id = last.id
            back = self.manifest.resume_run(self.run_id)
            log.info("resuming run %d (%d leased URLs back to pending)", self.run_id, back)
        else:
            self.run_id = self.manifest.start_run(now_iso(), self.cfg.digest())
            self.manifest.add_urls(self.run_id, None, self._seeds())
        self._session = self.manifest.begin_session(self.run_id, time.time())
        self._alive = time.monotonic()
        self._recover_run(self.run_id)
        self.writer = WarcWriter(
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
        )
        return resumed

    def _recover_run(self, run_id: int) -> None:
        """Recover with captures adopted into `run_id` (the run that wrote them)."""
        self.run_id = run_id
        self._history = self.manifest.has_captures_before(run_id)
        self._recover()

    def _recover(self) -> None:
        """Repair what a crash left: torn tails cut, captures the manifest lost (a file cut
        short by power loss) re-queued, captures it never recorded adopted, .open renamed."""
        recovery.remove_temporaries(self.cfg.site.output_dir)
        open_paths = recovery.open_files(self.warc_dir)
        for path in open_paths:
            recovery.cut_torn_tail(path)
        ends = self.manifest.committed_ends()
        for name, end in ends.items():
            size = _size(self.warc_dir / name) or _size(self.warc_dir / (name + OPEN_SUFFIX))
            if size < end:
                lost = self.manifest.rollback_past(self.run_id, name, size)
                log.warning("%s is shorter than the manifest says (%d < %d): %d captures "
                            "will be fetched again", name, size, end, len(lost))
        for path in open_paths:
            self._adopt_tail(path, ends.get(path.name[: -len(OPEN_SUFFIX)], 0))

    def _adopt_tail(self, path: Path, committed_end: int) -> None:
        """Commit the complete capture groups past the last commit, each exactly as the
        normal path would have; cut the file after the last one adopted, then close it."""
        final = path.name[: -len(OPEN_SUFFIX)]
        size = _size(path)
        found, good_end = recovery.scan_groups(path, min(committed_end, size), final)
        adopted = 0
        try:
            for f in found:
                if not self._adopt(f):  # then neither it nor what follows is kept
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
        os.replace(path, self.warc_dir / final)
        log.warning("closed %s left open by an earlier run (%d captures adopted)",
                    final, adopted)

    def _adopt(self, f: recovery.Found) -> bool:
        """Commit a capture group the manifest never recorded, with the row, links and
        outcome `_store` would have committed. False when that cannot be done exactly (its
        URL is not waiting in this run, or the record its revisit refers to is unknown)."""
        ex, revisit = f.exchange, f.revisit
        item = self.manifest.item_for(self.run_id, ex.url)
        original = (self.manifest.original_by_record(revisit.refers_to, revisit.payload_digest)
                    if item is not None and revisit is not None else None)
        if item is None or (revisit is not None and original is None):
            log.warning("cannot adopt the capture of %s at %s@%d; it will be fetched again",
                        ex.url, f.location.response.filename, f.location.response.offset)
            return False
        if crashpoints.hook is not None:
            crashpoints.label = "adopted " + history.capture_kind(ex, revisit, original,
                                                                  item.via, self.run_id)
        if item.via == "robots":  # stored out of band: no previous capture, no links
            self._commit(item, ex, f.location, None, revisit, original, links=(None, []))
            return True
        prev = self.manifest.previous_capture(item.id, self.run_id) if self._history else None
        stored = original if revisit is not None and revisit.profile != NOT_MODIFIED else None
        links = self.parsers.here(item, self._page(ex, prev, stored))
        self._commit(item, ex, f.location, self._http_error(ex), revisit, original, prev,
                     links=links)
        return True

    def _seeds(self) -> list[NewUrl]:
        seeds = []
        for raw in self.cfg.site.start_urls:
            url = normalize(raw, self.cfg.scope.ignore_query)
            seeds.append(NewUrl(url, site_key(url), 0, self.cfg.crawl.max_redirects, PAGE,
                                "start", "link"))
        return seeds

    def _end_files(self) -> None:
        if self.writer is not None:
            self.writer.close()
        lines = (index.capture_line(row) for row in self.manifest.captures())
        n = index.write_index(self.index_path, lines)
        log.info("wrote %s (%d lines)", self.index_path, n)
        crashpoints.reached("run:before-finish", "run")

    def _outcome(self) -> tuple[int, str]:
        assert self.frontier is not None
        if self._fatal:
            return ExitCode.INTERNAL, "interrupted"
        if self._interrupted:
            return ExitCode.INTERRUPTED, "interrupted"
        if self.frontier.limit_reached and self.manifest.count_pending(pages_only=True):
            return ExitCode.LIMIT, "limit"
        if self.manifest.url_states(self.run_id).get("failed"):
            return ExitCode.FAILED_URLS, "complete"
        return ExitCode.OK, "complete"

    def close(self) -> None:
        self.manifest.close()

    # -- workers ---------------------------------------------------------------------------
    async def _work(self, session: object) -> None:
        frontier = self.frontier
        assert frontier is not None
        while (item := await frontier.take()) is not None:
            handed_off = False
            try:
                with self._guarded(item):
                    handed_off = await self._process(session, item)
            finally:
                if not handed_off:
                    frontier.release(item)
                    if self.on_progress:
                        self.on_progress(self)

    @contextmanager
    def _guarded(self, item: UrlItem) -> Iterator[None]:
        """What happens to `item` when its fetch or storing fails."""
        try:
            yield
        except (StorageError, asyncio.CancelledError) as exc:
            self.manifest.unlease([item.id])  # not done: fetched again on resume
            if isinstance(exc, asyncio.CancelledError):
                raise
            self._fail_run(str(exc))
        except Exception as exc:  # a bad page never stops the crawl
            log.exception("internal error on %s", item.url)
            self.manifest.give_up(self.run_id, item, f"internal: {type(exc).__name__}")
            self.counters.failed += 1

    async def _process(self, session: object, item: UrlItem) -> bool:
        """Fetch `item`. A response to keep goes to a finishing task, and the worker moves
        on to its next request at once: the CPU work (links, WARC records, manifest) of up
        to `workers` responses waits its turn while `workers` requests are in flight.
        Returns whether it was handed off (the finishing task then releases `item`)."""
        if not await self._permitted(session, item):
            return False
        prev = (self.manifest.previous_capture(item.id, self.run_id) if self._history
                else None)
        try:
            ex = await fetch(session, item.url, self.limits,  # type: ignore[arg-type]
                             self._request_headers(item.url, prev))
        except FetchError as exc:
            self._retry_or_fail(item, str(exc), exc.retryable)
            return False
        handed_off = False
        try:
            last_try = item.tries + 1 >= self.cfg.crawl.max_tries
            error = self._http_error(ex)
            wait = self._host_feedback(item.site, ex)
            if error and not last_try:
                self._retry_or_fail(item, error, True, wait)
                return False
            await self._backlog.acquire()
            assert self.frontier is not None
            self.frontier.fetched(item)
            task = asyncio.create_task(self._finish(item, ex, error, prev))
            self._finishing.add(task)
            task.add_done_callback(functools.partial(self._finished, item, ex))
            handed_off = True
            return True
        finally:
            if not handed_off:
                ex.body.close()

    async def _finish(self, item: UrlItem, ex: Exchange, error: str | None,
                      prev: Previous | None) -> None:
        """Links first, then the records and the manifest commit with no await between."""
        with self._guarded(item):
            page = self._page(ex, prev)
            links = await self.parsers.discover(item, page)
            self._store(item, ex, error, prev, links)
            self._usage[item.site] = _plus(self._usage.get(item.site), ex.body_length)

    def _finished(self, item: UrlItem, ex: Exchange, task: asyncio.Task[None]) -> None:
        """After `_finish`, however it ended: also when it was cancelled before it began."""
        self._finishing.discard(task)
        ex.body.close()
        self._backlog.release()
        if task.cancelled():
            self.manifest.unlease([item.id])  # not stored: fetched again on resume
        assert self.frontier is not None
        self.frontier.release(item, slot_held=False)
        if self.on_progress:
            self.on_progress(self)

    def _request_headers(self, url: str, prev: Previous | None) -> dict[str, str]:
        return {**self.cfg.headers_for(self.scope.on_site(url)),
                **history.conditional_headers(prev)}

    async def _permitted(self, session: object, item: UrlItem) -> bool:
        """robots.txt and the per-host budgets, checked just before the fetch."""
        pages, nbytes = self._usage.get(item.site, (0, 0))
        rule = self.scope.budget.exceeded(pages, nbytes)
        if rule is None and self.cfg.scope.robots and not item.url.endswith("/robots.txt"):
            rules = await self.robots.rules_for(session, item.url)
            self.frontier_delay(item.site, rules)
            if not rules.allowed(item.url, self.cfg.crawl.user_agent):
                if rules.unreachable:  # try again when robots.txt may be back, max_tries times
                    wait = self.robots.cache.expires_in(robots_url(item.url))
                    self._retry_or_fail(item, f"robots.txt {rules.reason}", True, wait)
                    return False
                rule = ROBOTS_RULE
        if rule is not None:
            log.info("skipping %s (%s)", item.url, rule)
            self.manifest.skip(self.run_id, item, rule)
            return False
        return True

    def frontier_delay(self, site: str, rules: RobotsRules) -> None:
        delay = rules.crawl_delay(self.cfg.crawl.user_agent)
        if delay and self.frontier is not None:
            self.frontier.set_delay(
                site, host_delay(self.cfg.crawl.delay, delay, self.cfg.crawl.max_crawl_delay))

    def _host_feedback(self, site: str, ex: Exchange) -> float:
        """429/503 slow the whole host down (Retry-After honoured, clamped); any other
        answer resets its backoff. Returns the seconds the host is held back."""
        if ex.status not in BACKOFF_STATUSES:
            self._host_failures.pop(site, None)
            return 0.0
        failures = self._host_failures[site] = self._host_failures.get(site, 0) + 1
        retry_after = parse_retry_after(header_map(ex.response_headers).get("retry-after"),
                                        datetime.now(UTC), self.cfg.crawl.max_retry_after)
        wait = host_backoff(failures, retry_after, self.rng, base=self.backoff_base)
        log.warning("%s answered %d: no requests to it for %.1fs", site, ex.status, wait)
        if self.frontier is not None:
            self.frontier.hold(site, wait)
        return wait

    @staticmethod
    def _http_error(ex: Exchange) -> str | None:
        """A response that should be tried again (and counts as failed if it persists)."""
        if ex.status in RETRY_STATUSES:
            return f"HTTP {ex.status}"
        if ex.truncated == "disconnect":
            return "disconnect: body cut short"
        return None

    def _retry_or_fail(self, item: UrlItem, error: str, retryable: bool,
                       at_least: float = 0.0) -> None:
        tries = item.tries + 1
        if retryable and tries < self.cfg.crawl.max_tries:
            delay = max(backoff(tries, self.rng, self.backoff_base), at_least)
            log.info("retrying %s in %.1fs after %s (try %d of %d)",
                     item.url, delay, error, tries, self.cfg.crawl.max_tries)
            self.manifest.retry_later(self.run_id, item, error, time.time() + delay)
            self.counters.retried += 1
            self._heartbeat()
        else:
            log.warning("giving up on %s after %d tries: %s", item.url, tries, error)
            self.manifest.give_up(self.run_id, item, error)
            self.counters.failed += 1

    async def _fetch_robots(self, session: object, url: str) -> Exchange:
        return await fetch(session, url, self.limits,  # type: ignore[arg-type]
                           self.cfg.headers_for(self.scope.on_site(url)))

    def store_out_of_band(self, item: UrlItem, ex: Exchange) -> None:
        """Archive a fetch made outside the frontier (robots.txt): no links followed."""
        self._store(item, ex, None, None, (None, []))

    def _fail_run(self, message: str) -> None:
        if self._fatal is None:
            self._fatal = message
            log.error("%s; stopping (the run resumes with the next `mirror run`)", message)
            self.stop()

    def _store(self, item: UrlItem, ex: Exchange, error: str | None,
               prev: Previous | None, links: Links) -> None:
        """Durability order: WARC records appended and flushed, then one manifest commit.
        A payload already archived (304, or the same digest anywhere) becomes a revisit."""
        assert self.writer is not None
        same = (self.manifest.original_by_digest(ex.payload_digest, ex.status)
                if history.dedupable(ex) else None)
        revisit, original = history.choose_revisit(ex, prev, same)
        if crashpoints.hook is not None:
            crashpoints.label = history.capture_kind(ex, revisit, original, item.via,
                                                     self.run_id)
        try:
            loc = self.writer.write_capture(ex, revisit)
        except OSError as exc:
            raise StorageError(f"cannot write to the archive: {exc.strerror or exc}") from exc
        try:
            self._commit(item, ex, loc, error, revisit, original, prev, links=links)
        except ManifestWriteError as exc:
            self.writer.undo(loc)  # the manifest must never miss a record the WARC has
            raise StorageError(f"cannot update the manifest: {exc}") from exc

    def _commit(self, item: UrlItem, ex: Exchange, loc: CaptureLocation, error: str | None,
                revisit: Revisit | None = None, original: Original | None = None,
                prev: Previous | None = None, *, links: Links) -> None:
        """Record a stored capture and what it links to in one manifest transaction."""
        location, found = links
        headers = header_map(ex.response_headers)
        row = _capture_row(ex, loc, headers, location)
        if revisit is not None and original is not None:
            row = replace(row, original_id=original.id, record_type=(
                "not-modified" if revisit.profile == NOT_MODIFIED else "revisit"))
        if row.record_type == "not-modified" and original is not None and prev is not None:
            # the validators of the representation the 304 confirmed: what the archive holds
            # (the 304's own headers are not stored: its revisit record has an empty block)
            row = replace(row, mime=original.mime, etag=prev.etag,
                          last_modified=prev.last_modified)
        crashpoints.reached("commit:before")
        self.manifest.commit_capture(self.run_id, item, row, found, failed_reason=error)
        crashpoints.reached("commit:after")
        self._heartbeat()
        log.info("%d %s (%d bytes)", ex.status, item.url, ex.body_length)
        if found and self.frontier is not None:
            self.frontier.notify()
        if error:
            log.warning("giving up on %s: %s", item.url, error)
            self.counters.failed += 1
        else:
            self.counters.done += 1
        self.counters.bytes += ex.body_length

    def warc_path(self, filename: str) -> Path:
        """A WARC file by its final name, or still .open (while recovery adopts its tail)."""
        path = self.warc_dir / filename
        return path if path.exists() else path.with_name(filename + OPEN_SUFFIX)

    def _heartbeat(self, force: bool = False) -> None:
        """Record, about once a second, that this process is still working on the run."""
        now = time.monotonic()
        if self._session is not None and (force or now - self._alive >= 1.0):
            self._alive = now
            self.manifest.touch_session(self._session, time.time())

    def _page(self, ex: Exchange, prev: Previous | None, stored: Original | None = None) -> Page:
        """What link discovery reads: the response, or for a 304 that confirms an earlier
        capture, the copy stored then (so discovery goes on through unchanged pages). An
        identical-payload revisit read back from the WARC has its payload in `stored`."""
        confirmed = history.not_modified(ex, prev)
        if confirmed is not None:
            raw = warcread.read_raw(self.warc_path(confirmed.filename), confirmed.offset)
            status, headers = raw.status or 200, header_map(raw.headers or ())
            wanted = self.discovery.wants_body(status, headers, None)
            return Page(status, headers, raw.payload if wanted else None, None)
        headers = header_map(ex.response_headers)
        body = None
        if self.discovery.wants_body(ex.status, headers, ex.truncated):
            if stored is not None:
                body = warcread.read_raw(self.warc_path(stored.filename), stored.offset).payload
            else:
                ex.body.seek(0)
                body = ex.body.read()
        return Page(ex.status, headers, body, ex.truncated)


def _plus(usage: tuple[int, int] | None, nbytes: int) -> tuple[int, int]:
    pages, total = usage or (0, 0)
    return pages + 1, total + nbytes


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _capture_row(
    ex: Exchange, loc: CaptureLocation, headers: dict[str, str], location: str | None
) -> CaptureRow:
    return CaptureRow(
        warc_date=loc.warc_date,
        record_id=loc.record_id,
        filename=loc.response.filename,
        offset=loc.response.offset,
        length=loc.response.length,
        req_offset=loc.request.offset,
        req_length=loc.request.length,
        status=ex.status,
        mime=mime_of(headers.get("content-type")) or "",
        payload_digest=loc.payload_digest,
        payload_length=ex.body_length,
        etag=headers.get("etag"),
        last_modified=headers.get("last-modified"),
        location=location,
        truncated=ex.truncated,
    )

