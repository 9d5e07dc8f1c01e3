"""The run's log file (mirror.log) as a logging handler that, when a line cannot be written
(a full disk), says so once on stderr in one line, not a traceback per record: the run's
warnings still reach stderr by the console handler, and the full disk stops the run with
its own message (mirror.archive.diskspace)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


class RunLogFile(logging.FileHandler):
    """logging.FileHandler whose write failures are told once, in one line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self.failed = False  # a line could not be written (told once)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        exc = sys.exc_info()[1]
        if self.failed or not isinstance(exc, OSError):
            if not isinstance(exc, OSError):
                super().handleError(record)
            return
        self.failed = True
        why = exc.strerror or str(exc)
        sys.stderr.write(f"mirror: cannot write {self.baseFilename}: {why}; the run's "
                         "warnings still go here, its other log lines are lost until it "
                         "can\n")

    def close(self) -> None:
        try:
            super().close()
        except OSError:  # what its buffer held could not be written: told already
            self.handleError(logging.LogRecord("mirror", logging.ERROR, "", 0, "", None, None))
