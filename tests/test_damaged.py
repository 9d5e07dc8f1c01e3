"""Damaged copies of a real archive (issue 32: 9, 11, 12, 18): every reading command reports
the damaged record or file (file, offset, what; printable only), goes on with the rest, and
exports never write over what is not theirs."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import sqlite3
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config

from mirror.archive.damage import printable
from mirror.archive.warcread import ReadError, read_raw_from
from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex


def _site(tmp: Path, site_in_thread: Callable[[], Any]) -> Path:
    site = site_in_thread()
    for n in range(8):
        links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(n + 1, min(n + 3, 8)))
        site.page("/" if n == 0 else f"/p{n}", f"<title>Page {n}</title><p>text {n}</p>{links}")
    config = write_config(tmp, [site.base])
    assert main(["run", str(config), "--quiet"]) == 0
    return tmp / "archive"


@pytest.fixture
def archive(tmp_path: Path, site_in_thread: Callable[[], Any]) -> Iterator[Path]:
    """A fresh archive `mirror run` made of an 8-page site on 127.0.0.1 (site.toml beside it)."""
    yield _site(tmp_path, site_in_thread)


def warc(archive: Path) -> Path:
    return next(p for p in sorted((archive / "warc").glob("test-*.warc.gz")))


def members(path: Path) -> list[tuple[int, int]]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[pos:])
        out.append((pos, len(data) - pos - len(d.unused_data)))
        pos += out[-1][1]
    return out


def index_lines(archive: Path) -> list[str]:
    return (archive / "index.cdxj").read_text().splitlines()


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def config(archive: Path) -> str:
    return str(archive.parent / "site.toml")


# -- damage inside a WARC file -----------------------------------------------------------------
def flip(path: Path) -> tuple[int, str]:
    return flip_member(path, 3), "a damaged gzip member"


def bad_crc(path: Path, member: int = 3) -> tuple[int, str]:
    start, length = members(path)[member]
    data = bytearray(path.read_bytes())
    data[start + length - 8] ^= 0xFF
    path.write_bytes(bytes(data))
    return start, "incorrect data check"


def garbage(path: Path) -> tuple[int, str]:
    end = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x1b]0;owned\x07\x1b[31mGARBAGE\xff" * 5)
    return end, "not a gzip member: the bytes there are '\\x1b]0;owned\\x07\\x1b[31mGARBAGE\\xff"


DAMAGE = {"flip": flip, "bad-crc": bad_crc, "garbage": garbage}


@pytest.mark.parametrize("kind", DAMAGE)
def test_index_reports_the_damaged_member_and_indexes_the_rest(
        archive: Path, capsys: Any, kind: str) -> None:
    good = index_lines(archive)
    path = warc(archive)
    offset, reason = DAMAGE[kind](path)
    code, out, err = run(capsys, "index", config(archive))
    assert code == 65, err
    assert f"mirror: damaged: warc/{path.name}@{offset}: " in err and reason in err, err
    assert "\x1b" not in err and "internal error" not in err
    kept = index_lines(archive)
    lost = [line for line in good if f'"offset": "{offset}"' in line]
    assert sorted(kept) == sorted(set(good) - set(lost)) and len(kept) >= len(good) - 1
    assert "damaged places left out, above: 1" in out


@pytest.mark.parametrize("kind", DAMAGE)
def test_verify_reads_on_past_the_damage_and_exits_65(
        archive: Path, capsys: Any, kind: str) -> None:
    path = warc(archive)
    offset, _ = DAMAGE[kind](path)
    code, out, err = run(capsys, "verify", config(archive))
    assert code == 65, out + err
    assert f"warc/{path.name}@{offset}: gzip-error: " in out
    assert "\x1b" not in out and "internal error" not in err


def test_a_file_that_is_not_gzip_is_reported_with_escaped_bytes(archive: Path,
                                                                  capsys: Any) -> None:
    (archive / "warc" / "zz-00002.warc.gz").write_bytes(b"hello \x1b]52;c;cHduZWQ=\x07\n" * 4)
    code, _, err = run(capsys, "index", config(archive))
    assert code == 65
    assert "warc/zz-00002.warc.gz@0: not a gzip member: the bytes there are 'hello " \
        "\\x1b]52;c;cHduZWQ=\\x07\\x0a" in err and "no WARC record in the file" in err
    assert "\x1b" not in err and "\x07" not in err
    code, out, _ = run(capsys, "verify", config(archive))
    assert code == 65 and "warc/zz-00002.warc.gz@0: gzip-error" in out


def test_a_symlink_out_of_the_archive_is_read_by_nothing(archive: Path, capsys: Any,
                                                          tmp_path: Path) -> None:
    (archive / "warc" / "zz.warc.gz").symlink_to("/etc/passwd")
    said = "warc/zz.warc.gz: a symlink to /etc/passwd, outside the archive; not read"
    code, out, err = run(capsys, "index", config(archive))
    assert (code, err.count(said)) == (65, 1) and "root:" not in err
    code, out, err = run(capsys, "verify", config(archive))
    assert code == 65 and f"{said.replace(': a', ': refused-file: a', 1)}" in out
    wacz = tmp_path / "out.wacz"
    code, out, err = run(capsys, "export", config(archive), "--wacz", str(wacz))
    assert code == 65 and said in err
    with zipfile.ZipFile(wacz) as zf:
        assert [n for n in zf.namelist() if n.startswith("archive/")] == \
            [f"archive/{warc(archive).name}"]


def response_member(archive: Path) -> int:
    """Which gzip member of the WARC file holds the response of the index's third line."""
    response = int(json.loads(index_lines(archive)[2].split(" ", 2)[2])["offset"])
    return [start for start, _ in members(warc(archive))].index(response)


