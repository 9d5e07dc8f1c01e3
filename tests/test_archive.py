"""The WARC writer with a pinned clock and record ids: exact records, rotation, rollback, repair."""

from __future__ import annotations

import base64
import errno
import gzip
import hashlib
import io
import itertools
import os
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mirror.archive import warcwriter
from mirror.archive.warcwriter import Exchange, WarcWriter
from mirror.upkeep import recovery

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def ids():
    counter = itertools.count(1)
    return lambda: f"<urn:uuid:00000000-0000-0000-0000-{next(counter):012d}>"


def exchange(url: str = "http://example.com/a?b=1", body: bytes = b"hello world",
             headers=(("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"))):
    return Exchange(
        url=url, method="GET", target="/a?b=1",
        request_headers=(("Host", "example.com"), ("Cookie", "session=s3cret")),
        http_version="1.1", status=200, reason="OK", response_headers=tuple(headers),
        body=io.BytesIO(body), body_length=len(body), peer_ip="127.0.0.1",
    )


def writer(folder: Path, max_bytes: int = 10_000_000) -> WarcWriter:
    return WarcWriter(folder, "site", max_bytes, {"software": "mirror/test"},
                      clock=lambda: WHEN, new_id=ids())


def members(path: Path) -> list[bytes]:
    """Each gzip member of a file, decompressed."""
    data, out = path.read_bytes(), []
    while data:
        d = zlib.decompressobj(31)
        out.append(d.decompress(data))
        assert d.eof, "torn gzip member"
        data = d.unused_data
    return out


EXPECTED_RESPONSE = (
    b"WARC/1.1\r\n"
    b"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000002>\r\n"
    b"WARC-Date: 2026-01-02T03:04:05.678000Z\r\n"
    b"WARC-Warcinfo-ID: <urn:uuid:00000000-0000-0000-0000-000000000001>\r\n"
    b"WARC-IP-Address: 127.0.0.1\r\n"
    b"WARC-Type: response\r\n"
    b"WARC-Target-URI: http://example.com/a?b=1\r\n"
    b"WARC-Payload-Digest: sha1:FKXGYNOJJ7H3IFO35FPUBC445EPOQRXN\r\n"
    b"WARC-Block-Digest: sha1:"
)


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_capture_records_exact(tmp_path: Path) -> None:
    w = writer(tmp_path)
    loc = w.write_capture(exchange())
    w.close()
    [path] = tmp_path.iterdir()
    assert path.name == "site-20260102030405678-00001.warc.gz"
    info, response, request = members(path)
    assert info.startswith(b"WARC/1.1\r\n") and b"WARC-Type: warcinfo\r\n" in info
    assert b"WARC-Filename: site-20260102030405678-00001.warc.gz\r\n" in info
    assert b"software: mirror/test\r\n" in info
    assert response.startswith(EXPECTED_RESPONSE)
    head, block = response.split(b"\r\n\r\n", 1)
    assert block == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
        b"X-Mirror-Orig-Transfer-Encoding: chunked\r\nContent-Length: 11\r\n\r\n"
        b"hello world\r\n\r\n"
    )
    assert head.endswith(f"\r\nContent-Length: {len(block) - 4}".encode())
    assert b"WARC-Concurrent-To: <urn:uuid:00000000-0000-0000-0000-000000000002>" in request
    assert b"Cookie: <redacted>\r\n" in request and b"s3cret" not in path.read_bytes()
    assert request.split(b"\r\n\r\n", 1)[1].startswith(b"GET /a?b=1 HTTP/1.1\r\nHost: example.com")
    assert loc.request.offset == loc.response.offset + loc.response.length
    data = path.read_bytes()
    assert gzip.decompress(data[loc.response.offset:loc.response.offset + loc.response.length]) \
        == response
    assert loc.payload_digest == sha1_b32(b"hello world")
    assert f"WARC-Block-Digest: {sha1_b32(block[:-4])}".encode() in head


def test_warcio_check_and_gzip_test_pass(tmp_path: Path) -> None:
    w = writer(tmp_path)
    for i in range(3):
        w.write_capture(exchange(url=f"http://example.com/{i}", body=bytes(range(256)) * i))
    w.close()
    [path] = tmp_path.iterdir()
    subprocess.run(["gzip", "-t", str(path)], check=True)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len(members(path)) == 7


@pytest.mark.parametrize("codec", ["default", "zlib"])
def test_records_are_plain_gzip_members_with_either_codec(tmp_path: Path, monkeypatch,
                                                          codec: str) -> None:
    # ISA-L where its wheel installs, else the standard library's zlib
    if codec == "zlib":
        monkeypatch.setattr(warcwriter, "_deflate", zlib)
        monkeypatch.setattr(warcwriter, "GZIP_LEVEL", 6)
    w = writer(tmp_path)
    body = b"<p>some page</p>" * 2000
    loc = w.write_capture(exchange(body=body))
    w.close()
    [path] = tmp_path.iterdir()
    subprocess.run(["gzip", "-t", str(path)], check=True)
    info, response, request = members(path)
    assert response.split(b"\r\n\r\n", 2)[2].startswith(body)
    assert loc.response.length < len(body) // 10  # compressed, whichever codec


def test_rotation_starts_new_file_with_new_serial(tmp_path: Path) -> None:
    w = writer(tmp_path, max_bytes=100)
    w.write_capture(exchange())
    w.write_capture(exchange())
    w.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "site-20260102030405678-00001.warc.gz", "site-20260102030405678-00002.warc.gz"]
    w2 = writer(tmp_path)
    w2.write_capture(exchange())
    w2.close()
    assert warcwriter.next_serial(tmp_path) == 4


