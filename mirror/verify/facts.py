"""What verify keeps of the records it has read, to check them against each other, in
scratch tables (archive/scratch.py) rather than in memory: a WARC file's record ids and its
request/response pairs (W3), and an archive's captures and revisits (a revisit's original
may be in any file). As dicts and objects these took about 1.9 KB a capture: a 1 GB WARC
file of 2 KB pages held 400,000 captures and verify peaked at 781 MB on it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from mirror.archive.scratch import OriginalsTable, PairTable
from mirror.verify.problem import Problem
from mirror.verify.stream import Head

#: record ids checked at once
BATCH = 2_000


def key(*parts: str, size: int = 16) -> bytes:
    """A `size`-byte stand-in for strings, so the tables stay small."""
    return hashlib.blake2b("\0".join(parts).encode("utf-8"), digest_size=size).digest()


def short_key(*parts: str) -> int:
    """An 8-byte stand-in for a record id, or a URI and date, as SQLite's integer key (a
    rowid: the fastest table). Two of ten million share one with a chance of about 3 in a
    million."""
    return int.from_bytes(key(*parts, size=8), "big", signed=True)


@dataclass(frozen=True)
class Revisit:
    where: str
    profile: str
    refers_to: str | None
    uri: str | None
    date: str | None
    digest: str | None

    @classmethod
    def of(cls, head: Head, where: str) -> Revisit:
        return cls(where, head.get("WARC-Profile") or "", head.get("WARC-Refers-To"),
                   head.get("WARC-Refers-To-Target-URI"), head.get("WARC-Refers-To-Date"),
                   head.get("WARC-Payload-Digest"))

    def problem(self, originals: OriginalsTable) -> str | None:
        if not self.uri or not self.date:
            return "no WARC-Refers-To-Target-URI or WARC-Refers-To-Date"
        at = short_key(self.uri, self.date)
        digest = originals.digest_at(at)
        if digest is None:
            return f"no record of {self.uri} at {self.date} in the archive"
        if self.profile.endswith("/identical-payload-digest") \
                and digest != short_key(self.digest or ""):
            return f"the record of {self.uri} at {self.date} has another payload digest"
        if self.refers_to and originals.capture_of(short_key(self.refers_to)) != at:
            return f"WARC-Refers-To {self.refers_to} is not the record of {self.uri} at {self.date}"
        return None


class Originals:
    """What revisits may point at, of one file or of every file of an archive, and the
    revisits read, to check once every file is read."""

    def __init__(self) -> None:
        self._table = OriginalsTable()

    def add(self, head: Head) -> None:
        at = short_key(head.get("WARC-Target-URI") or "", head.get("WARC-Date") or "")
        self._table.add(at, short_key(head.get("WARC-Payload-Digest") or ""),
                        short_key(head.get("WARC-Record-ID") or ""))

    def add_revisit(self, revisit: Revisit) -> None:
        self._table.add_revisit((revisit.where, revisit.profile, revisit.refers_to,
                                 revisit.uri, revisit.date, revisit.digest))

    def problems(self) -> Iterator[Problem]:
        """Each revisit whose original is not what it says, in the order read."""
        for row in self._table.revisits():
            revisit = Revisit(*cast(tuple[str, str, str | None, str | None, str | None,
                                          str | None], row))
            if why := revisit.problem(self._table):
                yield Problem(revisit.where, "revisit-target", why)

    def close(self) -> None:
        self._table.close()


class Pairs:
    """W3: each response/revisit of a file has exactly one request, linked by
    WARC-Concurrent-To (either way); and each record id used once in the file."""

    def __init__(self) -> None:
        self._table = PairTable()
        self.excused: str | None = None  # the last capture of a torn file: its request
                                         # was torn off
        self._ids: list[tuple[int, str, str]] = []  # (key, where, record id) not yet checked

    def note_id(self, record_id: str, where: str) -> Iterator[Problem]:
        """A record's id; every BATCH ids, the problems of those used before in the file
        (each said where it is used again)."""
        self._ids.append((short_key(record_id), where, record_id))
        if len(self._ids) >= BATCH:
            yield from self.duplicates()

    def duplicates(self) -> Iterator[Problem]:
        """The ids noted since the last call that were used before, as problems."""
        ids, self._ids = self._ids, []
        first = self._table.note_ids([(k, where) for k, where, _ in ids]) if ids else {}
        for k, where, record_id in ids if first else ():
            if first[k] != where:
                yield Problem(where, "duplicate-record-id",
                              f"{record_id} is used twice in this file")

    def add(self, head: Head, where: str, *, subject: bool) -> None:
        """A request (not `subject`), or a response or revisit of an http(s) URI."""
        rid = short_key(head.get("WARC-Record-ID") or "")
        self._table.add(rid, where, head.get("WARC-Target-URI") or "",
                        head.get("WARC-Date") or "", subject=subject)
        for other in head.get_all("WARC-Concurrent-To"):
            other_key = short_key(other)
            self._table.link(other_key if subject else rid, rid if subject else other_key)

    def problems(self) -> Iterator[Problem]:
        yield from self.duplicates()
        for rid, where, uri, date in self._table.requests():
            subjects = self._table.subjects_of(cast(int, rid))
            if not subjects:
                yield Problem(cast(str, where), "orphan-request",
                              "no response or revisit in this file is WARC-Concurrent-To it")
            yield from (_mismatch(str(where), f"{uri} {date}", f"{s[0]} {s[1]}")
                        for s in subjects if s != (uri, date))
        excused = short_key(self.excused) if self.excused is not None else None
        for sid, where, found in self._table.subjects():
            if found == 0 and sid != excused:
                yield Problem(str(where), "missing-request", "no request record for this capture")
            elif cast(int, found) > 1:
                yield Problem(str(where), "extra-request", f"{found} request records")

    def close(self) -> None:
        self._table.close()


def _mismatch(where: str, request: str, subject: str) -> Problem:
    return Problem(where, "concurrent-to", "request and response differ in "
                   f"WARC-Target-URI or WARC-Date ({request} vs {subject})")
