"""The frontier of a shared run (several workers): hosts are leased, not URLs.

A worker leases host slots from the manifest (SharedRun.lease_hosts: SKIP LOCKED on
PostgreSQL, database time), then URLs of each host under its lease, fetches them one at a
time per slot with the host's delay between request starts, and releases the slot with
`next_fetch_at = now + delay` (database time), so that the next request to the host, by
whichever worker, starts at least `delay` after this one's. A 429/503 blocks the host for
every worker (block_host). Before each request the lease must outlast the fetch's timeout
by MARGIN seconds, else it is renewed; a lease found lost (another worker took the host
over after it expired) is dropped at once: its URLs were sent back to pending by the
taker, and whatever this worker still stores under it fails its fenced commit
(CaptureStore cuts the record off again). A worker leases at most its fair share of the
hosts (hosts with work / live workers), and every SLICE URLs it gives a slot up if it holds
more than that share now (a worker joined), so that the hosts spread over the workers.
The run is over when no URL of it is pending or leased, by anyone (a killed worker's lease
expires and its URLs are taken over).

[scope] max_pages is the run's budget, not each worker's: a page is taken when any worker
leases it (SharedRun.lease_urls counts the run's pages done, failed or leased, under a
lock), and given back when its lease is. Once the budget is spent, only requisites are
leased, and the run is over when nothing but pending pages is left (they wait for the next
run: state limit, exit 4).

The lease log (INFO, this module's logger) is what tests check the "one worker per host
slot" promise against: `lease`, `renew` and `release` lines with database times in ms.
It offers Frontier's interface (take, fetched, release, turn, hold, ...), plus lease_of.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from mirror import crashpoints
from mirror.crawl.frontier import Waits
from mirror.manifest.db import ManifestWriteError
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import HostLease

log = logging.getLogger(__name__)

#: seconds a lease must outlast a request's timeout for the request to start under it
MARGIN = 2.0
#: seconds a lease must have left beyond MARGIN at the check before a send (else it is
#: renewed), so that only a stall of this long between the check and the send (this
#: process frozen) makes the worker look again
RECHECK = 1.0
#: URLs fetched from a slot under one lease before this worker looks whether it holds
#: more than its fair share of the hosts (then it releases the slot for another worker)
SLICE = 64
#: URLs leased under a host lease at a time
URL_BATCH = 16
#: seconds between two looks at the manifest for hosts to lease while there are none
POLL_EVERY = 0.2
#: longest sleep while waiting for something to change
MAX_WAIT = 1.0


def min_ttl(fetch_timeout: float) -> float:
    """The shortest lease a request of `fetch_timeout` seconds can start under."""
    return fetch_timeout + MARGIN + 1.0


def default_ttl(fetch_timeout: float) -> float:
    """A lease's length: a request may start under it for 30 s before it is renewed."""
    return fetch_timeout + MARGIN + 30.0


@dataclass
class _Held:
    """A host slot this worker holds."""

    lease: HostLease
    until: float  # clock() when the lease ends, as reckoned here (early rather than late)
    queue: deque[UrlItem] = field(default_factory=deque)
    busy: bool = False  # a request to the slot is under way
    in_flight: int = 0  # URLs taken and not released yet (fetching, or being stored)
    taken: int = 0  # URLs taken under this lease
    dry: bool = False  # no more URLs under this lease: release it once nothing is in flight
    lost: bool = False  # another worker has the host now

    def line(self) -> str:
        lease = self.lease
        return f"site={lease.site} slot={lease.slot} epoch={lease.epoch} owner={lease.owner}"


