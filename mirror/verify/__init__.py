"""`mirror verify`: WARC files, manifest and index, in bounded memory; stricter than warcio."""

from __future__ import annotations

import json
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from mirror.archive import index
from mirror.archive.damage import Damage, printable
from mirror.archive.scratch import BytesCounter
from mirror.archive.warcwriter import OPEN_SUFFIX
from mirror.manifest.audit import Audit
from mirror.manifest.captures import CaptureReads
from mirror.model import CAPTURE_TYPES, RunState, UrlState
from mirror.model import WorkProgress as Progress
from mirror.model import work_stage as stage
from mirror.store.files import ArchiveFiles, LocalFiles, archive_files
from mirror.store.objstore import StoreError
from mirror.verify.facts import Originals, key
from mirror.verify.problem import Problem
from mirror.verify.record import uri_problem
from mirror.verify.stream import Head, Stream, read_head
from mirror.verify.warcfile import FileCheck, verify_warc

__all__ = ["ManifestLike", "Problem", "Verdict", "check_archive", "format_problems",
           "uri_problem", "verify_warc"]


@dataclass(frozen=True)
class Verdict:
    problems: tuple[Problem, ...]
    files: int
    records: int

    def summary(self) -> str:
        outcome = _count(len(self.problems), "problem") if self.problems else "OK"
        return f"verified {_count(self.files, 'file')}, {_count(self.records, 'record')}: " \
            + outcome


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def format_problems(problems: Iterable[Problem], per_check: int = 20) -> str:
    """One line per problem, at most `per_check` of each kind (a deleted file can mean 10^5)."""
    shown: Counter[str] = Counter()
    lines = []
    for p in problems:
        shown[p.check] += 1
        if shown[p.check] <= per_check:
            lines.append(printable(f"{p.where}: {p.check}: {p.detail}"))
    lines += [f"... and {n - per_check} more {check} problems"
              for check, n in shown.items() if n > per_check]
    return "\n".join(lines)


# -- the archive: every file, the manifest against the files, the index against both -------
@dataclass
class _Table:
    """Where a file's gzip members start, to tell whether (offset, length) is one member."""

    bounds: array[int]
    captures: array[int]
    recorded: bytearray

    def is_member(self, offset: int, length: int) -> bool:
        i = bisect_left(self.bounds, offset)
        return i + 1 < len(self.bounds) and self.bounds[i] == offset \
            and self.bounds[i + 1] == offset + length

    def record(self, offset: int) -> None:
        i = bisect_left(self.captures, offset)
        if i < len(self.captures) and self.captures[i] == offset:
            self.recorded[i] = 1


class _Seeker:
    """Reads the WARC headers of the record at an offset; keeps a few local files open (a
    record in a store is one ranged GET)."""

    def __init__(self, archive: ArchiveFiles, tables: dict[str, _Table]) -> None:
        self.archive, self.tables = archive, tables
        self.files: dict[str, IO[bytes]] = {}

    def head(self, name: str, offset: int, length: int) -> Head | str:
        """The record's headers, or why there is no whole record at (offset, length)."""
        table = self.tables.get(name)
        if table is None:
            return f"{name} is not in warc/"
        if not table.is_member(offset, length):
            return f"{name}@{offset} (length {length}) is not one whole gzip member"
        if self.archive.local is None:
            try:
                with self.archive.record_at(name, offset, length, head=True) as f:
                    return self._read(f)
            except StoreError as exc:
                return exc.reason
        return self._read(self._open(name, offset, length))

    @staticmethod
    def _read(f: IO[bytes]) -> Head | str:
        s = Stream(f)
        head = read_head(s) if s.next_member() else "nothing there"
        return head if not s.error else s.error

    def _open(self, name: str, offset: int, length: int) -> IO[bytes]:
        if name not in self.files:
            if len(self.files) >= 32:
                self.close()
            self.files[name] = self.archive.record_at(name, offset, length)
        f = self.files[name]
        f.seek(offset)
        return f

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


class _Row(Protocol):
    def __getitem__(self, key: str) -> Any: ...


