"""The run's fetching: worker tasks take URLs from the frontier, check robots.txt and
the budgets, fetch, and hand each response to a finishing task (links, then the records,
then the group commit), so that a worker's next request starts at once."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mirror import crashpoints
from mirror.archive.warcwriter import Exchange
from mirror.config import SiteConfig
from mirror.crawl import history, requisites
from mirror.crawl.browserfetch import BrowserFetcher, PageRequests, document_answer
from mirror.crawl.discover import MAX_PARSE_BYTES, is_sitemap
from mirror.crawl.fetch import FetchError, Limits, fetch
from mirror.crawl.frontier import Frontier
from mirror.crawl.learned import Learner
from mirror.crawl.login import LoginError, LoginKeeper
from mirror.crawl.outcomes import UrlOutcomes
from mirror.crawl.parsehelper import Page
from mirror.crawl.parsepool import ParserPool, parse_cut
from mirror.crawl.politeness import host_delay, http_error
from mirror.crawl.render import Renderer, with_render
from mirror.crawl.robots import ROBOTS_RULE, RobotsRules, robots_url
from mirror.crawl.robotsgate import RobotsGate, RunRobots
from mirror.crawl.scope import PAGE, Scope
from mirror.crawl.sharedfrontier import SharedFrontier
from mirror.crawl.sitemapbudget import SitemapBudget
from mirror.crawl.store import CaptureStore, StorageError, warc_path
from mirror.manifest.db import ManifestWriteError
from mirror.manifest.writer import DatabaseGone, Manifest, Previous, UrlItem
from mirror.model import NOTHING, SITEMAP_BUDGET, Discovered, ExitCode, HostLease

if TYPE_CHECKING:
    from mirror.browser import Rendered
from mirror.web.urls import site_key

log = logging.getLogger(__name__)


class UrlWork:
    """A begun run's URLs, from the frontier to the store: what the crawler's worker tasks
    run (`work`), and the finishing tasks they leave (`finishing`, `drain`)."""

    def __init__(self, cfg: SiteConfig, manifest: Manifest, run_id: int, store: CaptureStore,
                 frontier: Frontier | SharedFrontier, outcomes: UrlOutcomes, *,
                 scope: Scope, limits: Limits, parsers: ParserPool, learner: Learner | None,
                 login: LoginKeeper | None,
                 fail_run: Callable[[str, ExitCode], None],
                 lease_of: Callable[[UrlItem], HostLease | None],
                 robots_lease: Callable[[str], HostLease | None] | None,
                 renderer: Renderer | None = None) -> None:
        self.cfg, self.manifest, self.run_id = cfg, manifest, run_id
        self.store, self.frontier, self.outcomes = store, frontier, outcomes
        self.parsers, self.learner, self.login = parsers, learner, login
        self.fail_run, self.lease_of = fail_run, lease_of
        self.scope, self.limits = scope, limits
        self.sitemap_budget = SitemapBudget(manifest, cfg.scope.max_sitemap_urls)
        self.robots = RobotsGate(self._fetch_robots, RunRobots(
            manifest, lambda: run_id, functools.partial(warc_path, store.warc_dir),
            self.store_out_of_band, parsers.discover_in_process, robots_lease))
        self.finishing: set[asyncio.Task[None]] = set()  # responses being stored
        # fetching or storing a sitemap: abandoned at once on a stop (fetched again on resume)
        self.sitemap_tasks: set[asyncio.Task[None]] = set()
        # responses fetched and waiting to be stored, at most one per worker
        self._backlog = asyncio.Semaphore(cfg.crawl.workers)
        self._usage = manifest.counts.host_usage(run_id)  # site -> (URLs, bytes) this run
        self.renderer = renderer  # [browser]: pages loaded in a browser before they are stored
        self.browser: BrowserFetcher | None = None  # its requests, once the session is known

    def stop(self) -> None:
        for task in self.sitemap_tasks:
            task.cancel()

    async def drain(self) -> None:
        while self.finishing:  # responses still being stored
            await asyncio.wait(set(self.finishing))

    def unlease(self, item: UrlItem) -> None:
        self.manifest.urls.unlease([item.id], lease=self.lease_of(item))

    async def work(self, session: object) -> None:
        """One worker task: URLs from the frontier until there is none."""
        frontier = self.frontier
        if self.renderer is not None and self.browser is None:
            self.browser = BrowserFetcher(self, session)
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
        self.sitemap_tasks.add(task)
        try:
            yield
        finally:
            self.sitemap_tasks.discard(task)

    @contextmanager
    def _guarded(self, item: UrlItem) -> Iterator[None]:
        """What happens to `item` when its fetch or storing fails."""
        try:
            yield
        except DatabaseGone as exc:  # nothing more can be written: the run stops
            self.fail_run(str(exc), exc.exit_code)
        except asyncio.CancelledError:
            self.unlease(item)  # not done: fetched again on resume
            raise
        except StorageError as exc:
            self.fail_run(str(exc), exc.exit_code)  # DISK_FULL for a full disk
            try:
                self.unlease(item)  # not done: fetched again on resume
            except ManifestWriteError:  # the disk is still full: resume takes it back
                log.warning("%s left leased: the next run fetches it", item.url)
        except Exception as exc:  # a bad page never stops the crawl
            log.exception("internal error on %s", item.url)
            self.manifest.urls.give_up(self.run_id, item, f"internal: {type(exc).__name__}",
                                  lease=self.lease_of(item))
            self.outcomes.counters.failed += 1

    async def _process(self, session: object, item: UrlItem) -> bool:
        """Fetch `item`. A response to keep goes to a finishing task, and the worker moves
        on to its next request at once: the CPU work (links, WARC records, manifest) of up
        to `workers` responses waits its turn while `workers` requests are in flight.
        Returns whether it was handed off (the finishing task then releases `item`)."""
        if self.outcomes.fail_if_dead(item) or not await self._permitted(session, item):
            return False
        prev = self.store.previous(self.run_id, item)
        if not await self.frontier.turn(item.site):
            return False  # a shared run's lease on the host is lost: not fetched here
        try:
            ex = await self.fetch_item(session, item, prev)
        except LoginError as exc:  # logging in again failed: stop, resume later
            self.unlease(item)
            self.fail_run(str(exc), ExitCode.USAGE)
            return False
        except FetchError as exc:
            outcomes = self.outcomes
            if not outcomes.host_failed(item.site, exc) or not outcomes.fail_if_dead(item):
                outcomes.retry_or_fail(item, str(exc), exc.retryable)
            return False
        self.outcomes.dead.answered(item.site)
        handed_off = False
        try:
            last_try = item.tries + 1 >= self.cfg.crawl.max_tries
            error = http_error(ex.status, ex.truncated)
            wait = self.outcomes.host_feedback(item.site, ex)
            if error and not last_try:
                self.outcomes.retry_or_fail(item, error, True, wait)
                return False
            await self._backlog.acquire()
            self.frontier.fetched(item)
            task = asyncio.create_task(self._finish(item, ex, error, prev))
            self.finishing.add(task)
            if is_sitemap(item):
                self.sitemap_tasks.add(task)
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
            page, links = await self.discovered(item, ex, prev)
            rendered = None
            if self.renderer is not None and self.renderer.wants(page, links):
                rendered, links = await self._render(item, ex, page, links)
            self._store(item, ex, error, prev, links, rendered)
            self._usage[item.site] = _plus(self._usage.get(item.site), ex.body_length)

    async def discovered(self, item: UrlItem, ex: Exchange, prev: Previous | None
                         ) -> tuple[Page, Discovered]:
        """What a response links to, as the run keeps it (the sitemap budget, the requisite
        depth, the learner): for a URL of the frontier and for a browser's requisite alike
        (a stylesheet the browser fetched still brings its @import and url() references)."""
        async with self.parsers.room(min(ex.body_length, MAX_PARSE_BYTES)):
            page = self.store.page(ex, prev, item=item)
            links = parse_cut(await self.parsers.discover(item, page), page, ex)
        if is_sitemap(item):
            links = self.sitemap_budget.take(self.run_id, item, links)
        links = requisites.bounded(
            links, item, functools.partial(self.manifest.urls.requisite_chain, item.id),
            self.cfg.scope.max_requisite_depth)
        if self.learner is not None:
            links = links._replace(links=self.learner.sift(links.links))
        return page, links

    async def _render(self, item: UrlItem, ex: Exchange, page: Page, links: Discovered
                      ) -> tuple[Rendered | None, Discovered]:
        """The page loaded in the browser (crawl/render.py): its rendered links join its
        links; a failed render leaves the page as fetched, with the reason as its note. Its
        backlog place is free meanwhile: the workers go on with the plain pages."""
        assert self.renderer is not None and self.browser is not None
        requests = PageRequests(item, document_answer(ex, page))
        crashpoints.reached("render:before", "page")
        self._backlog.release()
        try:
            rendered = await self.renderer.render(self.browser, requests)
        finally:
            await self._backlog.acquire()
        crashpoints.reached("render:after", "page")
        if isinstance(rendered, str):
            return None, links._replace(note=rendered)
        return rendered, with_render(links, rendered, list(requests.used.values()),
                                     self.parsers.discovery.decide, item)

    def _finished(self, item: UrlItem, ex: Exchange, task: asyncio.Task[None]) -> None:
        """After `_finish`, however it ended: also when it was cancelled before it began."""
        self.finishing.discard(task)
        self.sitemap_tasks.discard(task)
        ex.body.close()
        self._backlog.release()
        if task.cancelled():
            self.unlease(item)  # not stored: fetched again on resume
        self.frontier.release(item, slot_held=False)

    async def fetch_item(self, session: object, item: UrlItem,
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
            self._frontier_delay(item.site, rules)
            if not rules.allowed(item.url, self.cfg.crawl.user_agent):
                if rules.unreachable and self.outcomes.fail_if_dead(item):
                    return False
                if rules.unreachable:  # try again when robots.txt may be back, max_tries times
                    wait = self.robots.cache.expires_in(robots_url(item.url))
                    self.outcomes.retry_or_fail(item, f"robots.txt {rules.reason}", True, wait)
                    return False
                rule = ROBOTS_RULE
        if rule is not None:
            log.info("skipping %s (%s)", item.url, rule)
            self.manifest.urls.skip(self.run_id, item, rule, lease=self.lease_of(item))
            return False
        return True

    def _frontier_delay(self, site: str, rules: RobotsRules) -> None:
        delay = rules.crawl_delay(self.cfg.crawl.user_agent)
        if delay:
            self.frontier.set_delay(
                site, host_delay(self.cfg.crawl.delay, delay, self.cfg.crawl.max_crawl_delay))

    async def _fetch_robots(self, session: object, url: str) -> Exchange:
        """robots.txt is a request to its host like any: its turn under `delay`, and its
        connection failures count against the host."""
        site = site_key(url)
        await self.frontier.turn(site)
        try:
            ex = await fetch(session, url, self.limits,  # type: ignore[arg-type]
                             self.cfg.headers_for(self.scope.on_site(url)))
        except FetchError as exc:
            self.outcomes.host_failed(site, exc, first=True)
            raise
        self.outcomes.dead.answered(site)
        return ex

    def store_out_of_band(self, item: UrlItem, ex: Exchange,
                          found: Discovered = NOTHING) -> None:
        """Archive a fetch made outside the frontier (robots.txt), with what it links to
        (the sitemaps a robots.txt names), if anything. It is committed at once: the robots
        gate looks for it in the manifest (RunRobots.lookup), and sitemaps are new URLs."""
        self._store(item, ex, None, None, found)
        self.store.commit_group()

    def _store(self, item: UrlItem, ex: Exchange, error: str | None,
               prev: Previous | None, links: Discovered,
               rendered: Rendered | None = None) -> None:
        """The capture joins the store's group; `_stored` follows when it is committed."""
        self.store.store(self.run_id, item, ex, error, prev, links, rendered=rendered,
                         browser=self.renderer.version or "" if self.renderer else "")

def _plus(usage: tuple[int, int] | None, nbytes: int) -> tuple[int, int]:
    pages, total = usage or (0, 0)
    return pages + 1, total + nbytes
