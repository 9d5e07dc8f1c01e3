"""Bad WARC files for the `mirror verify` tests, each built at test time from one good file."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import itertools
import random
import re
import tempfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from mirror.archive.warcwriter import Exchange, WarcWriter

START = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
NAME = "fix-20260102030405678-00001.warc.gz"
# record positions in the good file
INFO, RESP1, REQ1, RESP2, REQ2, RESP3, REQ3, REVISIT, REQ_REVISIT = range(9)
PAGE_BODY = b"<p>hello world</p>"
TEXT_BODY = b"some plain text"


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"<urn:uuid:00000000-0000-0000-0000-{next(counter):012d}>"


def _clock() -> Callable[[], datetime]:
    seconds = itertools.count()
    return lambda: START + timedelta(seconds=next(seconds))


def _exchange(url: str, body: bytes, headers: tuple[tuple[str, str], ...]) -> Exchange:
    return Exchange(
        url=url, method="GET", target="/" + url.split("/", 3)[3],
        request_headers=(("Host", "example.com"),), http_version="1.1", status=200,
        reason="OK", response_headers=headers, body=io.BytesIO(body), body_length=len(body),
    )


def members(data: bytes) -> list[bytes]:
    """Each gzip member of a file, decompressed."""
    out = []
    while data:
        d = zlib.decompressobj(31)
        out.append(d.decompress(data))
        data = d.unused_data
    return out


def good_records() -> list[bytes]:
    """warcinfo, three captures written by mirror's WarcWriter, then a revisit capture."""
    with tempfile.TemporaryDirectory() as scratch:
        return _write_good(Path(scratch))


def _write_good(scratch: Path) -> list[bytes]:
    w = WarcWriter(scratch, "fix", 10**9, {"software": "mirror/test"},
                   clock=_clock(), new_id=_ids())
    html = (("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"))
    w.write_capture(_exchange("http://example.com/", PAGE_BODY, html))
    w.write_capture(_exchange("http://example.com/b.png", bytes(range(256)) * 4,
                              (("Content-Type", "image/png"), ("Content-Length", "1024"))))
    w.write_capture(_exchange("http://example.com/c.txt", TEXT_BODY,
                              (("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked"))))
    w.close()
    records = members((scratch / NAME).read_bytes())
    return records + _revisit_group(records[RESP1])


def _revisit_group(original: bytes) -> list[bytes]:
    """A revisit of the first capture at another URL, and its request (warcio builds them)."""
    head = original.split(b"\r\n\r\n", 1)[0].decode()
    field = dict(line.split(": ", 1) for line in head.split("\r\n")[1:])
    writer = WARCWriter(None, gzip=False, warc_version="WARC/1.1")
    url, date = "http://example.com/copy", "2026-01-02T03:04:09.678000Z"
    common = {"WARC-Date": date, "WARC-Warcinfo-ID": field["WARC-Warcinfo-ID"]}
    revisit = writer.create_revisit_record(
        url, field["WARC-Payload-Digest"], field["WARC-Target-URI"], field["WARC-Date"],
        http_headers=StatusAndHeaders("200 OK", [("Content-Type", "text/html")],
                                      protocol="HTTP/1.1"),
        warc_headers_dict={**common, "WARC-Record-ID": "<urn:uuid:revisit>",
                           "WARC-Refers-To": field["WARC-Record-ID"]})
    request = writer.create_warc_record(
        url, "request",
        http_headers=StatusAndHeaders("GET /copy HTTP/1.1", [("Host", "example.com")],
                                      is_http_request=True),
        warc_headers_dict={**common, "WARC-Record-ID": "<urn:uuid:revisit-request>",
                           "WARC-Concurrent-To": "<urn:uuid:revisit>"})
    out = []
    for record in (revisit, request):
        writer.out = io.BytesIO()
        writer.write_record(record)
        out.append(writer.out.getvalue())
    return out


# -- editing records ---------------------------------------------------------------------------
def parts(record: bytes) -> tuple[bytes, bytes]:
    head, rest = record.split(b"\r\n\r\n", 1)
    assert rest.endswith(b"\r\n\r\n")
    return head, rest[:-4]


def header(record: bytes, name: str) -> str:
    m = re.search(rb"\r\n" + name.encode() + rb": ([^\r\n]*)", parts(record)[0])
    assert m, name
    return m[1].decode()


def set_header(record: bytes, name: str, value: str | bytes | None) -> bytes:
    """Replace (or with None, drop) one WARC header; the block is left as it is."""
    head, block = parts(record)
    raw = value.encode() if isinstance(value, str) else value
    line = b"" if raw is None else b"\r\n" + name.encode() + b": " + raw
    new, n = re.subn(rb"\r\n" + name.encode() + rb": [^\r\n]*", lambda _: line, head)
    assert n == 1, name
    return new + b"\r\n\r\n" + block + b"\r\n\r\n"


