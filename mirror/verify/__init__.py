"""`mirror verify`: WARC files, manifest and index, in bounded memory; stricter than warcio."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import urlsplit

from mirror.archive import index
from mirror.archive.manifest import Manifest
from mirror.archive.warcwriter import OPEN_SUFFIX

CHUNK = 1 << 16
MAX_LINE = 1 << 16  # longest WARC header line read
MAX_HEAD = 1 << 20  # largest WARC or HTTP header block read
HTTP_TYPES = ("response", "request", "revisit")
CAPTURE_TYPES = ("response", "revisit")
REQUIRED = ("WARC-Record-ID", "WARC-Date", "WARC-Type", "Content-Length")
_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")
_RECORD_ID = re.compile(r"<[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>]+>")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HTTP_END = re.compile(rb"\n\r?\n")
_STATUS_LINE = re.compile(r"HTTP/\d(\.\d)? \d{3}( .*)?")
_REQUEST_LINE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ \S+ HTTP/\d(\.\d)?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(;[^\r\n]*)?\r\n")
_TRAILER = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r\n]*\r\n")


@dataclass(frozen=True)
class Problem:
    """One thing wrong, where it is, and a stable token naming the check that failed."""

    where: str  # "warc/x.warc.gz@1234", "manifest: capture 17", "index.cdxj:5"
    check: str
    detail: str


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
            lines.append(f"{p.where}: {p.check}: {p.detail}")
    lines += [f"... and {n - per_check} more {check} problems"
              for check, n in shown.items() if n > per_check]
    return "\n".join(lines)


# -- reading: gzip members and WARC headers ------------------------------------------------
class _Stream:
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
class _Head:
    version: str
    fields: dict[str, list[str]]  # lower-case name -> values in order

    def get(self, name: str) -> str | None:
        values = self.fields.get(name.lower())
        return values[0] if values else None

    def get_all(self, name: str) -> list[str]:
        return self.fields.get(name.lower(), [])


def _read_head(s: _Stream) -> _Head | str:
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
    return _Head(first[:-2].decode("latin-1"), fields)


# -- one record block: digests, HTTP headers, chunked framing -----------------------------
class _Digest:
    """A WARC digest header (`algo:value`, base32/base16/base64) and the hash to compare."""

    def __init__(self, header: str) -> None:
        algo, sep, value = header.partition(":")
        self.hash = _new_hash(algo)
        self.expected = _decode_digest(value.strip(), self.hash.digest_size) if sep else None
        if self.expected is None:
            raise ValueError(f"cannot read digest {header!r}")

    def matches(self) -> bool:
        return self.hash.digest() == self.expected


def _new_hash(algo: str) -> Any:
    for name in (algo.strip().lower(), algo.strip().lower().replace("-", "")):
        if name and not name.startswith("shake"):
            try:
                return hashlib.new(name)
            except ValueError:
                continue
    raise ValueError(f"unknown digest algorithm {algo!r}; not checked")


def _decode_digest(value: str, size: int) -> bytes | None:
    decoders: tuple[Callable[[str], bytes], ...] = (
        lambda v: base64.b32decode(v + "=" * (-len(v) % 8), casefold=True),
        lambda v: base64.b16decode(v, casefold=True),
        lambda v: base64.b64decode(v + "=" * (-len(v) % 4), altchars=b"-_" if "-" in v
                                   or "_" in v else None, validate=True),
    )
    for decode in decoders:
        try:
            raw = decode(value)
        except ValueError:
            continue
        if len(raw) == size:
            return raw
    return None


class _Chunks:
    """Incremental check that a body is exactly HTTP/1.1 chunked framing (RFC 9112 7.1)."""

    def __init__(self, sink: Any = None) -> None:
        self.state = "size"  # size | data | crlf | trailer | done
        self.line = bytearray()
        self.left = 0
        self.bad = ""
        self.sink = sink  # hash of the de-chunked data

    def feed(self, data: bytes) -> None:
        i = 0
        while i < len(data) and not self.bad:
            if self.state == "data":
                take = min(self.left, len(data) - i)
                if self.sink is not None:
                    self.sink.update(data[i:i + take])
                i, self.left = i + take, self.left - take
                self.state = "data" if self.left else "crlf"
            elif self.state == "done":
                self.bad = "bytes after the last chunk"
            else:
                j = data.find(b"\n", i)
                end = len(data) if j < 0 else j + 1
                self.line += data[i:end]
                i = end
                if len(self.line) > 4096:
                    self.bad = "a chunk-size or trailer line longer than 4096 bytes"
                elif j >= 0:
                    self._line(bytes(self.line))
                    self.line.clear()

    def _line(self, line: bytes) -> None:
        if self.state == "crlf":
            if line == b"\r\n":
                self.state = "size"
            else:
                self.bad = "chunk data not followed by CRLF"
        elif self.state == "size":
            m = _CHUNK_SIZE.fullmatch(line)
            if m is None:
                self.bad = f"not a chunk-size line: {line[:30]!r}"
                return
            self.left = int(m[1], 16)
            self.state = "data" if self.left else "trailer"
        elif line == b"\r\n":
            self.state = "done"
        elif not _TRAILER.fullmatch(line):
            self.bad = f"not a trailer line: {line[:30]!r}"

    def complete(self) -> bool:
        return not self.bad and self.state == "done"

    def why(self) -> str:
        if self.bad or self.state != "size" or not self.line:
            return self.bad or "the body ends inside the chunked framing"
        return f"not a chunk-size line: {bytes(self.line[:30])!r}"


class _Block:
    """One record block streamed through its digests, HTTP header parse and chunk check."""

    def __init__(self, head: _Head) -> None:
        self.type = head.get("WARC-Type") or ""
        uri = head.get("WARC-Target-URI") or ""
        self.problems: list[tuple[str, str]] = []
        self.block = self._digest(head, "WARC-Block-Digest", "block-digest")
        payload_known = self.type != "revisit" and not head.get("WARC-Segment-Number")
        self.payload = self._digest(head, "WARC-Payload-Digest", "payload-digest") \
            if payload_known else None
        self.dechunked: Any = None
        self.http = bytearray() if self.type in HTTP_TYPES and uri.startswith(
            ("http:", "https:")) else None
        self.fields: dict[str, list[str]] = {}
        self.chunks: _Chunks | None = None
        self.te_chunked = False  # the stored HTTP headers still say Transfer-Encoding: chunked
        self.length = self.body = 0

    def _digest(self, head: _Head, name: str, check: str) -> _Digest | None:
        value = head.get(name)
        try:
            return _Digest(value) if value else None
        except ValueError as exc:
            self.problems.append((check, str(exc)))
            return None

    def feed(self, data: bytes) -> None:
        self.length += len(data)
        if self.block:
            self.block.hash.update(data)
        if self.http is not None:
            data = self._feed_http(data)
        if data:
            self.body += len(data)
            if self.payload:
                self.payload.hash.update(data)
            if self.chunks:
                self.chunks.feed(data)

    def _feed_http(self, data: bytes) -> bytes:
        assert self.http is not None
        start = max(len(self.http) - 2, 0)
        self.http += data
        m = _HTTP_END.search(self.http, start)
        if m is None:
            if len(self.http) > MAX_HEAD:
                self._bad_http(f"no blank line in the first {MAX_HEAD} bytes")
            return b""
        head, rest = bytes(self.http[:m.end()]), bytes(self.http[m.end():])
        self.http = None
        self._http_head(head.decode("latin-1").split("\n"))
        return rest

    def _bad_http(self, why: str) -> None:
        self.problems.append(("http-headers", why))
        self.http, self.payload = None, None

    def _http_head(self, lines: list[str]) -> None:
        first = lines[0].rstrip("\r")
        pattern = _REQUEST_LINE if self.type == "request" else _STATUS_LINE
        if not pattern.fullmatch(first):
            self.problems.append(("http-headers", f"bad first line {first[:60]!r}"))
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                self.fields.setdefault(name.strip().lower(), []).append(value.strip())
        self.te_chunked = "chunked" in self._header("transfer-encoding")
        if self.te_chunked:
            self.dechunked = hashlib.new(self.payload.hash.name) if self.payload else None
            self.chunks = _Chunks(self.dechunked)
        elif "chunked" in self._header("x-mirror-orig-transfer-encoding"):
            self.chunks = _Chunks()

    def _header(self, name: str) -> str:
        return ",".join(self.fields.get(name, [])).lower()

    def finish(self, truncated: bool) -> list[tuple[str, str]]:
        if self.http and self.length:
            self._bad_http("no blank line ends the HTTP headers")
        if self.block and not self.block.matches():
            self.problems.append(("block-digest", "WARC-Block-Digest does not match the block"))
        self._check_payload()
        self._check_chunks(truncated)
        self._check_http_length(truncated)
        return self.problems

    def _check_payload(self) -> None:
        if self.payload is None or self.payload.matches():
            return
        if self.dechunked is not None and self.chunks and self.chunks.complete() \
                and self.dechunked.digest() == self.payload.expected:
            return  # digest of the de-chunked entity: what some other crawlers write
        self.problems.append(("payload-digest", "WARC-Payload-Digest does not match the "
                              "payload (the block after the HTTP headers)"))

    def _check_chunks(self, truncated: bool) -> None:
        c = self.chunks
        if c is None or not self.body:
            return
        if self.te_chunked:
            if not (c.complete() or truncated and not c.bad):
                self.problems.append(("chunked", "HTTP headers say Transfer-Encoding: chunked "
                                      f"but the body is not chunked framing ({c.why()})"))
        elif c.complete():
            self.problems.append(("chunked", "Transfer-Encoding was renamed but the body "
                                  "still has chunked framing"))

    def _check_http_length(self, truncated: bool) -> None:
        declared = self.fields.get("content-length", [""])[0]
        if self.type != "response" or truncated or self.te_chunked or not self.body \
                or not declared.isdigit():
            return
        if int(declared) != self.body:
            self.problems.append(("http-content-length", f"HTTP Content-Length is {declared} "
                                  f"but the stored body has {self.body} bytes"))


def _head_problems(head: _Head, where: str) -> Iterator[Problem]:
    if head.version not in ("WARC/1.0", "WARC/1.1"):
        yield Problem(where, "warc-version", f"{head.version!r} is not WARC/1.0 or WARC/1.1")
    for name in REQUIRED:
        if not head.get(name):
            yield Problem(where, "missing-header", f"no {name}")
    if (length := head.get("Content-Length")) and not length.isdigit():
        yield Problem(where, "content-length", f"Content-Length {length!r} is not a number")
    if (date := head.get("WARC-Date")) and not _DATE.fullmatch(date):
        yield Problem(where, "warc-date", f"WARC-Date {date!r} is not YYYY-MM-DDThh:mm:ssZ")
    if (rid := head.get("WARC-Record-ID")) and not _RECORD_ID.fullmatch(rid):
        yield Problem(where, "record-id", f"WARC-Record-ID {rid!r} is not <scheme:...>")
    uri = head.get("WARC-Target-URI")
    if uri is None and head.get("WARC-Type") in (*HTTP_TYPES, "resource"):
        yield Problem(where, "missing-header", "no WARC-Target-URI")
    elif uri is not None and (why := uri_problem(uri)):
        yield Problem(where, "target-uri", f"WARC-Target-URI {uri!r} {why}")


def uri_problem(uri: str) -> str | None:
    """Why a WARC-Target-URI is not a valid RFC 3986 URI as W4 requires, or None."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in uri):
        return "contains a space or a control character"
    if any(ord(c) > 0x7E for c in uri):
        return "contains non-ASCII characters (they must be percent-encoded)"
    if not _URI.fullmatch(uri):
        return "contains characters RFC 3986 does not allow, or has no scheme"
    if _BAD_PERCENT.search(uri):
        return "has a '%' not followed by two hex digits"
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        return "contains userinfo"
    if "[" in uri.replace(parts.netloc, "", 1) or "]" in uri.replace(parts.netloc, "", 1):
        return "contains '[' or ']' outside an IPv6 host"
    if parts.scheme in ("http", "https") and not parts.hostname:
        return "has no host"
    return None