def checked_before_send(manifest: Manifest, held: _Held, need: float, ttl: float,
                        clock: Callable[[], float]) -> bool:
    """Right before a request leaves: the lease outlasts it by `need` seconds by the
    database's clock (lease_left; renewed when it would not, by RECHECK), and no more time
    passed since that answer than the lease can spare (this process was frozen after the
    check: look again, and find the lease lost if another worker took the host meanwhile).
    False: lost."""
    while True:
        asked = clock()
        left = manifest.sharedrun.lease_left(held.lease)
        if left is not None and left < need + RECHECK:
            renewed = manifest.sharedrun.renew_host(held.lease, ttl)
            left = None if renewed is None else ttl
            if renewed is not None:
                held.lease = renewed
        if left is None:
            return False
        held.until = asked + left
        crashpoints.reached("send:checked")
        if clock() - asked <= left - need:
            return True
        log.warning("site=%s slot=%d epoch=%d: %.1f s passed since the lease was checked "
                    "(frozen?): checked again", held.lease.site, held.lease.slot,
                    held.lease.epoch, clock() - asked)


class SharedFrontier(Waits):
    """Hands URLs to this worker's fetchers from the host slots it leases."""

    def __init__(
        self,
        manifest: Manifest,
        run_id: int,
        owner: str,
        *,
        max_hosts: int,
        delay: float,
        ttl: float,
        fetch_timeout: float,
        max_pages: int = 0,
        pages_done: int = 0,
        clock: Callable[[], float] = time.monotonic,
        on_dry: Callable[[], bool] = lambda: False,
    ) -> None:
        if ttl < min_ttl(fetch_timeout):
            raise ValueError(f"a lease of {ttl:g} s is too short for a request timeout of "
                             f"{fetch_timeout:g} s (at least {min_ttl(fetch_timeout):g})")
        super().__init__(manifest, delay, max_pages, pages_done, clock, on_dry)
        self.run_id = run_id
        # the run's page budget is spent (as last looked: _poll_due)
        self._spent = 0 < max_pages <= pages_done
        self.owner = owner
        self.max_hosts = max_hosts
        self.ttl = ttl
        self.fetch_timeout = fetch_timeout
        self._held: dict[int, _Held] = {}  # host row id -> the slot
        self._by_item: dict[int, _Held] = {}  # url id -> the slot it was taken from
        self._last_poll = -POLL_EVERY
        self._outages = 0  # the database outages whose leases were re-validated

    # -- Frontier's interface --------------------------------------------------------------
    @property
    def limit_reached(self) -> bool:
        """The run's page budget is spent, by all its workers together."""
        return self._spent

    @property
    def queued(self) -> int:
        return sum(len(h.queue) for h in self._held.values())

    async def take(self) -> UrlItem | None:
        """The next URL of a held slot that is free and due; None when the run is over
        (or this worker stops)."""
        while not self._stopping and not self._finished:
            self._revalidate()
            self._tidy()
            item = self._pick()
            if item is not None:
                return item
            polled = self._poll_due()
            if polled and self._lease_more():
                continue
            if self.on_dry():
                continue
            if polled and not self._held and self.in_flight == 0 \
                    and self.manifest.sharedrun.unfinished(self.run_id, pages=not self._spent) == 0:
                self._finished = True
                self._notify()
                break
            await self._wait(self._next_wakeup())
        return None

    def fetched(self, item: UrlItem) -> None:
        """The response to `item` is in: its slot is free for the next request."""
        self._by_item[item.id].busy = False
        self._notify()

    def release(self, item: UrlItem, *, slot_held: bool = True) -> None:
        """This worker is done with `item` (stored, failed, retried or given back)."""
        held = self._by_item.pop(item.id)
        if slot_held:
            held.busy = False
        held.in_flight -= 1
        self.in_flight -= 1
        self._notify()

    async def turn(self, site: str) -> bool:
        """Wait until a request to `site` may start (its delay after the last start); then
        whether it may: False when this worker's lease on the host is lost meanwhile (or
        cannot be renewed to outlast the request)."""
        def lasts() -> bool:
            held = [h for h in self._held.values() if h.lease.site == site and h.busy]
            return bool(held) and all(self._lasts(h) and self._checked(h) for h in held)
        return await self._turn(site, lasts)

    def hold(self, site: str, seconds: float) -> None:
        """No request to `site` for `seconds`, by any worker (429/503, Retry-After): the
        host is blocked in the manifest and this worker gives its slots up."""
        self._hold(site, seconds)
        self.manifest.sharedrun.block_host(site, seconds)
        for held in self._held.values():
            if held.lease.site == site:
                self._give_back(held)
        self._notify()

    def held_back(self) -> int:
        return self._held_back({h.lease.site for h in self._held.values()
                                if self._delays.get(h.lease.site, self.delay) > self.delay})

    def stop(self) -> None:
        """Stop handing out URLs: the buffered ones go back to pending, and each slot is
        released once nothing taken from it is in flight."""
        self._stopping = True
        for held in self._held.values():
            self._give_back(held)
        self._tidy()
        self._notify()

    def close(self) -> None:
        """Release every slot still held (the run's end, or its stop)."""
        for held in self._held.values():
            self._give_back(held)
            held.in_flight = 0
        self._tidy()

    def lease_of(self, item: UrlItem) -> HostLease | None:
        """The lease `item` was taken under (what its outcome is fenced by)."""
        held = self._by_item.get(item.id)
        return held.lease if held is not None else None

    def lease_for(self, site: str) -> HostLease | None:
        """The lease this worker holds on `site`, which robots.txt is fetched and fenced
        under (also one found lost since: what is written under it is then refused)."""
        for held in self._held.values():
            if held.lease.site == site:
                return held.lease
        return None

    # -- internals -------------------------------------------------------------------------
    def _pick(self) -> UrlItem | None:
        now = self.clock()
        for held in list(self._held.values()):
            site = held.lease.site
            if held.busy or held.lost or self._next_start.get(site, 0.0) > now:
                continue
            if not held.queue and not held.dry:
                self._more_urls(held)
            if not held.queue or not self._lasts(held):
                continue
            item = held.queue.popleft()  # within the page budget: lease_urls saw to it
            held.busy = True
            held.in_flight += 1
            held.taken += 1
            self._by_item[item.id] = held
            self.in_flight += 1
            return item
        return None

    def _more_urls(self, held: _Held) -> None:
        if self._stopping:
            held.dry = True
            return
        if held.taken >= SLICE:  # given up for another worker only beyond a fair share
            if len(self._held) > self._fair_share():
                held.dry = True
                return
            held.taken = 0
        items = self.manifest.sharedrun.lease_urls(
            held.lease, URL_BATCH, (self.run_id, self.max_pages) if self.max_pages else None)
        held.queue.extend(items)
        if not items:
            held.dry = True

    def _lasts(self, held: _Held) -> bool:
        """Whether a request may start under the slot's lease now: it outlasts the
        request's timeout, or was renewed to. A lease found lost is given up."""
        if held.lost:
            return False
        now = self.clock()
        if held.until - now >= self.fetch_timeout + MARGIN:
            return True
        renewed = self.manifest.sharedrun.renew_host(held.lease, self.ttl)
        if renewed is None:
            self._mark_lost(held)
            return False
        held.lease = renewed
        held.until = now + self.ttl
        log.info("renew %s until=%d", held.line(), renewed.until)
        return True

    def _checked(self, held: _Held) -> bool:
        if checked_before_send(self.manifest, held, self.fetch_timeout + MARGIN, self.ttl,
                               self.clock):
            return True
        self._mark_lost(held)
        return False

    def _revalidate(self) -> None:
        """After the database connection was lost and made again: each held lease renewed
        (kept), or found lost (taken over by another worker meanwhile: given up, and what
        is still stored under it is refused by its fenced commit)."""
        outages = self.manifest.sql.outages
        if len(outages) == self._outages:
            return
        self._outages = len(outages)
        kept = lost = 0
        for held in self._held.values():
            if held.lost:
                continue
            before = self.clock()
            renewed = self.manifest.sharedrun.renew_host(held.lease, self.ttl)
            if renewed is None:
                self._mark_lost(held)
                lost += 1
            else:
                held.lease, held.until = renewed, before + self.ttl
                kept += 1
        last = outages[-1]
        log.warning("database connection lost: %s; reconnected after %.1f s; leases "
                    "re-validated: %d kept, %d lost", last.reason, last.seconds, kept, lost)

    def _mark_lost(self, held: _Held) -> None:
        log.warning("lost site=%s slot=%d epoch=%d owner=%s: another worker has the host now",
                    held.lease.site, held.lease.slot, held.lease.epoch, held.lease.owner)
        held.lost = True
        held.queue.clear()  # the worker that took the host over re-queued them
        held.dry = True

    def _give_back(self, held: _Held) -> None:
        """No more URLs under this lease: those buffered go back to pending. When the
        database cannot take that (it is gone: the run is stopping), they stay leased and
        return to pending when the lease expires; nothing is lost."""
        if held.queue and not held.lost:
            try:
                self.manifest.urls.unlease([item.id for item in held.queue], lease=held.lease)
            except ManifestWriteError:
                log.warning("%d URLs of site=%s left under this worker's lease (the database "
                            "does not answer): they are fetched again once it expires",
                            len(held.queue), held.lease.site)
        held.queue.clear()
        held.dry = True

    def _tidy(self) -> None:
        """Release the slots with nothing more to do and nothing in flight."""
        for host_id, held in list(self._held.items()):
            if not (held.dry and not held.queue and held.in_flight <= 0):
                continue
            del self._held[host_id]
            if held.lost:
                continue
            site = held.lease.site
            delay = max(self._delays.get(site, self.delay),
                        self._next_start.get(site, 0.0) - self.clock())
            try:
                at = self.manifest.sharedrun.release_host(held.lease, max(delay, 0.0))
            except ManifestWriteError:
                log.warning("site=%s slot=%d kept until its lease expires (the database does "
                            "not answer)", site, held.lease.slot)
                continue
            # a look for hosts again once this one is due (another worker may take it)
            self._last_poll = min(self._last_poll, self.clock() - POLL_EVERY + delay)
            if at is None:
                log.warning("lost site=%s slot=%d epoch=%d owner=%s: expired before its "
                            "release", site, held.lease.slot, held.lease.epoch,
                            held.lease.owner)
            else:
                log.info("release %s at=%d", held.line(), at)

    def _poll_due(self) -> bool:
        """At most every POLL_EVERY seconds, a look at the manifest for more to do (and
        whether the run's page budget is spent)."""
        now = self.clock()
        if now - self._last_poll >= POLL_EVERY:
            self._last_poll = now
            if self.max_pages:
                self._spent = self.manifest.sharedrun.pages_left(self.run_id, self.max_pages) == 0
            return True
        return False

    def _fair_share(self) -> int:
        return self.manifest.sharedrun.fair_share(self.run_id, self.ttl, pages=not self._spent)

    def _lease_more(self) -> bool:
        """Lease more host slots while this worker holds fewer than max_hosts."""
        if self._stopping:
            return False
        want = min(self.max_hosts, self._fair_share()) - len(self._held)
        if want <= 0:
            return False
        before = self.clock()
        leases = self.manifest.sharedrun.lease_hosts(self.owner, want, self.ttl,
                                                     pages=not self._spent)
        for lease in leases:
            held = _Held(lease, before + (lease.until - lease.acquired) / 1000)
            self._held[lease.host_id] = held
            log.info("lease %s taken=%d until=%d", held.line(), lease.acquired, lease.until)
            crashpoints.reached("lease:taken")
        return bool(leases)

    def _next_wakeup(self) -> float:
        now = self.clock()
        waits = [self._next_start.get(h.lease.site, 0.0) - now for h in self._held.values()
                 if h.queue and not h.busy]
        waits.append(self._last_poll + POLL_EVERY - now)
        return min([MAX_WAIT, *[max(w, 0.001) for w in waits]])