class ManifestLike(Protocol):
    """What verify reads of a manifest; the writer and a read-only reader both fit."""

    @property
    def audit(self) -> Audit: ...
    @property
    def captures(self) -> CaptureReads: ...


def _check_row(row: _Row, seeker: _Seeker, originals: _OriginalIds) -> Iterator[tuple[str, str]]:
    """(check, detail) for what is wrong with one manifest capture row, against its records."""
    status = row["status"]
    if type(status) is not int or not 100 <= status <= 599:
        yield "manifest-value", f"status {status!r} is not an HTTP status (100 to 599)"
    name = row["filename"]
    head = seeker.head(name, row["offset"], row["length"])
    if isinstance(head, str):
        yield "manifest-record", f"response record: {head}"
    else:
        seeker.tables[name].record(row["offset"])
        yield from (("manifest-record", why) for why in _record_fields(row, head))
        if head.get("WARC-Type") in CAPTURE_TYPES:
            yield from (("manifest-record-type", why) for why in _record_type(row, head, originals))
    req = seeker.head(name, row["req_offset"], row["req_length"])
    if isinstance(req, str):
        yield "manifest-record", f"request record: {req}"
    elif req.get("WARC-Type") != "request" or row["record_id"] not in \
            req.get_all("WARC-Concurrent-To"):
        yield "manifest-record", f"{name}@{row['req_offset']} is not the request of this capture"


def _record_fields(row: _Row, head: Head) -> Iterator[str]:
    """Where the row's URL, record id, date or payload digest differ from the record's."""
    if head.get("WARC-Type") not in CAPTURE_TYPES:
        yield f"the record at {row['filename']}@{row['offset']} is a {head.get('WARC-Type')} record"
    for header, column in (("WARC-Target-URI", "url"), ("WARC-Record-ID", "record_id"),
                           ("WARC-Date", "warc_date"), ("WARC-Payload-Digest", "payload_digest")):
        if head.get(header) != row[column]:
            yield f"{header} is {head.get(header)}, the manifest says {row[column]}"


#: the record each manifest record_type stands for, as _kind() describes records
KINDS = {"response": "response", "revisit": "revisit (identical-payload-digest)",
         "not-modified": "revisit (server-not-modified)"}


def _kind(head: Head) -> str:
    """A response or revisit record's type, with the last part of a revisit's profile."""
    if head.get("WARC-Type") != "revisit":
        return head.get("WARC-Type") or ""
    profile = head.get("WARC-Profile")
    return f"revisit ({profile.rstrip('/').rsplit('/', 1)[-1] if profile else 'no WARC-Profile'})"


def _record_type(row: _Row, head: Head, originals: _OriginalIds) -> Iterator[str]:
    """The row's record_type and original_id against the record's type, profile and target."""
    rtype, original = row["record_type"], row["original_id"]
    if KINDS.get(rtype) != (kind := _kind(head)):
        yield f"the manifest says {rtype}, the record is a {kind}"
    elif rtype == "response" and original is not None:
        yield f"the manifest says response with original_id {original}; only revisits have one"
    elif rtype != "response":
        refers_to = head.get("WARC-Refers-To")
        if original is None:
            yield f"the manifest says {rtype} with no original_id; WARC-Refers-To is {refers_to}"
        elif (record_id := originals.record_id(row["id"])) is None:
            yield f"original_id {original} names no capture in the manifest"
        elif record_id != refers_to:
            yield f"original_id {original} is the capture of {record_id}, but WARC-Refers-To " \
                f"is {refers_to}"


class _OriginalIds:
    """The record id of each revisit row's original, read in id order beside the captures."""

    def __init__(self, manifest: ManifestLike) -> None:
        self.rows = manifest.audit.revisit_originals()
        self.row: tuple[int, str | None] | None = next(self.rows, None)

    def record_id(self, capture_id: int) -> str | None:
        """Capture `capture_id`'s original's record id; None if original_id names no capture.

        Asked in rising capture_id order, as manifest.captures.all() gives them."""
        while self.row is not None and self.row[0] < capture_id:
            self.row = next(self.rows, None)
        return self.row[1] if self.row is not None and self.row[0] == capture_id else None

    def close(self) -> None:
        self.rows.close()


