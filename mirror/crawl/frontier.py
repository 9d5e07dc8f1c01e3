"""Frontier: per-host slots over URLs leased from the manifest, with concurrency and delay."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

from mirror.crawl.scope import PAGE
from mirror.manifest.writer import Manifest, UrlItem

#: most URLs of one host held in memory; the rest stay pending on disk
HOST_BUFFER = 256
#: longest sleep while waiting for something to change (a cheap safety net)
MAX_WAIT = 1.0
REFILL_EVERY = 0.1


class Waits:
    """What both frontiers share: the page budget, per-host delays and holds, and waiting
    (bounded in time) until something changes: a slot freed, new URLs."""

    _changed: asyncio.Future[None] | None = None

    def __init__(self, manifest: Manifest, delay: float, max_pages: int, pages_done: int,
                 clock: Callable[[], float], on_dry: Callable[[], bool]) -> None:
        self.manifest = manifest
        self.delay = delay
        self.max_pages = max_pages
        self.pages_taken = pages_done
        self.clock = clock
        # commits the captures stored but not yet committed (their new URLs are not in
        # the manifest until then); True when there were any
        self.on_dry = on_dry
        self._next_start: dict[str, float] = {}  # site -> clock() the next request may start
        self._delays: dict[str, float] = {}  # per-host delay (robots.txt Crawl-delay)
        self._holds: dict[str, float] = {}  # site -> clock() its 429/503 hold ends
        self.in_flight = 0
        self._stopping = False
        self._finished = False

    def set_delay(self, site: str, seconds: float) -> None:
        """Seconds between request starts to `site` from now on (at least the configured)."""
        self._delays[site] = max(seconds, self.delay)

    def _hold(self, site: str, seconds: float) -> None:
        """No request starts to `site` for `seconds` in this process."""
        until = self.clock() + seconds
        self._holds[site] = max(self._holds.get(site, 0.0), until)
        self._next_start[site] = max(self._next_start.get(site, 0.0), until)

    def _held_back(self, slowed: set[str]) -> int:
        """How many hosts are held back now: `slowed` (by a long Crawl-delay) and those
        whose 429/503 hold is not over (the ones that are over are forgotten)."""
        now = self.clock()
        for site in [s for s, until in self._holds.items() if until <= now]:
            del self._holds[site]
        return len(slowed | self._holds.keys())

    @property
    def limit_reached(self) -> bool:
        return self.max_pages > 0 and self.pages_taken >= self.max_pages

    def notify(self) -> None:
        """New URLs may be pending in the manifest."""
        self._notify()

    async def _turn(self, site: str, ready: Callable[[], bool] = lambda: True) -> bool:
        """Wait until a request to `site` may start, `delay` after the last one to it
        started, then count this one as started now: from when a request is let go, not
        from when it was due, so a task the event loop wakes late never brings the next
        one closer (and `sent` counts it again when its headers are actually sent: a new
        connection takes a while). `ready()` (no await in it) says whether it may start
        after all. No await between the last look and the count: tasks waiting for one
        host take their turns one at a time."""
        while True:
            now = self.clock()
            due = self._next_start.get(site, 0.0)
            if due > now:
                await asyncio.sleep(due - now)
                continue
            if not ready():
                return False
            self._next_start[site] = self.clock() + self._delays.get(site, self.delay)
            return True

    @contextlib.asynccontextmanager
    async def slot(self, site: str) -> AsyncIterator[None]:
        """A request made outside the frontier's URLs (a browser's requisite) waits its
        turn; Frontier also holds one of the host's `per_host` slots for it."""
        await self._turn(site)
        yield

    def sent(self, site: str) -> None:
        """A request to `site` has just been sent (its headers written): the next one waits
        `delay` from now."""
        self._next_start[site] = max(self._next_start.get(site, 0.0),
                                     self.clock() + self._delays.get(site, self.delay))

    async def _wait(self, timeout: float) -> None:
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), timeout)
        except TimeoutError:
            pass

    def _notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)