def flip_member(path: Path, member: int) -> int:
    start, _ = members(path)[member]
    data = bytearray(path.read_bytes())
    for i in range(14):
        data[start + 20 + i] ^= 0xFF
    path.write_bytes(bytes(data))
    return start


def test_a_damaged_response_is_reported_and_the_rest_exports(
        archive: Path, capsys: Any, tmp_path: Path) -> None:
    offset = flip_member(warc(archive), response_member(archive))
    code, out, err = run(capsys, "export", config(archive), "--wacz", str(tmp_path / "a.wacz"),
                         "--to", str(tmp_path / "folder"))
    assert code == 65, err
    assert f"warc/{warc(archive).name}@{offset}: " in err and "internal error" not in err
    assert (tmp_path / "a.wacz").stat().st_size > 0
    assert (tmp_path / "folder" / "index.html").is_file()


def test_a_bad_crc_in_a_response_does_not_stop_a_wacz(archive: Path, capsys: Any,
                                                      tmp_path: Path) -> None:
    """warcio finds a bad CRC only when it reads the member's trailer: the record itself is
    whole, and exported, or reported; never an internal error."""
    bad_crc(warc(archive), response_member(archive))
    code, out, err = run(capsys, "export", config(archive), "--wacz", str(tmp_path / "a.wacz"))
    assert code in (0, 65) and "internal error" not in err
    with zipfile.ZipFile(tmp_path / "a.wacz") as zf:
        assert len(zf.read("indexes/index.cdxj").splitlines()) == 8


def write_bad_uri_record(archive: Path) -> None:
    """A well-framed response record whose WARC-Target-URI urlsplit() refuses."""
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>x</p>"
    head = (b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
            b"WARC-Date: 2026-01-02T03:04:05Z\r\nWARC-Target-URI: http://[::1/bad\r\n"
            b"Content-Type: application/http; msgtype=response\r\n"
            b"Content-Length: %d\r\n\r\n" % len(block))
    (archive / "warc" / "zz-bad-00001.warc.gz").write_bytes(
        gzip.compress(head + block + b"\r\n\r\n"))


def test_verify_reports_a_target_uri_urlsplit_refuses(archive: Path, capsys: Any) -> None:
    write_bad_uri_record(archive)
    code, out, err = run(capsys, "verify", config(archive))
    assert code == 65, err
    assert "warc/zz-bad-00001.warc.gz@0: target-uri: WARC-Target-URI 'http://[::1/bad' is " \
        "not a valid URI (Invalid IPv6 URL)" in out
    assert "internal error" not in err


@pytest.mark.parametrize("offset", ["-5", str(10**13)])
def test_an_offset_out_of_range_is_reported_and_the_rest_exports(
        archive: Path, capsys: Any, tmp_path: Path, offset: str) -> None:
    lines = index_lines(archive)
    fields = json.loads(lines[2].split(" ", 2)[2])
    fields["offset"] = offset
    lines[2] = " ".join([*lines[2].split(" ", 2)[:2], json.dumps(fields)])
    (archive / "index.cdxj").write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "export", config(archive), "--to", str(tmp_path / "f"),
                         "--wacz", str(tmp_path / "a.wacz"))
    assert code == 65, err
    assert ("index.cdxj: line 3: offset -5" in err) if offset == "-5" else \
        f"warc/{fields['filename']}@{offset}: {fields['url']} not exported" in err
    assert "OSError" not in err and "internal error" not in err
    assert (tmp_path / "f" / "index.html").is_file() and (tmp_path / "a.wacz").is_file()


def test_serve_answers_a_record_at_a_huge_offset_with_an_error_page(archive: Path) -> None:
    lines = index_lines(archive)
    fields = json.loads(lines[0].split(" ", 2)[2])
    fields["offset"] = str(10**13)
    lines[0] = " ".join([*lines[0].split(" ", 2)[:2], json.dumps(fields)])
    (archive / "index.cdxj").write_text("\n".join(lines) + "\n")
    index = CaptureIndex.load(archive)
    cap = next(c for c in index.captures if c.offset == 10**13)
    from mirror.archive.warcread import ReadError

    with pytest.raises(ReadError, match=f"@{10**13}: "):
        index.read(cap)
    assert len(index.captures) == len(lines)


