"""Live progress display on a terminal (rich); never used when stdout is not a terminal."""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from mirror.report import human_bytes

if TYPE_CHECKING:
    from mirror.crawl.crawler import Crawler

REFRESH = 0.25  # seconds between redraws


class ProgressDisplay:
    """One status line: done / queued / failed, pages/s, bytes, elapsed."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.console = Console(stderr=True)
        self.live = Live(Text(f"{site}: starting"), console=self.console,
                         refresh_per_second=1 / REFRESH, transient=True)
        self._last = 0.0

    def log_handler(self) -> logging.Handler:
        """Log records printed above the live line instead of through it."""
        return RichHandler(console=self.console, show_path=False, markup=False)

    def update(self, crawler: Crawler) -> None:
        now = time.monotonic()
        if now - self._last < REFRESH:
            return
        self._last = now
        c = crawler.counters
        elapsed = now - c.started
        queued = crawler.frontier.queued + crawler.frontier.in_flight if crawler.frontier else 0
        rate = c.done / elapsed if elapsed > 0 else 0.0
        self.live.update(Text(
            f"{self.site}: {c.done} done, {queued} queued, {c.failed} failed, "
            f"{c.retried} retries | {rate:.1f} pages/s | {human_bytes(c.bytes)} | "
            f"{elapsed:.0f}s"
        ))

    def __enter__(self) -> ProgressDisplay:
        self.live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.live.__exit__(exc_type, exc, tb)