# -- cross-record facts: warcinfo, request pairing, revisit targets ------------------------
def _key(*parts: str) -> bytes:
    """A 16-byte stand-in for a string, so archive-wide maps stay small (~100 bytes/record)."""
    return hashlib.blake2b("\0".join(parts).encode("utf-8"), digest_size=16).digest()


@dataclass
class _Originals:
    """What revisits may point at: (uri, date) -> payload digest; record id -> (uri, date)."""

    captures: dict[bytes, bytes] = field(default_factory=dict)
    ids: dict[bytes, bytes] = field(default_factory=dict)

    def add(self, head: _Head) -> None:
        at = _key(head.get("WARC-Target-URI") or "", head.get("WARC-Date") or "")
        self.captures[at] = _key(head.get("WARC-Payload-Digest") or "")
        self.ids[_key(head.get("WARC-Record-ID") or "")] = at

    def update(self, other: _Originals) -> None:
        self.captures.update(other.captures)
        self.ids.update(other.ids)


@dataclass(frozen=True)
class _Revisit:
    where: str
    profile: str
    refers_to: str | None
    uri: str | None
    date: str | None
    digest: str | None

    @classmethod
    def of(cls, head: _Head, where: str) -> _Revisit:
        return cls(where, head.get("WARC-Profile") or "", head.get("WARC-Refers-To"),
                   head.get("WARC-Refers-To-Target-URI"), head.get("WARC-Refers-To-Date"),
                   head.get("WARC-Payload-Digest"))

    def problem(self, originals: _Originals) -> str | None:
        if not self.uri or not self.date:
            return "no WARC-Refers-To-Target-URI or WARC-Refers-To-Date"
        at = _key(self.uri, self.date)
        digest = originals.captures.get(at)
        if digest is None:
            return f"no record of {self.uri} at {self.date} in the archive"
        if self.profile.endswith("/identical-payload-digest") \
                and digest != _key(self.digest or ""):
            return f"the record of {self.uri} at {self.date} has another payload digest"
        if self.refers_to and originals.ids.get(_key(self.refers_to)) != at:
            return f"WARC-Refers-To {self.refers_to} is not the record of {self.uri} at {self.date}"
        return None