def with_block(record: bytes, block: bytes, payload: bytes | None = None) -> bytes:
    """A new block with a right Content-Length and block digest (and payload digest)."""
    head, _ = parts(record)
    record = head + b"\r\n\r\n" + block + b"\r\n\r\n"
    record = set_header(record, "Content-Length", str(len(block)))
    record = set_header(record, "WARC-Block-Digest", sha1_b32(block))
    if payload is not None:
        record = set_header(record, "WARC-Payload-Digest", sha1_b32(payload))
    return record


def edit_http(record: bytes, old: bytes, new: bytes) -> bytes:
    """Replace bytes in the block, keeping the digests of block and payload right."""
    block = parts(record)[1]
    assert old in block
    block = block.replace(old, new, 1)
    return with_block(record, block, block.split(b"\r\n\r\n", 1)[1])


def gz(records: list[bytes]) -> bytes:
    return b"".join(gzip.compress(r, mtime=0) for r in records)


# -- the variants: name -> the bytes of a file with exactly one thing wrong ------------------
def _drop(i: int) -> Callable[[list[bytes]], bytes]:
    return lambda r: gz(r[:i] + r[i + 1:])


def _set(i: int, name: str, value: str | bytes | None) -> Callable[[list[bytes]], bytes]:
    return lambda r: gz(r[:i] + [set_header(r[i], name, value)] + r[i + 1:])


def _replace(i: int, fn: Callable[[bytes], bytes]) -> Callable[[list[bytes]], bytes]:
    return lambda r: gz(r[:i] + [fn(r[i])] + r[i + 1:])


def _torn(r: list[bytes]) -> bytes:
    last = gzip.compress(r[-1], mtime=0)
    return gz(r[:-1]) + last[: len(last) // 2]


def _bad_crc(r: list[bytes]) -> bytes:
    data = bytearray(gz(r))
    data[len(gz(r[:RESP2 + 1])) - 8] ^= 0xFF  # the CRC32 in the trailer of RESP2's member
    return bytes(data)


def _length_lie(delta: int) -> Callable[[bytes], bytes]:
    return lambda rec: set_header(rec, "Content-Length", str(len(parts(rec)[1]) + delta))


def _short_but_digested(rec: bytes) -> bytes:
    """Content-Length 7 bytes short and digests over exactly the declared bytes: only the
    framing gives it away."""
    block = parts(rec)[1]
    short = block[:-7]
    lie = set_header(rec, "Content-Length", str(len(short)))
    lie = set_header(lie, "WARC-Block-Digest", sha1_b32(short))
    return set_header(lie, "WARC-Payload-Digest", sha1_b32(short.split(b"\r\n\r\n", 1)[1]))


def _chunk_framed(rec: bytes) -> bytes:
    framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(TEXT_BODY), TEXT_BODY)
    length = b"Content-Length: %d"
    rec = edit_http(rec, length % len(TEXT_BODY), length % len(framed))
    return edit_http(rec, b"\r\n\r\n" + TEXT_BODY, b"\r\n\r\n" + framed)


def add_header(record: bytes, name: str, value: str) -> bytes:
    head, block = parts(record)
    return head + f"\r\n{name}: {value}".encode() + b"\r\n\r\n" + block + b"\r\n\r\n"


def _framed(body: bytes, size: int = 4) -> bytes:
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


def _foreign_chunked(digest_of: str, cut: int = 0) -> Callable[[bytes], bytes]:
    """Chunked body kept with its Transfer-Encoding header, as other crawlers store it; the
    payload digest over the stored bytes (warcio) or the de-chunked entity."""
    def edit(rec: bytes) -> bytes:
        http = parts(rec)[1].split(b"\r\n\r\n", 1)[0]
        http = http.replace(b"X-Mirror-Orig-Transfer-Encoding", b"Transfer-Encoding")
        body = _framed(TEXT_BODY)[:len(_framed(TEXT_BODY)) - cut]
        rec = with_block(rec, http + b"\r\n\r\n" + body, body)
        if digest_of == "entity":
            rec = set_header(rec, "WARC-Payload-Digest", sha1_b32(TEXT_BODY))
        return add_header(rec, "WARC-Truncated", "length") if cut else rec
    return edit


def _other_encodings(r: list[bytes]) -> bytes:
    r = list(r)
    block = parts(r[RESP2])[1]
    payload = block.split(b"\r\n\r\n", 1)[1]
    r[RESP2] = set_header(r[RESP2], "WARC-Block-Digest", "sha256:" + base64.b32encode(
        hashlib.sha256(block).digest()).decode())
    r[RESP2] = set_header(r[RESP2], "WARC-Payload-Digest",
                          "SHA-1:" + hashlib.sha1(payload).hexdigest())
    block3 = parts(r[RESP3])[1]
    r[RESP3] = set_header(r[RESP3], "WARC-Block-Digest", "sha512:" + base64.b64encode(
        hashlib.sha512(block3).digest()).decode())
    return gz(r)


