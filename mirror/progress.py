"""Live progress display on a terminal (rich); never used when stdout is not a terminal."""

from __future__ import annotations

import logging
import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from mirror.model import Progress
from mirror.report import human_bytes

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

    def update(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self._last < REFRESH:
            return
        self._last = now
        self.live.update(Text(render_progress(self.site, p)))

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


def render_progress(site: str, p: Progress) -> str:
    rate = p.done / p.elapsed if p.elapsed > 0 else 0.0
    return (f"{site}: {p.done} done, {p.queued} queued, {p.failed} failed, "
            f"{p.retried} retries | {rate:.1f} pages/s | {human_bytes(p.bytes)} | "
            f"{p.elapsed:.0f}s")