def _check_manifest(manifest: ManifestLike, seeker: _Seeker) -> Iterator[Problem]:
    missing: Counter[str] = Counter()
    originals = _OriginalIds(manifest)
    try:
        for row in manifest.captures.all():
            if row["filename"] not in seeker.tables:
                missing[row["filename"]] += 1
                continue
            for check, why in _check_row(row, seeker, originals):
                yield Problem(f"manifest: capture {row['id']}", check, why)
    finally:
        originals.close()
    yield from _check_states(manifest)
    for name, n in sorted(missing.items()):
        yield Problem(f"warc/{name}", "manifest-missing-file",
                      f"{n} manifest captures point into this file, which does not exist")
    for name, table in seeker.tables.items():
        for offset, seen in zip(table.captures, table.recorded, strict=True):
            if not seen:
                yield Problem(f"warc/{name}@{offset}", "manifest-unrecorded",
                              "a response or revisit record with no capture in the manifest")


#: the values a manifest's state columns may hold (model.RunState, model.UrlState)
STATES: dict[Literal["runs", "urls"], tuple[str, ...]] = {
    "runs": tuple(RunState), "urls": tuple(UrlState)}


def _check_states(manifest: ManifestLike) -> Iterator[Problem]:
    """Runs and URLs in a state mirror does not know (a run 'weird' would be neither
    resumed nor reported)."""
    for table, states in STATES.items():
        known = ", ".join(f"'{s}'" for s in states)
        rows = manifest.audit.unknown_states(table, states)
        try:
            for row_id, state in rows:
                yield Problem(f"manifest: {table[:-1]} {row_id}", "manifest-value",
                              f"state {state!r} is not one of {known}")
        finally:
            rows.close()


def _index_lines(archive: ArchiveFiles, names: Iterable[str]) -> Iterator[str | Problem]:
    """What `mirror index` makes of the WARC files, or why it cannot read one."""
    for name in names:
        try:
            with archive.stream(name) as f:  # its damage: FileCheck's problems
                yield from index.lines_from_stream(f, name, on_damage=_told_already)
        except StoreError as exc:
            yield Problem(f"warc/{name}", "index-mismatch", f"cannot read this file: "
                          f"{exc.reason}")
        except Exception as exc:  # noqa: BLE001 - warcio raises assorted errors on bad files
            yield Problem(f"warc/{name}", "index-mismatch",
                          f"`mirror index` cannot read this file: {type(exc).__name__}: {exc}")


def _told_already(damage: Damage) -> None:
    """A damaged record `mirror index` leaves out: the file's own checks report it."""


def _readback(line: bytes, seeker: _Seeker) -> str | None:
    try:
        fields = json.loads(line.split(b" ", 2)[2])
        name, offset, length = fields["filename"], int(fields["offset"]), int(fields["length"])
        url = fields["url"]
    except (IndexError, KeyError, TypeError, ValueError):
        return "not a CDXJ line with url, offset, length and filename"
    head = seeker.head(name, offset, length)
    if isinstance(head, str):
        return head
    if head.get("WARC-Target-URI") != url:
        return f"the record there is for {head.get('WARC-Target-URI')}, not {url}"
    return None


def _check_index(archive: ArchiveFiles, files: list[str],
                 seeker: _Seeker) -> Iterator[Problem]:
    """W9: sorted bytewise, equal to what `mirror index` makes, every line reads back."""
    f = archive.open_index()
    if f is None:
        if files:
            yield Problem("index.cdxj", "index-missing", "no index; `mirror index` rebuilds it")
        return
    f.close()
    expected = BytesCounter()  # in a scratch table: a million-page archive's lines
    try:
        unreadable: list[Problem] = []
        expected.add_all(_keys(_index_lines(archive, files), unreadable))
        yield from unreadable
        yield from _index_file(archive, expected, seeker)
        if expected.total > 0:
            for line in _index_lines(archive, files):
                if isinstance(line, str) and expected.take(key(line)):
                    yield Problem("index.cdxj", "index-mismatch",
                                  f"line missing: {line.strip()}")
    finally:
        expected.close()