def _check_revisits(revisits: Iterable[_Revisit], originals: _Originals) -> Iterator[Problem]:
    for r in revisits:
        if why := r.problem(originals):
            yield Problem(r.where, "revisit-target", why)


@dataclass(frozen=True)
class _Ref:
    where: str
    uri: str
    date: str
    concurrent: tuple[str, ...]


@dataclass
class _Pairs:
    """W3: each response/revisit has exactly one request, linked by WARC-Concurrent-To."""

    subjects: dict[str, _Ref] = field(default_factory=dict)
    requests: dict[str, _Ref] = field(default_factory=dict)
    claimed: dict[str, list[str]] = field(default_factory=dict)  # request id -> subjects
    excused: str | None = None  # the last capture of a torn file: its request was torn off

    def add(self, head: _Head, where: str) -> None:
        rec_type, rid = head.get("WARC-Type"), head.get("WARC-Record-ID") or ""
        ref = _Ref(where, head.get("WARC-Target-URI") or "", head.get("WARC-Date") or "",
                   tuple(head.get_all("WARC-Concurrent-To")))
        if rec_type == "request":
            self.requests[rid] = ref
        elif rec_type in CAPTURE_TYPES and ref.uri.startswith(("http:", "https:")):
            self.subjects[rid] = ref
            for other in ref.concurrent:
                self.claimed.setdefault(other, []).append(rid)

    def problems(self) -> Iterator[Problem]:
        found: Counter[str] = Counter()
        for rid, req in self.requests.items():
            subjects = {c for c in req.concurrent if c in self.subjects}
            subjects.update(self.claimed.get(rid, ()))
            if not subjects:
                yield Problem(req.where, "orphan-request",
                              "no response or revisit in this file is WARC-Concurrent-To it")
            found.update(subjects)
            yield from (self._mismatch(req, self.subjects[s]) for s in sorted(subjects)
                        if (req.uri, req.date) != (self.subjects[s].uri, self.subjects[s].date))
        for sid, ref in self.subjects.items():
            if found[sid] == 0 and sid != self.excused:
                yield Problem(ref.where, "missing-request", "no request record for this capture")
            elif found[sid] > 1:
                yield Problem(ref.where, "extra-request", f"{found[sid]} request records")

    @staticmethod
    def _mismatch(req: _Ref, subject: _Ref) -> Problem:
        return Problem(req.where, "concurrent-to", "request and response differ in "
                       f"WARC-Target-URI or WARC-Date ({req.uri} {req.date} vs "
                       f"{subject.uri} {subject.date})")