class Frontier(Waits):
    """Hands URLs to workers, one host slot at a time.

    Memory is bounded: URLs live in the manifest and only a small window per host is
    leased into memory. Every state change happens without an await in between, so the
    single event loop makes take/release race-free (as in the origin crawler).
    """

    def __init__(
        self,
        manifest: Manifest,
        *,
        per_host: int,
        delay: float,
        max_pages: int = 0,
        pages_done: int = 0,
        batch: int = 512,
        clock: Callable[[], float] = time.monotonic,
        on_dry: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(manifest, delay, max_pages, pages_done, clock, on_dry)
        self.per_host = per_host
        self.batch = batch
        self._queues: dict[str, deque[UrlItem]] = {}
        self._active: dict[str, int] = {}
        self._asking: dict[str, int] = {}  # site -> a browser's requests waiting for a slot
        self._buffered = 0
        self._last_refill = -REFILL_EVERY

    # -- public ----------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        return self._buffered

    async def take(self) -> UrlItem | None:
        """The next URL whose host has a free slot and whose delay has passed; None at the end."""
        while not self._stopping and not self._finished:
            item = self._pick() or (self._refill() and self._pick())
            if item:
                return item
            if not self._buffered and self.on_dry():
                continue  # the URLs they found may be all there is to fetch
            if self.in_flight == 0 and self._buffered == 0 and self._nothing_due_ever():
                self._finished = True
                self._notify()
                break
            await self._wait(self._next_wakeup())
        return None

    def fetched(self, item: UrlItem) -> None:
        """The response to `item` is in: its host slot is free for the next request, while
        the URL stays in flight until `release(item, slot_held=False)`."""
        self._active[item.site] -= 1
        self._notify()

    def release(self, item: UrlItem, *, slot_held: bool = True) -> None:
        """A worker is done with `item` (whatever the outcome): free its host slot."""
        if slot_held:
            self._active[item.site] -= 1
        self.in_flight -= 1
        self._notify()

    async def turn(self, site: str) -> bool:
        """Wait until a request to `site` may start (every request, robots.txt too,
        starts `delay` after the one before to its host, whichever worker sends it);
        True."""
        return await self._turn(site)

    @contextlib.asynccontextmanager
    async def slot(self, site: str) -> AsyncIterator[None]:
        """A request made outside the frontier's URLs (a browser's requisite): it waits for
        a free slot of `site` and its turn under `delay`, and holds the slot meanwhile, as
        a URL taken from the frontier does (so `per_host` bounds it too). While it waits,
        no URL of `site` is handed out: a page open in a tab waits on it, and the crawl of
        a big host would otherwise take every slot as it frees, until its last URL."""
        def free() -> bool:
            return self._active.get(site, 0) < self.per_host

        self._asking[site] = self._asking.get(site, 0) + 1  # _pick lets it go first
        try:
            while not (free() and await self._turn(site, free)):
                await self._wait(MAX_WAIT)
        finally:
            self._asking[site] -= 1
            if not self._asking[site]:
                del self._asking[site]
        self._active[site] = self._active.get(site, 0) + 1  # no await since free()
        try:
            yield
        finally:
            self._active[site] -= 1
            self._notify()

    def hold(self, site: str, seconds: float) -> None:
        """No request starts to `site` for `seconds` (429/503 backoff, Retry-After)."""
        self._hold(site, seconds)
        self._notify()

    def held_back(self) -> int:
        """Hosts held back now: by a 429/503 hold not yet over, or by a robots.txt
        Crawl-delay longer than the configured delay while they have URLs to fetch."""
        return self._held_back({s for s, d in self._delays.items()
                                if d > self.delay and (self._queues.get(s) or self._active.get(s))})

    def stop(self) -> None:
        """Stop handing out URLs; buffered ones go back to pending."""
        self._stopping = True
        self._return_buffered()
        self._notify()

    def close(self) -> None:
        self._return_buffered()

    # -- internals -------------------------------------------------------------------------
    def _pick(self) -> UrlItem | None:
        now = self.clock()
        for site, queue in self._queues.items():
            if not queue or self._active.get(site, 0) >= self.per_host or site in self._asking:
                continue
            if self._next_start.get(site, 0.0) > now:
                continue
            item = self._pop_allowed(queue)
            if item is None:
                continue
            self._active[site] = self._active.get(site, 0) + 1
            self.in_flight += 1
            if item.mode == PAGE:
                self.pages_taken += 1
            return item
        return None

    def _pop_allowed(self, queue: deque[UrlItem]) -> UrlItem | None:
        """Pop the first URL allowed under the page budget; pages over budget stay pending."""
        for _ in range(len(queue)):
            item = queue.popleft()
            self._buffered -= 1
            if item.mode != PAGE or not self.limit_reached:
                return item
            self.manifest.urls.unlease([item.id])
        return None

    def _refill(self) -> bool:
        """Lease more URLs when the buffer runs low, or (at most every REFILL_EVERY seconds)
        when every buffered URL waits on a busy host, so other hosts are not starved."""
        now = self.clock()
        if self._buffered >= self.batch // 2 and now - self._last_refill < REFILL_EVERY:
            return False
        self._last_refill = now
        full = [s for s, q in self._queues.items() if len(q) >= HOST_BUFFER]
        items = self.manifest.urls.lease(
            self.batch, time.time(), exclude_sites=full, pages=not self.limit_reached
        )
        for item in items:
            self._queues.setdefault(item.site, deque()).append(item)
        self._buffered += len(items)
        # drop empty queues of idle hosts so the scan in _pick stays short (a host still
        # held back keeps its next start time)
        for site in [s for s, q in self._queues.items() if not q and not self._active.get(s)]:
            del self._queues[site]
            if self._next_start.get(site, 0.0) <= now:
                self._next_start.pop(site, None)
        return bool(items)

    def _nothing_due_ever(self) -> bool:
        return self.manifest.urls.next_due(pages=not self.limit_reached) is None

    def _next_wakeup(self) -> float:
        """Seconds until a host's delay or a retry becomes due (bounded by MAX_WAIT)."""
        now = self.clock()
        waits = [
            t - now for s, t in self._next_start.items()
            if self._queues.get(s) and self._active.get(s, 0) < self.per_host
        ]
        if not self._buffered:  # only then can a retry coming due be what we wait for
            due = self.manifest.urls.next_due(pages=not self.limit_reached)
            if due is not None:
                waits.append(due - time.time())
        return min([MAX_WAIT, *[max(w, 0.001) for w in waits]])

    def _return_buffered(self) -> None:
        ids = [item.id for q in self._queues.values() for item in q]
        for q in self._queues.values():
            q.clear()
        self._buffered = 0
        if ids:
            self.manifest.urls.unlease(ids)
