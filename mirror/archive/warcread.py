"""Reading WARC files back: one record at an offset, and how much of a file is whole."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from warcio.archiveiterator import ArchiveIterator

from mirror.archive.damage import printable
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
    object store); `where` names it in a ReadError."""
    try:
        record = next(iter(ArchiveIterator(f)))
        http = record.http_headers
        status = http.get_statuscode() if http is not None else None
        return RawRecord(
            record.rec_type,
            {k: v for k, v in record.rec_headers.headers},
            int(status) if status and status.isdigit() else None,
            tuple(http.headers) if http is not None else None,
            record.raw_stream.read(),
        )
    except Exception as exc:  # noqa: BLE001 - warcio raises assorted errors on bad records
        raise ReadError(f"{where}: {printable(str(exc)[:100]) or type(exc).__name__}") from exc


def complete_prefix(path: Path) -> int:
    """Length of the longest prefix of a .warc.gz made of complete gzip members.

    Streams the file (bounded memory) to cut a torn tail off a file left ``.open`` by a crash.
    """
    good = offset = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with open(path, "rb") as f:
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
