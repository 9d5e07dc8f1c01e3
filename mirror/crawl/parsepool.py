"""Link discovery in helper processes, so that parsing uses the cores the event loop leaves.

Finding a page's links (decode, lxml parse, normalise, scope) is pure and costs about as much
CPU as the rest of a fetch together; in one process it caps the crawl at one core. Each
helper is `python -m mirror.crawl.parsehelper`, fed through its stdin and answering on its
stdout with length-prefixed pickles (both ends are this package, so pickle is safe here).
The pipes are event-loop streams: no threads, so nothing waits on the GIL to hand a result
over.

Failures never lose a page: until a helper says it is ready, and for good once helpers
have died `MAX_RESTARTS` times, pages are parsed in the crawler's own process (while helpers
start, only pages of at most `IN_PROCESS_BYTES`: a bigger one, such as a sitemap of 50,000
URLs, waits for a helper rather than hold the event loop, and signals, for seconds). A helper
answers its requests in order, so when it dies the oldest unanswered one is the page it was
parsing: that page is sent once more, to a new helper (never parsed in the crawler's
process: it may be what killed the helper), and if it is again the one being parsed when
that helper dies too, it is stored without its links and a warning says so. The pages queued
behind it did nothing: they are sent again as often as a helper dies under them (and parsed
here once no helper may be started any more).

Each page has a time budget (`PARSE_SECONDS`): a helper still parsing a page when its budget
is spent is killed. That page is stored flagged `parse-budget`, without links (it is not
sent again); the pages queued behind it go to the replacement, so one page delays the
others' links by at most its budget and a helper's start. Such a kill is not a death: it
does not count towards `MAX_RESTARTS`. Pages sent to helpers and not yet answered hold at
most `INFLIGHT_BYTES` of bodies in memory (`room`): the others wait on disk, spooled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mirror.config import SiteConfig
from mirror.crawl.discover import Discovery
from mirror.crawl.parsehelper import (
    LENGTH,
    PARENT_VARIABLE,
    Page,
    frame,
    from_wire,
    request_wire,
)
from mirror.errors import MirrorError
from mirror.launch import module_argv
from mirror.model import NOTHING, PARSE_BUDGET, Discovered, Exchange, UrlItem, over_budget

log = logging.getLogger(__name__)

#: helper deaths tolerated in one run before parsing stays in the crawler's process
MAX_RESTARTS = 5
STOP_TIMEOUT = 5.0
#: the helper's command line (-P: a `mirror` folder where the crawl was started, a library
#: or a checkout of another version, is not what the helper imports)
HELPER = tuple(module_argv("mirror.crawl.parsehelper"))
#: longest wait for a new helper to come up, for a page whose helper died
READY_TIMEOUT = 30.0
#: longest a helper may take over one page before it is killed (the page's time budget)
PARSE_SECONDS = 10.0
#: most bytes of bodies read for link discovery and not yet answered, all pages together
#: (one page larger than this still goes, alone)
INFLIGHT_BYTES = 24_000_000
#: largest body parsed in the crawler's process while the helpers start (about 0.1 s)
IN_PROCESS_BYTES = 256 * 1024


class HelperDied(MirrorError):
    """The helper process exited or broke the protocol with requests still unanswered.
    `parsing`: the request it is raised for is the one the helper was parsing (its oldest
    unanswered), which may be what killed it; False for the requests queued behind it."""

    def __init__(self, reason: str, parsing: bool = True, budget: bool = False) -> None:
        super().__init__(reason)
        self.parsing = parsing
        self.budget = budget  # killed for spending the page's time budget


class ParserPool:
    """Sends pages to `processes` helpers (0: parse in this process), least busy first."""

    def __init__(self, cfg: SiteConfig, discovery: Discovery, processes: int,
                 command: Sequence[str] = HELPER, budget: float = PARSE_SECONDS) -> None:
        self.cfg = cfg
        self.discovery = discovery  # this process's own, for parsing here
        self.processes = processes
        self.command = command
        self.budget = budget
        self._helpers: list[_Helper] = []
        self._restarts = 0
        self._ids = itertools.count()
        self._inflight = 0  # bytes of bodies held for discovery (room)
        self._room = asyncio.Condition()
        self._was_ready = False  # a helper came up once: wait for one, never parse here

    @asynccontextmanager
    async def room(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes of the in-flight budget while a page's body is read and its
        links are found; waits while other pages hold it (a page alone always gets in)."""
        async with self._room:
            await self._room.wait_for(
                lambda: self._inflight == 0 or self._inflight + size <= INFLIGHT_BYTES)
            self._inflight += size
        try:
            yield
        finally:
            async with self._room:
                self._inflight -= size
                self._room.notify_all()

    async def start(self) -> None:
        for _ in range(self.processes):
            await self._spawn()

    async def _spawn(self) -> None:
        try:
            helper = await _Helper.start(self.command, self.cfg, self._ids, self.budget)
        except OSError as exc:
            log.warning("cannot start a link-extraction process (%s); parsing here", exc)
            self._restarts = MAX_RESTARTS
            return
        self._helpers.append(helper)

    async def discover(self, item: UrlItem, page: Page) -> Discovered:
        """The page's redirect target and links, from a helper when one is ready.

        A page whose helper died while parsing it is never parsed here (it may be what
        killed it): it goes to the replacement once that is ready, and loses its links if
        that one dies parsing it too. A page without a body to parse (a redirect) is
        answered here: a helper would add only the round trip."""
        if page.body is None:
            return self.discover_in_process(item, page)
        for dead in [h for h in self._helpers if h.died is not None]:
            await self._replace(dead, dead.died)  # it died between two pages
        helper = self._ready()
        if helper is None and (self._was_ready or len(page.body) > IN_PROCESS_BYTES):
            helper = await self._ready_soon()  # not here: a page that beats the budget
        if helper is None:
            return self.discover_in_process(item, page)
        self._was_ready = True
        deaths = 0  # of helpers that died while parsing this page
        while True:
            try:
                return await helper.discover(item, page)
            except HelperDied as exc:
                await self._replace(helper, exc)
                if exc.budget and exc.parsing:
                    log.warning("links of %s not extracted: parsing took over %g s (%s)",
                                item.url, self.budget, exc)
                    return over_budget(f"links not extracted within {self.budget:g} s")
                deaths += exc.parsing
            if deaths >= 2:
                break
            found = await self._replacement()
            if found is None:
                if deaths == 0:  # only queued when helpers died: it killed none
                    return self.discover_in_process(item, page)
                break
            helper = found
        log.warning("links of %s not extracted: the link-extraction process died while "
                    "parsing it", item.url)
        return NOTHING

    async def _replacement(self) -> _Helper | None:
        """A ready helper for a page whose helper died: dead ones are replaced while
        MAX_RESTARTS allows. None when none may be started any more, or none came up
        within READY_TIMEOUT. Bounded: each turn of the loop follows a death."""
        while True:
            helper = await self._ready_soon()
            if helper is not None:
                return helper
            dead = [h for h in self._helpers if h.died is not None]
            if not dead or len(dead) < len(self._helpers):
                return None  # none started, or one still starting after READY_TIMEOUT
            for h in dead:
                await self._replace(h, h.died)

    def _ready(self) -> _Helper | None:
        ready = [h for h in self._helpers if h.ready.is_set() and h.died is None]
        return min(ready, key=lambda h: len(h.pending)) if ready else None

    async def _ready_soon(self) -> _Helper | None:
        """A helper, once one of those starting is ready (None if none comes up)."""
        starting = [h for h in self._helpers if h.died is None]
        if not starting:
            return None
        waits = [asyncio.ensure_future(h.ready.wait()) for h in starting]
        try:
            await asyncio.wait(waits, timeout=READY_TIMEOUT,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return self._ready()

    def discover_in_process(self, item: UrlItem, page: Page) -> Discovered:
        """Discovery in this process. A bug it hits costs the page its links, not its
        capture (as in a helper)."""
        try:
            return self.discovery.discover(item, page.status, page.body, page.truncated,
                                           page.headers)
        except Exception:
            log.exception("link extraction failed on %s", item.url)
            return NOTHING

    async def _replace(self, helper: _Helper, exc: HelperDied | None) -> None:
        if helper not in self._helpers:
            return  # another request on the same helper replaced it already
        exc = helper.died or exc  # the first reason: pages behind a killed one see another
        self._helpers.remove(helper)
        await helper.stop()
        if exc is not None and exc.budget:
            log.info("link-extraction process killed (%s); starting another", exc)
            await self._spawn()
            return
        self._restarts += 1
        if self._restarts > MAX_RESTARTS:
            log.warning("link-extraction process died (%s); %d deaths this run, so pages "
                        "are parsed in the crawler's own process from now on", exc,
                        self._restarts)
            return
        log.warning("link-extraction process died (%s); starting another", exc)
        await self._spawn()

    async def close(self, abandon: bool = False) -> None:
        """Stop the helpers; with `abandon` (the run was told to stop: no answer is waited
        for any more), they are killed at once instead of finishing what they parse."""
        helpers, self._helpers = self._helpers, []
        await asyncio.gather(*(h.stop(abandon) for h in helpers))


class _Helper:
    """One helper process and the requests it has not answered yet."""

    def __init__(self, proc: asyncio.subprocess.Process, ids: itertools.count[int],
                 budget: float = PARSE_SECONDS) -> None:
        self.proc = proc
        self.ids = ids
        self.budget = budget
        self._watch: asyncio.TimerHandle | None = None  # on the request being parsed
        self.pending: dict[int, asyncio.Future[Discovered]] = {}
        self.ready = asyncio.Event()  # it said so: its imports are done
        self.died: HelperDied | None = None
        self._reader = asyncio.create_task(self._read(), name=f"parser-{proc.pid}")

    @classmethod
    async def start(cls, command: Sequence[str], cfg: SiteConfig,
                    ids: itertools.count[int], budget: float = PARSE_SECONDS) -> _Helper:
        here = str(Path(__file__).resolve().parent.parent)  # mirror importable from a checkout
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else ""),
               PARENT_VARIABLE: str(os.getpid())}
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env=env, limit=1 << 20)
        helper = cls(proc, ids, budget)
        helper._send(cfg)
        return helper

    def _send(self, message: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(message))

    async def discover(self, item: UrlItem, page: Page) -> Discovered:
        request_id = next(self.ids)
        future: asyncio.Future[Discovered] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        if self._watch is None:  # an idle helper begins this one now
            self._start_clock()
        try:  # cancelled (a stop) in the drain too: no answer left for nobody to retrieve
            try:
                self._send((request_id, *request_wire(item, page)))
                assert self.proc.stdin is not None
                await self.proc.stdin.drain()
            except (ConnectionError, RuntimeError) as exc:
                self._fail(HelperDied(f"cannot write to it: {exc}"))
            return await future
        finally:
            self.pending.pop(request_id, None)
            future.cancel()  # nothing when it is done

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                message = await _read_message(self.proc.stdout)
                if message == "ready":
                    self.ready.set()
                    continue
                request_id, ok, result, records = message
                for level, name, text in records:
                    logging.getLogger(name).log(level, "%s", text)
                future = self.pending.get(request_id)
                if future is None or future.done():
                    continue
                if ok:
                    future.set_result(from_wire(result))
                else:  # a bug in discovery: the page is kept, without links
                    log.error("link extraction failed on request %d: %s", request_id, result)
                    future.set_result(NOTHING)
                self._start_clock()  # on the next one, which it parses now
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # end of output, or a message that makes no sense
            try:  # it is usually exiting: say how
                code = await asyncio.wait_for(self.proc.wait(), 1.0)
            except TimeoutError:
                code = None
            self._fail(HelperDied(_exit_reason(code, exc)))

    def _parsing(self) -> int | None:
        """The request being parsed: the oldest unanswered (answers come in order)."""
        return min((k for k, f in self.pending.items() if not f.done()), default=None)

    def _start_clock(self) -> None:
        """The budget of the request being parsed runs from now."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        parsing = self._parsing()
        if parsing is not None and self.died is None:
            self._watch = asyncio.get_running_loop().call_later(
                self.budget, self._overdue, parsing)

    def _overdue(self, request_id: int) -> None:
        """The budget of `request_id` is spent: kill the helper (its queue goes elsewhere)."""
        self._watch = None
        if self._parsing() != request_id or self.died is not None:
            return
        log.warning("link-extraction process %d still parsing after %g s: killed",
                    self.proc.pid, self.budget)
        self._fail(HelperDied(f"over the {self.budget:g} s parse budget", budget=True))
        try:
            self.proc.kill()
        except ProcessLookupError:  # it died on its own just now
            pass

    def _fail(self, exc: HelperDied) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self.died is None:
            self.died = exc
        self.ready.set()  # nobody waits for a dead helper to come up
        parsing = self._parsing()
        for request_id, future in self.pending.items():
            if not future.done():
                future.set_exception(exc if request_id == parsing
                                     else HelperDied(str(self.died), parsing=False))

    async def stop(self, abandon: bool = False) -> None:
        """Close its stdin (it exits at end of input); kill it if it does not, or at once
        when `abandon`ed."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            # abandoned: killed at once, also when what it parses is no longer waited for
            await asyncio.wait_for(self.proc.wait(), 0 if abandon else STOP_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        self._fail(HelperDied("stopped"))


def parse_cut(found: Discovered, page: Page, ex: Exchange) -> Discovered:
    """`found`, flagged parse-budget when its links came from a body cut at MAX_PARSE_BYTES
    (unless it is flagged already)."""
    if page.body is None or len(page.body) >= ex.body_length or found.note:
        return found
    log.warning("links of %s read from its first %d bytes of %d (%s)", ex.url,
                len(page.body), ex.body_length, PARSE_BUDGET)
    return found._replace(note=f"{PARSE_BUDGET}: links read from the first "
                               f"{len(page.body)} bytes of {ex.body_length}")


def _exit_reason(code: int | None, exc: Exception) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    if code is not None:
        return f"exit code {code}"
    return f"{type(exc).__name__}: {exc}"


async def _read_message(stream: asyncio.StreamReader) -> Any:
    head = await stream.readexactly(LENGTH.size)
    return pickle.loads(await stream.readexactly(LENGTH.unpack(head)[0]))


def helper_count(configured: int, cores: int | None = None) -> int:
    """The helpers a run starts for `parse_processes`: at most one per core (more add
    memory, not speed); `cores` defaults to this machine's count."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if configured > cores:
        log.info("parse_processes = %d, but %d cores: starting %d link-extraction processes",
                 configured, cores, cores)
    return min(configured, cores)
