"""Reading WARC files back: one record at an offset, and how much of a file is whole."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from warcio.archiveiterator import ArchiveIterator

from mirror.archive.damage import printable
from mirror.archive.members import CHUNK, GZIP_MAGIC
from mirror.errors import MirrorError


class ReadError(MirrorError):
    """A record cannot be read back (missing file, bad offset, revisit without original)."""


@dataclass(frozen=True)
class RawRecord:
    """One record as stored: its type, WARC headers, HTTP status and headers, payload."""

    rec_type: str
    warc: dict[str, str]
    status: int | None
    headers: tuple[tuple[str, str], ...] | None
    payload: bytes


def read_raw(path: Path, offset: int) -> RawRecord:
    """The one record that starts at offset in a WARC file."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return read_raw_from(f, f"{path.name}@{offset}")
    except OSError as exc:
        raise ReadError(f"{path.name}@{offset}: {exc or type(exc).__name__}") from exc


def read_raw_from(f: IO[bytes], where: str) -> RawRecord:
    """The one record that starts where `f` is (a local file, or a record's bytes from an
    object store); `where` names it in a ReadError.

    A gzip member is inflated here, to its end and its CRC, before warcio parses the record:
    warcio's own reader takes a member that fails part-way for an empty or uncompressed
    stream and hands back a record with no payload, which would export as if whole."""
    first = f.read(CHUNK)
    source: io.RawIOBase = _Inflating(first, f) if first.startswith(GZIP_MAGIC) \
        else _Prefixed(first, f)
    try:
        record = next(iter(ArchiveIterator(io.BufferedReader(source, CHUNK))))
        http = record.http_headers
        status = http.get_statuscode() if http is not None else None
        raw = RawRecord(
            record.rec_type,
            {k: v for k, v in record.rec_headers.headers},
            int(status) if status and status.isdigit() else None,
            tuple(http.headers) if http is not None else None,
            record.raw_stream.read(),
        )
        if isinstance(source, _Inflating):
            source.check_end()
        return raw
    except Exception as exc:  # noqa: BLE001 - warcio raises assorted errors on bad records
        raise ReadError(f"{where}: {printable(str(exc)[:100]) or type(exc).__name__}") from exc


class _Inflating(io.RawIOBase):
    """The WARC record inside the gzip member that starts with `first` (then the rest of
    `f`), inflated as it is read; a damaged member raises, and its end checks the CRC."""

    def __init__(self, first: bytes, f: IO[bytes]) -> None:
        self.d, self.tail, self.f = zlib.decompressobj(31), first, f

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray) -> int:  # type: ignore[override]
        while not self.d.eof:
            data = self.d.unconsumed_tail or self.tail or self.f.read(CHUNK)
            self.tail = b""
            try:
                out = self.d.decompress(data, len(buf))
            except zlib.error as exc:
                raise zlib.error(f"a damaged gzip member ({exc})") from exc
            if out:
                buf[:len(out)] = out
                return len(out)
            if not data and not self.d.eof:
                raise zlib.error("the data ends inside the record's gzip member")
        return 0

    def check_end(self) -> None:
        """Read to the member's end: its CRC and length are checked there."""
        while self.readinto(bytearray(CHUNK)):
            pass


class _Prefixed(io.RawIOBase):
    """`first`, then the rest of `f`: the bytes already read to look for gzip's magic."""

    def __init__(self, first: bytes, f: IO[bytes]) -> None:
        self.first, self.f = first, f

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray) -> int:  # type: ignore[override]
        if self.first:
            n = min(len(buf), len(self.first))
            buf[:n], self.first = self.first[:n], self.first[n:]
            return n
        data = self.f.read(len(buf))
        buf[:len(data)] = data
        return len(data)


def complete_prefix(path: Path, start: int = 0) -> int:
    """Length of the longest prefix of a .warc.gz made of complete gzip members.

    Streams the file (bounded memory) to cut a torn tail off a file left ``.open`` by a crash.
    `start`: where a member begins, with only complete members before it (the end of what
    the manifest recorded): the members before it are not read again.
    """
    good = offset = start
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(1 << 20):
            data = chunk
            while data:
                try:
                    d.decompress(data, 1 << 16)
                    while d.unconsumed_tail and not d.eof:
                        d.decompress(d.unconsumed_tail, 1 << 16)
                except zlib.error:
                    return good
                if not d.eof:
                    offset += len(data)
                    break
                consumed = len(data) - len(d.unused_data)
                offset += consumed
                good = offset
                data = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return good
