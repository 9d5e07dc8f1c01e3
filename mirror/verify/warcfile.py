"""Checks on one WARC file: each record, then what its records say of each other."""

from __future__ import annotations

import io
from array import array
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO, Any, cast

from mirror.archive.warcwriter import OPEN_SUFFIX
from mirror.model import CAPTURE_TYPES
from mirror.verify.facts import Originals, Pairs, Revisit
from mirror.verify.problem import Problem
from mirror.verify.record import Block, head_problems
from mirror.verify.stream import CHUNK, Head, Stream, read_head


# -- one WARC file ---------------------------------------------------------------------------
class FileCheck:
    """Streams one WARC file, yielding problems, and keeps what the archive checks need:
    its captures and revisits go to `originals` (the archive's). `opener` gives the file
    from its start when it is not a local path (an object in a store, of `size` bytes)."""

    def __init__(self, path: Path, label: str, originals: Originals,
                 opener: Callable[[], IO[bytes]] | None = None, size: int | None = None,
                 read_to: Callable[[int], None] | None = None) -> None:
        self.path, self.label = path, label
        self.read_to = read_to  # read_to(offset) after each gzip member: progress
        self.opener = opener or (lambda: open(path, "rb"))
        self._size = size
        self.name = path.name.removesuffix(OPEN_SUFFIX)
        self.records = 0
        self.bounds = array("q")  # start of each complete gzip member, then the end of the last
        self.captures = array("q")  # members holding a response or revisit
        self.originals = originals
        self.pairs = Pairs()
        self.infos: set[str] = set()
        self.first_type: str | None = None
        self.info_refs: list[tuple[str, str | None]] = []
        self.multi = False
        self.gzipped = True

    def run(self) -> Iterator[Problem]:
        try:
            yield from self._run()
        finally:
            self.pairs.close()

    def _run(self) -> Iterator[Problem]:
        with self.opener() as raw:
            f = raw if isinstance(raw, io.BufferedReader) \
                else io.BufferedReader(cast(Any, raw), CHUNK)
            self.gzipped = not f.peek(5)[:5].startswith(b"WARC/")
            if not self.gzipped and self.path.name.endswith(".gz"):
                yield Problem(self.label, "not-gzip", "the file is not gzip-compressed")
            s = Stream(f, self.gzipped)
            end = 0
            while True:
                while s.next_member():
                    yield from self._member(s)
                    if self.read_to is not None:
                        self.read_to(s.raw_at)
                    if self.gzipped and not (s.torn or s.error):  # a whole member, good or not
                        self.bounds.append(s.member_at)
                        end = s.raw_at
                damaged, error = s.member_at, s.error
                if not (error and s.resume()):
                    break
                self.bounds.append(damaged)  # where the member before it ends
                yield Problem(f"{self.label}@{damaged}", "gzip-error", f"not a gzip member: "
                              f"{error}; read on at the next record, @{s.member_at}")
            self.bounds.append(end)
            yield from self._tail(s)
        yield from self._file_end()

    def _tail(self, s: Stream) -> Iterator[Problem]:
        where = f"{self.label}@{s.member_at}"
        if s.torn:
            size = self._size if self._size is not None else self.path.stat().st_size
            yield Problem(where, "torn-member", f"the file ends {size - s.member_at} bytes "
                          "into this gzip member, before the member is complete")
        elif s.error:
            yield Problem(where, "gzip-error", f"not a gzip member: {s.error}")
        if not (s.torn or s.error):
            self.pairs.excused = None  # nothing was torn off after the last capture

    def _member(self, s: Stream) -> Iterator[Problem]:
        """The records of one gzip member (one, unless the writer got it wrong)."""
        first = True
        while True:
            where = f"{self.label}@{s.member_at}" + ("" if first else f"+{s.pos}")
            ok = yield from self._record(s, where, s.member_at if first else None)
            if not ok:
                s.skip()
                return
            if s.at_end():
                return
            if s.gzipped and not self.multi:
                self.multi = True
                yield Problem(where, "not-multi-member-gzip", "several records in one gzip "
                              "member; each record must be its own member")
            first = False

    def _record(self, s: Stream, where: str,
                member_at: int | None) -> Generator[Problem, None, bool]:
        head = read_head(s)
        if isinstance(head, str):
            if not (s.torn or s.error):
                yield Problem(where, "record-parse", head)
            return False
        self.records += 1
        yield from head_problems(head, where)
        length = head.get("Content-Length") or ""
        if not length.isdigit():
            yield from self._note(head, where, member_at)
            return False
        block = Block(head)
        framed = yield from self._block(s, int(length), block, where)
        if s.torn or s.error:
            return False
        if framed:
            for check, detail in block.finish(bool(head.get("WARC-Truncated"))):
                yield Problem(where, check, detail)
        yield from self._note(head, where, member_at)
        return framed

    def _block(self, s: Stream, length: int, block: Block,
               where: str) -> Generator[Problem, None, bool]:
        left = length
        while left and (data := s.read(min(left, CHUNK))):
            block.feed(data)
            left -= len(data)
        if s.torn or s.error:
            return False
        if left:
            yield Problem(where, "content-length", f"Content-Length is {length} but the "
                          f"record ends after {length - left} bytes")
            return False
        if (tail := s.read(4)) != b"\r\n\r\n" and not (s.torn or s.error):
            extra = len(tail) + (s.skip() if s.gzipped else 0)
            yield Problem(where, "content-length", f"Content-Length is {length} but the block "
                          f"is followed by {extra}+ bytes, not CRLF CRLF")
            return False
        return True

    def _note(self, head: Head, where: str, member_at: int | None) -> Iterator[Problem]:
        rec_type, rid = head.get("WARC-Type") or "", head.get("WARC-Record-ID") or ""
        yield from self.pairs.note_id(rid, where)
        yield from self._warcinfo(head, rec_type, rid, where)
        if rec_type == "request":
            self.pairs.add(head, where, subject=False)
        elif rec_type in CAPTURE_TYPES and (head.get("WARC-Target-URI") or "").startswith(
                ("http:", "https:")):
            self.pairs.add(head, where, subject=True)
        if rec_type not in ("conversion", "resource"):  # a render between response and request
            self.pairs.excused = rid if rec_type in CAPTURE_TYPES else None
        if rec_type in CAPTURE_TYPES:
            self.originals.add(head)
            if member_at is not None and self.gzipped:
                self.captures.append(member_at)
        if rec_type == "revisit":
            self.originals.add_revisit(Revisit.of(head, where))

    def _warcinfo(self, head: Head, rec_type: str, rid: str, where: str) -> Iterator[Problem]:
        if self.first_type is None:
            self.first_type = rec_type
            if rec_type != "warcinfo":
                yield Problem(where, "missing-warcinfo",
                              f"the file starts with a {rec_type} record, not warcinfo")
            elif (name := head.get("WARC-Filename")) != self.name:
                yield Problem(where, "warcinfo-filename",
                              f"WARC-Filename is {name!r}, the file is {self.name!r}")
        if rec_type == "warcinfo":
            self.infos.add(rid)
        elif (ref := head.get("WARC-Warcinfo-ID")) not in self.infos:
            self.info_refs.append((where, ref))  # maybe a warcinfo further on; decided at the end

    def _file_end(self) -> Iterator[Problem]:
        if self.first_type is None:
            yield Problem(self.label, "missing-warcinfo", "the file holds no record")
        if self.infos:
            for where, ref in self.info_refs:
                if ref not in self.infos:
                    yield Problem(where, "warcinfo-id", f"WARC-Warcinfo-ID {ref} is not a "
                                  "warcinfo record of this file")
        yield from self.pairs.problems()


def verify_warc(path: Path) -> Iterator[Problem]:
    """Every check one WARC file allows on its own; revisits must point inside the file."""
    originals = Originals()
    try:
        yield from FileCheck(path, path.name, originals).run()
        yield from originals.problems()
    finally:
        originals.close()