def _keys(lines: Iterable[str | Problem], problems: list[Problem]) -> Iterator[bytes]:
    """The key of each line; the problems among them go to `problems`."""
    for line in lines:
        if isinstance(line, Problem):
            problems.append(line)
        else:
            yield key(line)


def _index_file(archive: ArchiveFiles, expected: BytesCounter,
                seeker: _Seeker) -> Iterator[Problem]:
    prev, unsorted = b"", []
    f = archive.open_index()
    if f is None:  # gone since it was looked at
        return
    with f:
        for n, raw in enumerate(f, 1):
            if raw < prev:
                unsorted.append(n)
            prev = raw
            if not expected.take(key(raw.decode("utf-8", "replace"))):
                yield Problem(f"index.cdxj:{n}", "index-mismatch",
                              "not a line `mirror index` makes from the WARC files")
            if why := _readback(raw, seeker):
                yield Problem(f"index.cdxj:{n}", "index-readback", why)
    if unsorted:
        yield Problem(f"index.cdxj:{unsorted[0]}", "index-unsorted", f"this line and "
                      f"{len(unsorted) - 1} more sort bytewise before the line above them")


def check_archive(output_dir: Path | ArchiveFiles, manifest: ManifestLike | None,
                  on_progress: Progress | None = None) -> Verdict:
    """Every WARC file under warc/, the manifest against them, the index against both.
    `output_dir` is the archive folder, or its files elsewhere (store.files: a store,
    whose files are streamed, and whose records are read by ranged GETs). on_progress:
    bytes of WARC files read, of all (model.work_stage names the steps)."""
    refused: list[Problem] = []
    archive = archive_files(output_dir) if isinstance(output_dir, ArchiveFiles) else \
        LocalFiles(output_dir, lambda d: refused.append(Problem(d.where, "refused-file", d.what)))
    listed = archive.warc_files()
    files = [name for name in listed if not name.endswith(OPEN_SUFFIX)]
    problems = refused + [Problem(f"warc/{name}", "open-file", "left open by a run that did "
                                  "not finish; the next `mirror run` repairs and closes it")
                          for name in listed if name.endswith(OPEN_SUFFIX)]
    originals, tables, records = Originals(), {}, 0
    total, before = sum(listed[name] for name in files), 0
    stage(on_progress, "reading the WARC files (bytes)", total)
    try:
        for name in files:
            check = _file_check(archive, name, listed[name], originals,
                                _offset_progress(on_progress, before, total))
            before += listed[name]
            try:
                problems += check.run()
            except StoreError as exc:
                problems.append(Problem(f"warc/{name}", "unreadable", exc.reason))
            records += check.records
            tables[name] = _Table(check.bounds, check.captures,
                                  bytearray(len(check.captures)))
        problems += originals.problems()
    finally:
        originals.close()
    stage(on_progress, "the manifest and the index against the WARC files")
    seeker = _Seeker(archive, tables)
    try:
        if manifest is not None:
            problems += _check_manifest(manifest, seeker)
        problems += _check_index(archive, files, seeker)
    finally:
        seeker.close()
    return Verdict(tuple(problems), len(files), records)


def _offset_progress(on_progress: Progress | None, before: int, total: int
                     ) -> Callable[[int], None] | None:
    """read_to(offset) of one file as on_progress(bytes read of all files, total)."""
    if on_progress is None:
        return None
    return lambda offset: on_progress(before + offset, total)


def _file_check(archive: ArchiveFiles, name: str, size: int, originals: Originals,
                read_to: Callable[[int], None] | None = None) -> FileCheck:
    if isinstance(archive, LocalFiles):
        return FileCheck(archive.path(name), f"warc/{name}", originals, read_to=read_to)
    return FileCheck(Path(name), f"warc/{name}", originals, lambda: archive.stream(name),
                     size, read_to)
