"""A damaged record or file, as every reading command reports it: file, offset, what is wrong.

Readers (`mirror index`, `export`, `serve`, `push`) skip what they cannot read, report it
here and go on with the rest; `mirror verify` reports the same places as its problems. The
text is printable only: bytes from a damaged file never reach a terminal raw.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

log = logging.getLogger("mirror.damage")

#: longest excerpt of a damaged file's bytes quoted in a message
EXCERPT = 60


def printable(text: str | bytes) -> str:
    """`text` with every character a terminal could act on escaped (control characters,
    ESC sequences, bidi marks, invalid UTF-8 bytes): \\x1b, \\u202e, \\xff."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def excerpt(data: bytes) -> str:
    """A few bytes of a damaged file, quoted and escaped."""
    more = "..." if len(data) > EXCERPT else ""
    return f"'{printable(data[:EXCERPT])}{more}'"


@dataclass(frozen=True)
class Damage:
    """One damaged record (at `offset`) or file (offset None) and what is wrong with it."""

    file: str  # as the archive names it: "warc/x.warc.gz", "index.cdxj"
    offset: int | None
    what: str

    @property
    def where(self) -> str:
        return self.file if self.offset is None else f"{self.file}@{self.offset}"

    def __str__(self) -> str:
        return printable(f"{self.where}: {self.what}")


def report(damage: Damage) -> None:
    """Tell the damage (logger mirror.damage, warning): the command goes on."""
    log.warning("damaged: %s", damage)


class Tally(logging.Handler):
    """Counts the damage a command met and prints each one on `stream`, "mirror: damaged: ..."."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(logging.WARNING)
        self.stream = stream
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        print(f"mirror: {printable(record.getMessage())}", file=self.stream or sys.stderr)


@contextmanager
def tally(stream: TextIO | None = None) -> Iterator[Tally]:
    """While a command reads: count and print the damage it meets (and only here: not
    twice when a run's logging is set up too)."""
    handler = Tally(stream)
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def refused(path: Path, root: Path) -> str | None:
    """Why an archive's file at `path` is not to be read, or None: a symlink to a place
    outside the archive folder `root` (an archive never holds one: it would put other
    files into a WACZ or a store), or not a regular file (a FIFO would block the reader)."""
    try:
        if path.is_symlink():
            target = os.path.realpath(path)
            if os.path.commonpath([target, os.path.realpath(root)]) != os.path.realpath(root):
                return f"a symlink to {target}, outside the archive; not read"
        mode = path.stat().st_mode
    except (OSError, ValueError) as exc:
        return f"cannot be read: {getattr(exc, 'strerror', None) or exc}"
    return None if stat.S_ISREG(mode) else "not a regular file; not read"


def readable(paths: Iterable[Path], root: Path) -> list[Path]:
    """The paths that are not refused(); each refused one is reported."""
    out = []
    for path in paths:
        if why := refused(path, root):
            report(Damage(f"{path.parent.name}/{path.name}", None, why))
        else:
            out.append(path)
    return out
