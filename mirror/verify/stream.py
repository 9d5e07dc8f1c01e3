"""Reading a WARC file in bounded memory: gzip members, inflated, and each record's headers."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import IO, Any

from mirror.archive.members import resync

CHUNK = 1 << 16
MAX_LINE = 1 << 16  # longest WARC header line read
MAX_HEAD = 1 << 20  # largest WARC or HTTP header block read


class Stream:
    """Decompressed bytes of a WARC file, one gzip member at a time, in bounded memory.

    A plain (uncompressed) file is read as one long member."""

    def __init__(self, f: IO[bytes], gzipped: bool = True) -> None:
        self.f = f
        self.gzipped = gzipped
        self.raw = b""  # compressed bytes read from f, not yet inflated
        self.raw_at = f.tell()  # file offset of raw[0]
        self.out = bytearray()  # inflated bytes of the member, not yet read
        self.member_at = self.raw_at
        self.pos = 0  # bytes of this member read so far
        self.ended = True
        self.torn = False  # the file ends inside a member
        self.error = ""  # zlib's complaint when the bytes are not gzip
        self._d: Any = None

    def next_member(self) -> bool:
        if self.torn or self.error or not (self.raw or self._more()):
            return False
        self.member_at, self.pos, self.ended = self.raw_at, 0, False
        self.out.clear()
        self._d = zlib.decompressobj(31) if self.gzipped else None
        return True

    def resume(self) -> bool:
        """After a damaged gzip member: go on at the next member holding a WARC record
        (a seekable .warc.gz); False when there is none, or the file cannot seek."""
        if not (self.error and self.gzipped and self.f.seekable()):
            return False
        at = resync(self.f, self.member_at + 1)
        if at is None:
            return False
        self.f.seek(at)
        self.raw, self.raw_at, self.member_at, self.error = b"", at, at, ""
        self.out.clear()
        return True

    def _more(self) -> bool:
        self.raw = self.f.read(CHUNK)
        return bool(self.raw)

    def _fill(self) -> None:
        if not self.raw and not self._more():
            self.ended, self.torn = True, self.gzipped
        elif self._d is None:
            self.out += self.raw
            self.raw_at, self.raw = self.raw_at + len(self.raw), b""
        else:
            self._inflate()

    def _inflate(self) -> None:
        try:
            data = self._d.decompress(self.raw, CHUNK)
        except zlib.error as exc:
            self.ended, self.error = True, str(exc)
            return
        rest = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
        self.raw_at += len(self.raw) - len(rest)
        self.raw = rest
        self.out += data
        self.ended = self._d.eof

    def read(self, n: int) -> bytes:
        while len(self.out) < n and not self.ended:
            self._fill()
        data = bytes(self.out[:n])
        del self.out[:n]
        self.pos += len(data)
        return data

    def readline(self, limit: int = MAX_LINE) -> bytes:
        while (i := self.out.find(b"\n", 0, limit)) < 0 and len(self.out) < limit \
                and not self.ended:
            self._fill()
        return self.read(i + 1 if i >= 0 else limit)

    def at_end(self) -> bool:
        while not self.out and not self.ended:
            self._fill()
        return not self.out

    def skip(self) -> int:
        """Discard the rest of the member; return how many bytes that was."""
        n = 0
        while not self.at_end():
            n += len(self.read(CHUNK))
        return n


@dataclass
class Head:
    version: str
    fields: dict[str, list[str]]  # lower-case name -> values in order

    def get(self, name: str) -> str | None:
        values = self.fields.get(name.lower())
        return values[0] if values else None

    def get_all(self, name: str) -> list[str]:
        return self.fields.get(name.lower(), [])


def read_head(s: Stream) -> Head | str:
    """The version line and header fields up to the blank line, or what is wrong with them."""
    first = s.readline()
    if not first:
        return "an empty gzip member, with no record in it"
    if not first.startswith(b"WARC/") or not first.endswith(b"\r\n"):
        return f"expected a WARC/1.x line ended by CRLF, found {first[:40]!r}"
    fields: dict[str, list[str]] = {}
    values: list[str] = []
    size = 0
    while (line := s.readline()) != b"\r\n":
        size += len(line)
        if not line.endswith(b"\r\n") or size > MAX_HEAD:
            return "the record ends inside its WARC headers" if not line else \
                f"header line not ended by CRLF: {line[:60]!r}"
        text = line.decode("utf-8", "replace").strip()
        if line[:1] in (b" ", b"\t") and values:  # a folded line continues the value above
            values[-1] += " " + text
            continue
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            return f"not a header line: {line[:60]!r}"
        values = fields.setdefault(name.strip().lower(), [])
        values.append(value.strip())
    return Head(first[:-2].decode("latin-1"), fields)
