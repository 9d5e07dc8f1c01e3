"""CDXJ index: lines in the pywb / cdxj-indexer format, built from the manifest or the WARCs."""

from __future__ import annotations

import heapq
import importlib
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp

from mirror.archive.damage import Damage, readable, report
from mirror.archive.fsutil import atomic_write_lines
from mirror.archive.members import Window, members
from mirror.model import CAPTURE_TYPES, RecordType
from mirror.web.http import mime_of

INDEXED_TYPES = CAPTURE_TYPES | {RecordType.RESOURCE}
#: the WARC-Target-URI prefix of a page's screenshot (a resource record the WARC writer puts
#: after a rendered page's conversion record): a URN no page asks for, left out of the index
SCREENSHOT = "urn:mirror:screenshot:"
#: the mime an index line gives a revisit record (the CDXJ convention pywb reads)
REVISIT_MIME = "warc/revisit"
OnDamage = Callable[[Damage], None]


def url_key(url: str) -> str:
    try:
        return str(_surt().surt(url))
    except Exception:  # noqa: BLE001 - surt raises assorted errors on odd URLs; pywb falls back too
        return url


def _surt() -> Any:
    """The surt module, imported on first use. surt imports tldextract at its top but calls
    it only for public suffixes, which surt.surt() never asks for, and importing tldextract
    pulls in requests (about 50 ms of every run): until then a stand-in takes its place."""
    if "surt" not in sys.modules and "tldextract" not in sys.modules:
        sys.modules["tldextract"] = _Deferred("tldextract")
    import surt

    return surt


class _Deferred(types.ModuleType):
    """Stands in for a module in sys.modules until one of its attributes is asked for; then
    the module is imported and answers (an `import` statement reads none of them)."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def cdxj_line(
    url: str,
    warc_date: str,
    *,
    mime: str | None,
    status: str | None,
    digest: str | None,
    length: int,
    offset: int,
    filename: str,
) -> str:
    """One index line; field order and JSON spacing match `cdxj-indexer` byte for byte."""
    fields: dict[str, str] = {"url": url}
    for name, value in (("mime", mime), ("status", status), ("digest", digest)):
        if value:
            fields[name] = value
    fields.update(length=str(length), offset=str(offset), filename=filename)
    return f"{url_key(url)} {iso_date_to_timestamp(warc_date)} {json.dumps(fields)}\n"


def capture_line(row: Any) -> str:
    """The index line of a manifest capture row (sqlite3.Row); equal to what its WARC
    record gives."""
    kind = row["record_type"]
    return cdxj_line(
        row["url"], row["warc_date"],
        mime=REVISIT_MIME if kind != "response" else (row["mime"] or None),
        status=None if kind == "not-modified" else str(row["status"]),  # empty block
        digest=row["payload_digest"], length=row["length"], offset=row["offset"],
        filename=row["filename"],
    )


def lines_from_warc(path: Path, on_damage: OnDamage = report, label: str = "") -> Iterator[str]:
    """Index lines of one WARC file, read from its records alone; a damaged record or
    span is passed to `on_damage` and skipped."""
    with open(path, "rb") as f:
        yield from lines_from_stream(f, path.name, on_damage, label)


def lines_from_stream(f: IO[bytes], filename: str, on_damage: OnDamage = report,
                      label: str = "") -> Iterator[str]:
    """Index lines of a WARC file read from its start (a local file, or a stream from an
    object store); `filename` is what the lines name, `label` what a Damage names
    (default warc/<filename>). A seekable .warc.gz goes on past a damaged gzip member to
    the next record; a stream stops at the first damage."""
    label = label or f"warc/{filename}"
    if not f.seekable():
        yield from _lines_of(f, filename, label, on_damage, start=0)
        return
    f.seek(0)
    if f.read(5) == b"WARC/":  # an uncompressed WARC file
        f.seek(0)
        yield from _lines_of(f, filename, label, on_damage, start=0)
        return
    for member in members(f, label):
        if isinstance(member, Damage):
            on_damage(member)
        else:
            yield from _lines_of(Window(f, member.offset, member.length), filename, label,
                                 on_damage, start=member.offset)


def _lines_of(f: IO[bytes] | Window, filename: str, label: str, on_damage: OnDamage,
              start: int) -> Iterator[str]:
    it = ArchiveIterator(f)
    try:
        for record in it:
            if record.rec_type in INDEXED_TYPES and not (
                    record.rec_headers.get_header("WARC-Target-URI") or "").startswith(SCREENSHOT):
                yield _record_line(record, it, filename)
    except Exception as exc:  # noqa: BLE001 - warcio raises assorted errors on bad records
        offset = it.offset if isinstance(it.offset, int) else start  # where the record began
        on_damage(Damage(label, offset, f"not a readable WARC record: {type(exc).__name__}: "
                         f"{str(exc)[:200]}"))


def _record_line(record: Any, it: ArchiveIterator, filename: str) -> str:
    headers = record.rec_headers
    http = record.http_headers
    mime = (
        REVISIT_MIME if record.rec_type == "revisit"
        else mime_of(http.get_header("Content-Type") if http else None)
    )
    status = http.get_statuscode() if http and record.rec_type != "resource" else None
    return cdxj_line(
        headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"), mime=mime,
        status=status, digest=headers.get_header("WARC-Payload-Digest"),
        length=it.get_record_length(), offset=it.get_record_offset(), filename=filename,
    )


def warc_files(warc_dir: Path) -> list[Path]:
    """Closed WARC files of the archive, in name order."""
    if not warc_dir.is_dir():
        return []
    names = sorted(n for n in os.listdir(warc_dir) if n.endswith(".warc.gz"))
    return readable((warc_dir / n for n in names), warc_dir.parent)


#: index lines sorted in memory at once; more are sorted in runs on disk and merged. Each
#: line (about 350 bytes) is held with its bytewise sort key: 20,000 take about 16 MB, what
#: the end of a 100,000-page run adds to its peak (bench/bigsite.py)
SORT_CHUNK = 20_000


def _bytewise(line: str) -> bytes:
    return line.encode("utf-8")


def write_index(path: Path, lines: Iterable[str], chunk: int = SORT_CHUNK) -> int:
    """Sort bytewise (what pywb's binary search needs) and replace the index atomically.

    An external merge sort: memory stays bounded by `chunk` lines however large the
    archive (a 1,000,000-capture index would otherwise take about 750 MB to sort)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".index-", dir=path.parent) as tmp:
        runs: list[Path] = []
        count = 0
        for batch in _batches(lines, chunk):
            run = Path(tmp) / f"{len(runs)}.run"
            run.write_text("".join(sorted(batch, key=_bytewise)), encoding="utf-8")
            runs.append(run)
            count += len(batch)
        with ExitStack() as stack:
            files = [stack.enter_context(open(r, encoding="utf-8", newline="\n")) for r in runs]
            atomic_write_lines(path, heapq.merge(*files, key=_bytewise))
    return count


def _batches(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def rebuild_from_warcs(warc_dir: Path, index_path: Path) -> tuple[int, int]:
    """(lines, WARC files) of the index made anew from the WARC files; a damaged record or
    file is reported and left out."""
    paths = warc_files(warc_dir)
    lines = (line for path in paths for line in lines_from_warc(path))
    return write_index(index_path, lines), len(paths)