def test_failed_write_is_rolled_back(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.write_capture(exchange())
    open_file = w._file
    assert open_file is not None
    size = open_file.tell()
    real_write = open_file.write
    budget = [3]

    def failing_write(data: bytes) -> int:
        if budget[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        budget[0] -= 1
        return real_write(data)

    open_file.write = failing_write  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space"):
        w.write_capture(exchange(body=os.urandom(200_000)))
    open_file.write = real_write  # type: ignore[method-assign]
    assert open_file.tell() == size
    w.write_capture(exchange())
    w.close()
    [path] = tmp_path.iterdir()
    assert len(members(path)) == 5


def test_torn_tail_is_cut_back_at_every_byte(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.write_capture(exchange())
    loc = w.write_capture(exchange(body=b"second" * 50))
    w.close()
    [path] = tmp_path.iterdir()
    data = path.read_bytes()
    keep = loc.response.offset  # everything before the last capture group is complete
    for cut in range(keep + 1, len(data)):
        trial = tmp_path / "trial"
        trial.mkdir(exist_ok=True)
        torn = trial / (path.name + warcwriter.OPEN_SUFFIX)
        expected = loc.request.offset if cut >= loc.request.offset else keep
        for whole_to in (keep, 0):  # read from what the manifest recorded, and whole
            torn.write_bytes(data[:cut])
            assert recovery.cut_torn_tail(torn, whole_to) == expected, (cut, whole_to)
            assert torn.stat().st_size == expected, (cut, whole_to)
        # and a response without its request is not a complete capture: cut it too
        found, good_end = recovery.scan_groups(torn, 0, path.name)
        for f in found:
            f.exchange.body.close()
        assert good_end == (loc.response.offset if cut < len(data) else len(data)), cut
        torn.unlink()


@pytest.mark.parametrize("in_memory", [True, False])
def test_records_match_warcios_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       in_memory: bool) -> None:
    """Response and request records are built without warcio's record builder; they are
    the bytes warcio's builder writes for the same capture (a non-ASCII header value,
    a truncated body, a digest computed here), with the body in memory or read again from
    its file, and warcio reads them back with their digests checked."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    if not in_memory:
        monkeypatch.setattr(warcwriter, "IN_MEMORY_BODY", 10)
    body = bytes(range(256)) * 40
    headers = (("Content-Type", "text/html"), ("X-Name", "naïve ü"))
    ex = exchange(body=body, headers=headers)
    ex = Exchange(**{**ex.__dict__, "truncated": "length"})
    w = writer(tmp_path)
    w.write_capture(ex)
    w.close()
    [path] = tmp_path.iterdir()
    _, response, request = members(path)

    out = io.BytesIO()
    ref = WARCWriter(out, gzip=False, warc_version="WARC/1.1")
    common = {"WARC-Date": "2026-01-02T03:04:05.678000Z",
              "WARC-Warcinfo-ID": "<urn:uuid:00000000-0000-0000-0000-000000000001>"}
    http = StatusAndHeaders("200 OK", list(warcwriter.fix_response_headers(headers, len(body))),
                            protocol="HTTP/1.1")
    ref.write_record(ref.create_warc_record(
        ex.url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
        warc_headers_dict={"WARC-Record-ID": "<urn:uuid:00000000-0000-0000-0000-000000000002>",
                           **common, "WARC-IP-Address": "127.0.0.1",
                           "WARC-Truncated": "length"}))
    assert response == out.getvalue()
    out.seek(0)
    out.truncate()
    ref.write_record(ref.create_warc_record(
        ex.url, "request", http_headers=StatusAndHeaders(
            "GET /a?b=1 HTTP/1.1", list(warcwriter.redact_request_headers(ex.request_headers)),
            is_http_request=True),
        warc_headers_dict={"WARC-Record-ID": "<urn:uuid:00000000-0000-0000-0000-000000000003>",
                           **common, "WARC-Concurrent-To":
                           "<urn:uuid:00000000-0000-0000-0000-000000000002>"}))
    assert request == out.getvalue()
    with open(path, "rb") as f:
        records = [(r.rec_type, r.content_stream().read()) for r in
                   ArchiveIterator(f, check_digests="raise")]
    assert records[1] == ("response", body) and records[2][0] == "request"


@pytest.mark.parametrize(("stat", "alive", "rebooted"), [
    ("cpu 1 2 3\nbtime 1000000\nprocesses 9\n", 2_000_000.0, False),  # killed, machine up
    ("btime 1000000\n", 1_000_030.0, True),  # seen alive within the boot's margin
    ("btime 1000000\n", 900_000.0, True),  # last seen before this boot: a machine crash
    ("btime 1000000\n", None, True),  # never seen alive
    ("cpu 1 2 3\n", 2_000_000.0, True),  # no boot time: not known, so checked
    ("btime soon\n", 2_000_000.0, True),
    (None, 2_000_000.0, True),  # no /proc (not Linux)
])
def test_only_a_crash_of_the_machine_has_open_files_read_whole(
        tmp_path: Path, stat: str | None, alive: float | None, rebooted: bool) -> None:
    path = tmp_path / "stat"
    if stat is not None:
        path.write_text(stat)
    assert recovery.rebooted_since(alive, path) is rebooted