# -- one WARC file ---------------------------------------------------------------------------
class _FileCheck:
    """Streams one WARC file, yielding problems, and keeps what the archive checks need."""

    def __init__(self, path: Path, label: str) -> None:
        self.path, self.label = path, label
        self.name = path.name.removesuffix(OPEN_SUFFIX)
        self.records = 0
        self.bounds = array("q")  # start of each complete gzip member, then the end of the last
        self.captures = array("q")  # members holding a response or revisit
        self.originals = _Originals()
        self.revisits: list[_Revisit] = []
        self.pairs = _Pairs()
        self.ids: set[str] = set()
        self.infos: set[str] = set()
        self.first_type: str | None = None
        self.info_refs: list[tuple[str, str | None]] = []
        self.multi = False
        self.gzipped = True

    def run(self) -> Iterator[Problem]:
        with open(self.path, "rb") as f:
            self.gzipped = not f.read(5).startswith(b"WARC/")
            f.seek(0)
            if not self.gzipped and self.path.name.endswith(".gz"):
                yield Problem(self.label, "not-gzip", "the file is not gzip-compressed")
            s = _Stream(f, self.gzipped)
            end = 0
            while s.next_member():
                yield from self._member(s)
                if self.gzipped and not (s.torn or s.error):  # a whole member, good or not
                    self.bounds.append(s.member_at)
                    end = s.raw_at
            self.bounds.append(end)
            yield from self._tail(s)
        yield from self._file_end()

    def _tail(self, s: _Stream) -> Iterator[Problem]:
        where = f"{self.label}@{s.member_at}"
        if s.torn:
            size = self.path.stat().st_size
            yield Problem(where, "torn-member", f"the file ends {size - s.member_at} bytes "
                          "into this gzip member, before the member is complete")
        elif s.error:
            yield Problem(where, "gzip-error", f"not a gzip member: {s.error}")
        if not (s.torn or s.error):
            self.pairs.excused = None  # nothing was torn off after the last capture

    def _member(self, s: _Stream) -> Iterator[Problem]:
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

    def _record(self, s: _Stream, where: str,
                member_at: int | None) -> Generator[Problem, None, bool]:
        head = _read_head(s)
        if isinstance(head, str):
            if not (s.torn or s.error):
                yield Problem(where, "record-parse", head)
            return False
        self.records += 1
        yield from _head_problems(head, where)
        length = head.get("Content-Length") or ""
        if not length.isdigit():
            yield from self._note(head, where, member_at)
            return False
        block = _Block(head)
        framed = yield from self._block(s, int(length), block, where)
        if s.torn or s.error:
            return False
        if framed:
            for check, detail in block.finish(bool(head.get("WARC-Truncated"))):
                yield Problem(where, check, detail)
        yield from self._note(head, where, member_at)
        return framed

    def _block(self, s: _Stream, length: int, block: _Block,
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

    def _note(self, head: _Head, where: str, member_at: int | None) -> Iterator[Problem]:
        rec_type, rid = head.get("WARC-Type") or "", head.get("WARC-Record-ID") or ""
        if rid in self.ids:
            yield Problem(where, "duplicate-record-id", f"{rid} is used twice in this file")
        self.ids.add(rid)
        yield from self._warcinfo(head, rec_type, rid, where)
        self.pairs.add(head, where)
        self.pairs.excused = rid if rec_type in CAPTURE_TYPES else None
        if rec_type in CAPTURE_TYPES:
            self.originals.add(head)
            if member_at is not None and self.gzipped:
                self.captures.append(member_at)
        if rec_type == "revisit":
            self.revisits.append(_Revisit.of(head, where))

    def _warcinfo(self, head: _Head, rec_type: str, rid: str, where: str) -> Iterator[Problem]:
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
    check = _FileCheck(path, path.name)
    yield from check.run()
    yield from _check_revisits(check.revisits, check.originals)


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
    """Reads the WARC headers of the record at an offset; keeps a few files open."""

    def __init__(self, warc_dir: Path, tables: dict[str, _Table]) -> None:
        self.warc_dir, self.tables = warc_dir, tables
        self.files: dict[str, IO[bytes]] = {}

    def head(self, name: str, offset: int, length: int) -> _Head | str:
        """The record's headers, or why there is no whole record at (offset, length)."""
        table = self.tables.get(name)
        if table is None:
            return f"{name} is not in warc/"
        if not table.is_member(offset, length):
            return f"{name}@{offset} (length {length}) is not one whole gzip member"
        s = _Stream(self._open(name, offset))
        head = _read_head(s) if s.next_member() else "nothing there"
        return head if not s.error else s.error

    def _open(self, name: str, offset: int) -> IO[bytes]:
        if name not in self.files:
            if len(self.files) >= 32:
                self.close()
            self.files[name] = open(self.warc_dir / name, "rb")  # noqa: SIM115 - closed in close()
        f = self.files[name]
        f.seek(offset)
        return f

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


class _Row(Protocol):
    def __getitem__(self, key: str) -> Any: ...


def _check_row(row: _Row, seeker: _Seeker, originals: _OriginalIds) -> Iterator[tuple[str, str]]:
    """(check, detail) for what is wrong with one manifest capture row, against its records."""
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


def _record_fields(row: _Row, head: _Head) -> Iterator[str]:
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


def _kind(head: _Head) -> str:
    """A response or revisit record's type, with the last part of a revisit's profile."""
    if head.get("WARC-Type") != "revisit":
        return head.get("WARC-Type") or ""
    profile = head.get("WARC-Profile")
    return f"revisit ({profile.rstrip('/').rsplit('/', 1)[-1] if profile else 'no WARC-Profile'})"


def _record_type(row: _Row, head: _Head, originals: _OriginalIds) -> Iterator[str]:
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

    def __init__(self, manifest: Manifest) -> None:
        self.cursor = manifest.db.execute(
            "SELECT c.id, o.record_id FROM captures c LEFT JOIN captures o ON o.id = "
            "c.original_id WHERE c.original_id IS NOT NULL ORDER BY c.id")
        self.row: tuple[int, str | None] | None = self.cursor.fetchone()

    def record_id(self, capture_id: int) -> str | None:
        """Capture `capture_id`'s original's record id; None if original_id names no capture.

        Asked in rising capture_id order, as manifest.captures() gives them."""
        while self.row is not None and self.row[0] < capture_id:
            self.row = self.cursor.fetchone()
        return self.row[1] if self.row is not None and self.row[0] == capture_id else None

    def close(self) -> None:
        self.cursor.close()


def _check_manifest(manifest: Manifest, seeker: _Seeker) -> Iterator[Problem]:
    missing: Counter[str] = Counter()
    originals = _OriginalIds(manifest)
    try:
        for row in manifest.captures():
            if row["filename"] not in seeker.tables:
                missing[row["filename"]] += 1
                continue
            for check, why in _check_row(row, seeker, originals):
                yield Problem(f"manifest: capture {row['id']}", check, why)
    finally:
        originals.close()
    for name, n in sorted(missing.items()):
        yield Problem(f"warc/{name}", "manifest-missing-file",
                      f"{n} manifest captures point into this file, which does not exist")
    for name, table in seeker.tables.items():
        for offset, seen in zip(table.captures, table.recorded, strict=True):
            if not seen:
                yield Problem(f"warc/{name}@{offset}", "manifest-unrecorded",
                              "a response or revisit record with no capture in the manifest")


def _index_lines(paths: Iterable[Path]) -> Iterator[str | Problem]:
    """What `mirror index` makes of the WARC files, or why it cannot read one."""
    for path in paths:
        try:
            yield from index.lines_from_warc(path)
        except Exception as exc:  # noqa: BLE001 - warcio raises assorted errors on bad files
            yield Problem(f"warc/{path.name}", "index-mismatch",
                          f"`mirror index` cannot read this file: {type(exc).__name__}: {exc}")


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


def _check_index(path: Path, files: list[Path], seeker: _Seeker) -> Iterator[Problem]:
    """W9: sorted bytewise, equal to what `mirror index` makes, every line reads back."""
    if not path.exists():
        if files:
            yield Problem("index.cdxj", "index-missing", "no index; `mirror index` rebuilds it")
        return
    expected: Counter[bytes] = Counter()
    for line in _index_lines(files):
        if isinstance(line, Problem):
            yield line
        else:
            expected[_key(line)] += 1
    yield from _index_file(path, expected, seeker)
    if expected.total() > 0:
        for line in _index_lines(files):
            if isinstance(line, str) and expected[k := _key(line)] > 0:
                expected[k] -= 1
                yield Problem("index.cdxj", "index-mismatch", f"line missing: {line.strip()}")


def _index_file(path: Path, expected: Counter[bytes], seeker: _Seeker) -> Iterator[Problem]:
    prev, unsorted = b"", []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw < prev:
                unsorted.append(n)
            prev = raw
            k = _key(raw.decode("utf-8", "replace"))
            if expected[k] > 0:
                expected[k] -= 1
            else:
                yield Problem(f"index.cdxj:{n}", "index-mismatch",
                              "not a line `mirror index` makes from the WARC files")
            if why := _readback(raw, seeker):
                yield Problem(f"index.cdxj:{n}", "index-readback", why)
    if unsorted:
        yield Problem(f"index.cdxj:{unsorted[0]}", "index-unsorted", f"this line and "
                      f"{len(unsorted) - 1} more sort bytewise before the line above them")


def check_archive(output_dir: Path, manifest: Manifest | None) -> Verdict:
    """Every WARC file under warc/, the manifest against them, the index against both."""
    warc_dir = output_dir / "warc"
    files = index.warc_files(warc_dir)
    problems = [Problem(f"warc/{p.name}", "open-file", "left open by a run that did not "
                        "finish; the next `mirror run` repairs and closes it")
                for p in sorted(warc_dir.glob("*" + OPEN_SUFFIX))]
    originals, revisits, tables, records = _Originals(), [], {}, 0
    for path in files:
        check = _FileCheck(path, f"warc/{path.name}")
        problems += check.run()
        originals.update(check.originals)
        revisits += check.revisits
        records += check.records
        tables[path.name] = _Table(check.bounds, check.captures, bytearray(len(check.captures)))
    problems += _check_revisits(revisits, originals)
    seeker = _Seeker(warc_dir, tables)
    try:
        if manifest is not None:
            problems += _check_manifest(manifest, seeker)
        problems += _check_index(output_dir / "index.cdxj", files, seeker)
    finally:
        seeker.close()
    return Verdict(tuple(problems), len(files), records)


def verify_archive(output_dir: Path, manifest: Manifest | None) -> list[Problem]:
    return list(check_archive(output_dir, manifest).problems)