# -- the manifest (18) ---------------------------------------------------------------------
def test_verify_fails_a_status_and_a_state_mirror_does_not_know(archive: Path,
                                                                capsys: Any) -> None:
    with sqlite3.connect(archive / "manifest.sqlite3") as db:
        db.execute("UPDATE captures SET status = 'abc' WHERE id = 2")
        db.execute("UPDATE runs SET state = 'weird'")
    code, out, _ = run(capsys, "verify", config(archive))
    assert code == 65
    assert "manifest: capture 2: manifest-value: status 'abc' is not an HTTP status" in out
    assert "manifest: run 1: manifest-value: state 'weird' is not one of" in out


def test_index_on_an_unreadable_manifest_says_so_and_exits_65(archive: Path,
                                                              capsys: Any) -> None:
    (archive / "manifest.sqlite3").write_bytes(os.urandom(4096))
    code, out, err = run(capsys, "index", config(archive))
    assert code == 65
    assert "mirror: damaged: manifest.sqlite3: cannot be read: " in err
    assert "interrupted prune" not in err and len(index_lines(archive)) == 8


# -- where a WACZ goes (12) ----------------------------------------------------------------
def test_wacz_never_replaces_a_file_that_is_not_ours_without_force(
        archive: Path, capsys: Any, tmp_path: Path) -> None:
    other = tmp_path / "notes.wacz"
    other.write_text("my notes")
    code, _, err = run(capsys, "export", config(archive), "--wacz", str(other))
    assert code == 2 and "a file that is not an export of mirror is there" in err
    assert other.read_text() == "my notes"
    assert run(capsys, "export", config(archive), "--wacz", str(other), "--force")[0] == 0
    assert zipfile.is_zipfile(other)
    assert run(capsys, "export", config(archive), "--wacz", str(other))[0] == 0  # ours now
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_wacz_never_replaces_what_is_not_a_regular_file(
        archive: Path, capsys: Any, tmp_path: Path, kind: str) -> None:
    out = tmp_path / "x.wacz"
    target = tmp_path / "target"
    target.write_text("kept")
    {"fifo": lambda: os.mkfifo(out), "symlink": lambda: out.symlink_to(target),
     "folder": out.mkdir}[kind]()
    code, _, err = run(capsys, "export", config(archive), "--wacz", str(out), "--force")
    assert code == 2 and "not a regular file; an export never replaces one" in err
    assert target.read_text() == "kept" and not os.path.isfile(out) or kind == "symlink"
    assert out.is_symlink() if kind == "symlink" else True


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable(b"a\x1b[2Jb\xff\x07") == "a\\x1b[2Jb\\xff\\x07"
    assert printable("x\u202ey\u0085") == "x\\u202ey\\x85"
    assert printable("café ok") == "café ok"


def test_a_copy_is_not_the_original(archive: Path) -> None:
    """The fixture gives each test its own archive: damage never leaks between tests."""
    copy = archive.parent / "copy"
    shutil.copytree(archive, copy)
    flip(warc(copy))
    assert warc(copy).read_bytes() != warc(archive).read_bytes()


def _record(body: bytes) -> bytes:
    return (b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:2>\r\n"
            b"WARC-Date: 2026-01-02T03:04:05Z\r\nWARC-Target-URI: http://a.test/\r\n"
            b"Content-Type: application/http; msgtype=response\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body + b"\r\n\r\n")


def test_every_flipped_byte_of_a_member_is_read_as_damage_or_as_the_same_record() -> None:
    """Each byte of a record's gzip member flipped in turn: reading the record there either
    says the member is damaged or gives back exactly the stored record (a flip in the gzip
    header's hints changes nothing). warcio alone handed some of these back as a
    response with no status and an empty payload, which an export wrote as if whole."""
    body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + b"".join(
        b"<p>line %d of a page that compresses</p>\n" % i for i in range(40))
    member = gzip.compress(_record(body), mtime=0)
    whole = read_raw_from(io.BytesIO(member), "m")
    assert whole.status == 200 and whole.payload.endswith(b"compresses</p>\n")
    same = []
    for at in range(len(member)):
        for mask in (0x01, 0xFF):
            data = bytearray(member)
            data[at] ^= mask
            try:
                raw = read_raw_from(io.BytesIO(bytes(data) + member), "m")
            except ReadError as exc:
                assert str(exc).startswith("m: "), exc
                continue
            assert raw == whole, (at, mask)
            same.append(at)
    # only the gzip header's FTEXT hint (byte 3, bit 0), MTIME (4-7), XFL (8) and OS (9)
    assert set(same) <= set(range(3, 10)), same


def test_a_member_cut_short_is_damage() -> None:
    member = gzip.compress(_record(b"HTTP/1.1 200 OK\r\n\r\nhello"), mtime=0)
    for end in range(len(member)):
        with pytest.raises(ReadError):
            read_raw_from(io.BytesIO(member[:end]), "m")
