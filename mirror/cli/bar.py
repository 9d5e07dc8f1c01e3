"""A progress bar for a command that reads or writes a whole archive (export, verify): on
stderr when stderr is a terminal, and nothing otherwise, so that cron mail, a systemd
journal and a pipe keep only the command's result (stdout). A command passes the bar as its
work's progress callback: bar(done, total); `bar.stage(text)` names the step under way."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

#: fewest seconds between two redraws asked by the work (rich redraws on its own too)
EVERY = 0.1


class Bar:
    """Use as `with Bar("exporting") as bar: work(on_progress=bar)`."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.shown = self.stream.isatty()
        self._progress: Any = None
        self._task: Any = None
        self._last = 0.0

    def __enter__(self) -> Bar:
        if self.shown:
            from rich.console import Console  # rich: only for a terminal
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                console=Console(file=self.stream), transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.what, total=None)
        return self

    def stage(self, text: str, total: int | None = None) -> None:
        """A new step: its name, and how many units it has when known (else a pulse)."""
        if self._progress is not None:
            self._progress.reset(self._task, total=total, description=f"{self.what}: {text}")

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._progress is None or (now - self._last < EVERY and done < total):
            return
        self._last = now
        self._progress.update(self._task, completed=done, total=total)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
