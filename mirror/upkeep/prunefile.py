"""Writing one pruned WARC file: its warcinfo renamed, its kept records copied as they are.

Each record is one gzip member, so a kept record is copied byte for byte from its offset
and stays exactly what it was (its digests, its id, its WARC-Warcinfo-ID). The one record
that changes is the warcinfo the file begins with (W2): its WARC-Filename must be the new
name. Only that header line is replaced, in the decompressed record, and the record is
compressed again as one member; its block (the warc-fields), id and date stay the same, so
the records that name it in WARC-Warcinfo-ID still do.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import IO

from mirror.upkeep.pruneplan import FileChange, Move, PlanError, layout

TEMP_SUFFIX = ".prune"


def write_pruned(warc_dir: Path, change: FileChange) -> tuple[list[Move], int]:
    """The new file, under its temporary name, fsynced: the warcinfo renamed, then every
    kept record copied as it is. Returns where the captures landed and its size."""
    assert change.new is not None
    with open(warc_dir / change.old, "rb") as src, \
            open(warc_dir / temp_name(change.new), "wb") as out:
        head = _renamed_warcinfo(src, change.new)
        out.write(head)
        spans, moves, size = layout(change, len(head))
        for offset, length in spans:
            src.seek(offset)
            _copy(src, out, length)
        out.flush()
        os.fsync(out.fileno())
    return moves, size


def _copy(src: IO[bytes], out: IO[bytes], length: int) -> None:
    while length > 0:
        chunk = src.read(min(length, 1 << 20))
        if not chunk:
            raise PlanError(f"{src.name}: ends before a record it should hold; `mirror "
                            "verify` tells more")
        out.write(chunk)
        length -= len(chunk)


_FILENAME = re.compile(rb"^(WARC-Filename:[ \t]*)[^\r\n]*", re.I | re.M)
_WARCINFO = re.compile(rb"^WARC-Type:[ \t]*warcinfo\r?$", re.I | re.M)


def _first_member(f: IO[bytes]) -> tuple[bytes, int]:
    """The first gzip member of a file, decompressed, and its length in the file."""
    f.seek(0)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data, used = b"", 0
    while not d.eof:
        chunk = f.read(1 << 16)
        if not chunk:
            return b"", 0
        data += d.decompress(chunk)
        used += len(chunk)
    return data, used - len(d.unused_data)


def _renamed_warcinfo(f: IO[bytes], name: str) -> bytes:
    """The file's warcinfo record as one gzip member, its WARC-Filename now `name` (the
    same record otherwise: id, date, fields; the block, hence its digest, is unchanged);
    b"" when the file does not begin with a warcinfo record."""
    record, _ = _first_member(f)
    head, sep, block = record.partition(b"\r\n\r\n")
    if not _WARCINFO.search(head):
        return b""
    head = _FILENAME.sub(lambda m: m.group(1) + name.encode(), head)
    gz = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return gz.compress(head + sep + block) + gz.flush()


def head_length(path: Path) -> int:
    """The length of the warcinfo member a file begins with (0 if it has none)."""
    with open(path, "rb") as f:
        record, length = _first_member(f)
    return length if _WARCINFO.search(record.partition(b"\r\n\r\n")[0]) else 0


def temp_name(name: str) -> str:
    """Where a new file is written until the switch: a name no reader lists."""
    return f".{name}{TEMP_SUFFIX}"
