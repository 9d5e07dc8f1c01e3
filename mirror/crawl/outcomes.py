"""What becomes of a URL whose fetch failed: tried again later (backoff within max_tries and
max_retry_time) or given up; and of its host: held back after a 429/503, failed at once
once it is known to be unreachable."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mirror.archive.warcwriter import Exchange
from mirror.config import SiteConfig
from mirror.crawl.fetch import FetchError
from mirror.crawl.frontier import Frontier
from mirror.crawl.politeness import (
    SOFT_FAILURES,
    DeadHosts,
    HostBackoffs,
    host_failure,
    out_of_time,
    retry_delay,
)
from mirror.crawl.sharedfrontier import SharedFrontier
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import UNREACHABLE, HostLease, Progress
from mirror.web.http import header_map

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


class UrlOutcomes:
    """The run's failed fetches and unwell hosts, recorded in the manifest under each URL's
    host lease (`lease_of`), counted in `counters`."""

    def __init__(self, cfg: SiteConfig, manifest: Manifest, run_id: int,
                 frontier: Frontier | SharedFrontier, counters: Counters, *,
                 rng: random.Random, backoff_base: float,
                 lease_of: Callable[[UrlItem], HostLease | None],
                 heartbeat: Callable[[], None]) -> None:
        self.cfg, self.manifest, self.run_id = cfg, manifest, run_id
        self.frontier, self.counters = frontier, counters
        self.rng, self.backoff_base = rng, backoff_base
        self.lease_of, self.heartbeat = lease_of, heartbeat
        self.backoffs = HostBackoffs(rng, backoff_base, cfg.crawl.max_retry_after)
        self.dead = DeadHosts(cfg.crawl.dead_host_after)
        # url id -> when it first failed in this process (the retry budget runs from there)
        self.failing_since: dict[int, float] = {}

    def host_feedback(self, site: str, ex: Exchange) -> float:
        """429/503 slow the whole host down; returns the seconds it is held back."""
        wait = self.backoffs.answer(site, ex.status, header_map(ex.response_headers).get(
            "retry-after"), datetime.now(UTC))
        if not wait:
            return 0.0
        log.warning("%s answered %d: no requests to it for %.1fs", site, ex.status, wait)
        self.frontier.hold(site, wait)
        return wait

    def retry_or_fail(self, item: UrlItem, error: str, retryable: bool,
                      at_least: float = 0.0) -> None:
        tries = item.tries + 1
        delay = retry_delay(tries, self.cfg.crawl.max_tries, retryable, self.rng,
                            self.backoff_base, at_least)
        now = time.monotonic()
        since = self.failing_since.setdefault(item.id, now)
        if delay is not None and out_of_time(since, now, delay, self.cfg.crawl.max_retry_time):
            error, delay = f"{error} (retries would outlast max_retry_time)", None
        if delay is not None:
            log.info("retrying %s in %.1fs after %s (try %d of %d)",
                     item.url, delay, error, tries, self.cfg.crawl.max_tries)
            self.manifest.urls.retry_later(self.run_id, item, error, delay,
                                      lease=self.lease_of(item))
            self.counters.retried += 1
            self.heartbeat()
        else:
            log.warning("giving up on %s after %d tries: %s", item.url, tries, error)
            self.give_up(item, error)

    def give_up(self, item: UrlItem, error: str) -> None:
        self.failing_since.pop(item.id, None)
        self.manifest.urls.give_up(self.run_id, item, error, lease=self.lease_of(item))
        self.counters.failed += 1

    def host_failed(self, site: str, exc: FetchError, *, first: bool = False) -> bool:
        """Count a fetch error against its host; True when it says the host is unreachable.
        A reset counts a third, as live hosts drop connections now and then, except on a
        `first` request (robots.txt), which a host that serves anything answers."""
        reason = host_failure(exc.kind, str(exc.args[0]))
        if reason is None:
            return False
        known = self.dead.reason(site) is not None
        soft = exc.kind in SOFT_FAILURES and not first
        if self.dead.failed(site, reason, soft) and not known:
            log.warning("%s is unreachable (%s): its other URLs fail at once", site, reason)
        return True

    def fail_if_dead(self, item: UrlItem) -> bool:
        """Fail `item` at once when its host is known to be unreachable."""
        reason = self.dead.reason(item.site)
        if reason is None:
            return False
        log.info("not fetching %s: host unreachable (%s)", item.url, reason)
        self.give_up(item, f"{UNREACHABLE}: {reason}")
        return True
