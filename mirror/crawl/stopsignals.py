"""SIGINT and SIGTERM during a run, answered in every phase of it.

The handlers are Python-level ones (`signal.signal`), not the event loop's: CPython runs them
in the main thread between two bytecodes, also while the event loop is busy in synchronous
work (repairing the archive at start-up, committing what a sitemap lists, writing the final
index). A handler only sets `Crawler.stop_requested`, which those long steps check, and
asks the loop to call `Crawler.stop()` as soon as it runs again. The first signal stops
handing out URLs and lets in-flight fetches finish (at most [crawl] stop_grace seconds); a
second one abandons them (records are never left half-written)."""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirror.crawl.crawler import Crawler

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunSignals:
    """A context: while inside it, SIGINT and SIGTERM stop the run that `attach` names
    (or, when they come before it is made, stop it as soon as it is attached)."""

    def __init__(self) -> None:
        self.crawler: Crawler | None = None
        self.caught = 0
        self.answered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> RunSignals:
        self._loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._caught)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def attach(self, crawler: Crawler) -> None:
        self.crawler = crawler
        if self.caught:
            crawler.stop_requested = True
            self._answer(signal.SIGTERM)

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        """In the main thread, between two bytecodes of whatever runs: only flags and a
        callback for the loop."""
        self.caught += 1
        if self.crawler is not None:
            self.crawler.stop_requested = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._answer, signum)

    def _answer(self, signum: int) -> None:
        crawler = self.crawler
        if crawler is None:  # not made yet: attach stops it
            return
        self.answered += 1
        if self.answered == 1:
            log.warning("%s: finishing in-flight fetches (at most %gs); send it again to "
                        "abort them", signal.Signals(signum).name, crawler.cfg.crawl.stop_grace)
        crawler.stop()