def _large_body(rec: bytes) -> bytes:
    body = random.Random(1).randbytes(3 << 20)
    http = parts(rec)[1].split(b"\r\n\r\n", 1)[0]
    http = http.replace(b"Content-Length: 1024", b"Content-Length: %d" % len(body))
    return with_block(rec, http + b"\r\n\r\n" + body, body)


def _both_uris(value: str | bytes) -> Callable[[list[bytes]], bytes]:
    def build(r: list[bytes]) -> bytes:
        r = list(r)
        for i in (RESP2, REQ2):
            r[i] = set_header(r[i], "WARC-Target-URI", value)
        return gz(r)
    return build


def _extra_request(r: list[bytes]) -> bytes:
    twin = set_header(r[REQ2], "WARC-Record-ID", "<urn:uuid:twin>")
    return gz(r[:REQ2 + 1] + [twin] + r[REQ2 + 1:])


VARIANTS: dict[str, Callable[[list[bytes]], bytes]] = {
    "good": gz,
    "torn-member": _torn,
    "whole-file-gzip": lambda r: gzip.compress(b"".join(r), mtime=0),
    "not-gzip": lambda r: b"".join(r),
    "gzip-garbage-after": lambda r: gz(r) + b"\0" * 20,
    "gzip-bad-crc": _bad_crc,
    "empty-member": lambda r: gz(r) + gzip.compress(b"", mtime=0),
    "record-parse": lambda r: gz(r[:3] + [b"HTTP/1.1 200 OK\r\n\r\n"] + r[3:]),
    "warc-version": _replace(RESP3, lambda rec: rec.replace(b"WARC/1.1", b"WARC/0.18", 1)),
    "missing-header": _set(INFO, "WARC-Date", None),
    "warc-date": _set(INFO, "WARC-Date", "2026-01-02 03:04:05"),
    "length-too-long": _replace(RESP2, _length_lie(+7)),
    "length-too-short": _replace(RESP2, _length_lie(-7)),
    "length-short-digested": _replace(RESP2, _short_but_digested),
    "block-digest": _set(RESP3, "WARC-Block-Digest", sha1_b32(b"other")),
    "payload-digest": _set(RESP2, "WARC-Payload-Digest", sha1_b32(b"other")),
    "digest-unknown-algo": _set(RESP2, "WARC-Payload-Digest", "xxh64:AAAAAAAAAAAAA"),
    "chunked-declared": _replace(RESP3, lambda rec: edit_http(
        rec, b"X-Mirror-Orig-Transfer-Encoding", b"Transfer-Encoding")),
    "chunked-kept": _replace(RESP3, _chunk_framed),
    "chunked-kept-entity-digest": _replace(RESP3, lambda rec: set_header(
        _chunk_framed(rec), "WARC-Payload-Digest", sha1_b32(TEXT_BODY))),
    "http-content-length": _replace(RESP2, lambda rec: edit_http(
        rec, b"Content-Length: 1024", b"Content-Length: 1000")),
    "missing-request": _drop(REQ2),
    "orphan-request": _drop(RESP2),
    "extra-request": _extra_request,
    "concurrent-to": _set(REQ2, "WARC-Date", "2026-01-02T03:04:59.678000Z"),
    "dangling-revisit": _set(REVISIT, "WARC-Refers-To-Target-URI", "http://example.com/nowhere"),
    "revisit-other-digest": _set(REVISIT, "WARC-Payload-Digest", sha1_b32(b"other")),
    "revisit-wrong-refers-to": _set(REVISIT, "WARC-Refers-To", "<urn:uuid:nothing>"),
    "missing-warcinfo": _drop(INFO),
    "warcinfo-filename": _set(INFO, "WARC-Filename", "other-20260102030405678-00001.warc.gz"),
    "warcinfo-id": _set(RESP2, "WARC-Warcinfo-ID", "<urn:uuid:nothing>"),
    "duplicate-record-id": lambda r: gz(r + [r[INFO]]),
    "target-uri-space": _both_uris("http://example.com/a b"),
    "target-uri-userinfo": _both_uris("http://user:pw@example.com/b.png"),
    "target-uri-non-ascii": _both_uris("http://example.com/caf\u00e9".encode()),
    "target-uri-brackets": _both_uris("http://example.com/[b].png"),
    # other writers' habits that are still right
    "other-digest-encodings": _other_encodings,
    "foreign-chunked": _replace(RESP3, _foreign_chunked("stored")),
    "foreign-chunked-dechunked-digest": _replace(RESP3, _foreign_chunked("entity")),
    "truncated-chunked": _replace(RESP3, _foreign_chunked("stored", cut=9)),
    "large-body": _replace(RESP2, _large_body),
}


def build(folder: Path, variant: str) -> Path:
    """Write the file for `variant` into `folder` and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NAME
    path.write_bytes(VARIANTS[variant](good_records()))
    return path
