"""The gzip members of a .warc.gz file, in bounded memory, and past a damaged one to the next.

Each record of a WARC file mirror writes is its own gzip member, so a damaged member
(flipped bytes, a bad CRC, garbage between members) costs that record only: reading goes
on at the next offset where a gzip member holding a WARC record starts.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from mirror.archive.damage import Damage, excerpt

GZIP_MAGIC = b"\x1f\x8b\x08"
CHUNK = 1 << 16


@dataclass(frozen=True)
class Member:
    offset: int
    length: int


def members(f: IO[bytes], label: str) -> Iterator[Member | Damage]:
    """Each whole gzip member of `f` (seekable, read from its start) and each damaged span,
    as Damage at its offset saying what is wrong and how much was skipped."""
    size = f.seek(0, 2)
    pos = 0
    while pos < size:
        end, why = inflate_member(f, pos)
        if not why:
            yield Member(pos, end - pos)
            pos = end
            continue
        nxt = resync(f, pos + 1)
        skipped = f"{nxt - pos} bytes skipped to the next record" if nxt \
            else f"the last {size - pos} bytes of the file skipped" if pos \
            else "no WARC record in the file"
        yield Damage(label, pos, f"{why}; {skipped}")
        pos = nxt or size


def inflate_member(f: IO[bytes], start: int) -> tuple[int, str]:
    """(where the gzip member at `start` ends, "") or (0, what is wrong with it)."""
    f.seek(start)
    head = f.read(len(GZIP_MAGIC))
    if head != GZIP_MAGIC:
        return 0, f"not a gzip member: the bytes there are {excerpt(head + f.read(40))}"
    d = zlib.decompressobj(31)
    data = head
    while True:
        try:
            while data:
                d.decompress(data, CHUNK)  # the output is not needed: only where it ends
                if d.eof:
                    return f.tell() - len(d.unused_data), ""
                data = d.unconsumed_tail
        except zlib.error as exc:
            return 0, f"a damaged gzip member ({exc})"
        data = f.read(CHUNK)
        if not data:
            return 0, f"the file ends {f.tell() - start} bytes into this gzip member"


def resync(f: IO[bytes], start: int) -> int | None:
    """The first offset at or after `start` where a gzip member holding a WARC record
    begins (its first bytes inflate to "WARC/"), or None."""
    at = start
    while True:
        f.seek(at)
        window = f.read(CHUNK)
        if len(window) < len(GZIP_MAGIC):
            return None
        i = window.find(GZIP_MAGIC)
        while i >= 0:
            if _holds_record(f, at + i):
                return at + i
            i = window.find(GZIP_MAGIC, i + 1)
        at += len(window) - len(GZIP_MAGIC) + 1


def _holds_record(f: IO[bytes], offset: int) -> bool:
    f.seek(offset)
    try:
        return zlib.decompressobj(31).decompress(f.read(CHUNK), 5) == b"WARC/"
    except zlib.error:
        return False


class Window:
    """`length` bytes of a file from `start`, read as a file of their own that tells its
    offsets in the whole file (what warcio records as a record's offset)."""

    def __init__(self, f: IO[bytes], start: int, length: int) -> None:
        self.f, self.at, self.end = f, start, start + length
        f.seek(start)

    def read(self, size: int = -1) -> bytes:
        left = self.end - self.at
        data = self.f.read(left if size < 0 else min(size, left))
        self.at += len(data)
        return data

    def tell(self) -> int:
        return self.at
