"""Checks on one record: WARC headers, target URI, block (digests, HTTP headers, chunking)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from mirror.verify.problem import Problem
from mirror.verify.stream import MAX_HEAD, Head

HTTP_TYPES = ("response", "request", "revisit")
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


class _Digest:
    """A WARC digest header (`algo:value`, base32/base16/base64) and the hash to compare."""

    def __init__(self, header: str) -> None:
        algo, sep, value = header.partition(":")
        self.hash = _new_hash(algo)
        self.expected = _decode_digest(value.strip(), self.hash.digest_size) if sep else None
        if self.expected is None:
            raise ValueError(f"cannot read digest {header!r}")

    def matches(self) -> bool:
        return bool(self.hash.digest() == self.expected)


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


class Block:
    """One record block streamed through its digests, HTTP header parse and chunk check."""

    def __init__(self, head: Head) -> None:
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

    def _digest(self, head: Head, name: str, check: str) -> _Digest | None:
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


def head_problems(head: Head, where: str) -> Iterator[Problem]:
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
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:  # "Invalid IPv6 URL", a bad port
        return f"is not a valid URI ({exc})"
    if "@" in parts.netloc:
        return "contains userinfo"
    if "[" in uri.replace(parts.netloc, "", 1) or "]" in uri.replace(parts.netloc, "", 1):
        return "contains '[' or ']' outside an IPv6 host"
    if parts.scheme in ("http", "https") and not parts.hostname:
        return "has no host"
    return None
