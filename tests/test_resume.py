"""Crash safety: adoption of unrecorded captures, lost tails, disk full, damaged manifests."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import IO

import pytest
from warcio.archiveiterator import ArchiveIterator

from mirror.manifest.writer import ManifestError
from mirror.model import ExitCode


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">x</a>' for h in hrefs)


def chain_site(site) -> None:
    site.page("/", links("/a"))
    site.page("/a", links("/b"))
    site.page("/b", "the end")


def capture_rows(db: sqlite3.Connection) -> dict[str, tuple[str, int, int]]:
    return {u: (f, o, n) for u, f, o, n in db.execute(
        "SELECT url, filename, offset, req_offset + req_length FROM captures")}


def assert_captures_read_back(archive: Path) -> None:
    """Every capture row's (file, offset) holds a response for its URL, and its request."""
    with sqlite3.connect(archive / "manifest.sqlite3") as db:
        rows = db.execute("SELECT url, filename, offset, req_offset FROM captures").fetchall()
    for url, filename, offset, req_offset in rows:
        for at, kind in ((offset, "response"), (req_offset, "request")):
            with open(archive / "warc" / filename, "rb") as f:
                f.seek(at)
                rec = next(iter(ArchiveIterator(f)))
                assert (rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI")) == (
                    kind, url)


def simulate_crash(archive: Path, forget: list[str], drop: list[str]) -> Path:
    """Turn a finished archive into what a SIGKILL leaves: the run still 'running', the
    captures of `forget` written but never committed (their URLs leased), the records of
    `drop` never written at all, the file still .open with a torn record at its end."""
    with sqlite3.connect(archive / "manifest.sqlite3") as db:
        rows = capture_rows(db)
        [warc] = {rows[u][0] for u in forget + drop}
        cut = min(rows[u][1] for u in drop)
        assert all(rows[u][2] <= cut for u in forget)  # forgotten ones were written first
        for url in forget + drop:
            db.execute("DELETE FROM captures WHERE url=?", (url,))
        for url in forget:
            db.execute("UPDATE urls SET state='leased', status=NULL WHERE url=?", (url,))
        for url in drop:  # found by a page whose commit was lost: unknown to the manifest
            (uid,) = db.execute("SELECT id FROM urls WHERE url=?", (url,)).fetchone()
            db.execute("DELETE FROM links WHERE dst=? OR src=?", (uid, uid))
            db.execute("DELETE FROM urls WHERE id=?", (uid,))
        db.execute("UPDATE runs SET state='running', finished_at=NULL, exit_code=NULL")
    path = archive / "warc" / warc
    data = path.read_bytes()
    open_path = path.with_name(path.name + ".open")
    open_path.write_bytes(data[:cut] + data[cut:cut + 40])  # a torn record at the end
    path.unlink()
    return open_path


async def test_unrecorded_capture_is_adopted_not_refetched(make_site, crawl):
    site = await make_site()
    chain_site(site)
    first = await crawl([site.base], crawl={"workers": 1})
    a, b = site.base + "a", site.base + "b"
    open_path = simulate_crash(first.archive, forget=[a], drop=[b])
    site.log.clear()
    second = await crawl([site.base], crawl={"workers": 1})
    assert second.result.exit_code == ExitCode.OK and second.result.resumed
    assert site.log == ["/b"]  # /a adopted from the WARC; its link to /b re-extracted
    assert not open_path.exists()
    with second.db() as db:
        rows = capture_rows(db)
        assert set(rows) == {site.base, a, b}
        assert db.execute("SELECT state FROM urls WHERE url=?", (b,)).fetchone() == ("done",)
    responses = second.responses()
    assert {u: len(r) for u, r in responses.items()} == {site.base: 1, a: 1, b: 1}
    assert_captures_read_back(second.archive)


async def test_file_shorter_than_the_manifest_says_is_refetched(make_site, crawl):
    site = await make_site()
    chain_site(site)
    first = await crawl([site.base], crawl={"workers": 1})
    b = site.base + "b"
    with first.db() as db:
        filename, offset, _ = capture_rows(db)[b]
        db.execute("UPDATE runs SET state='running'")
    path = first.archive / "warc" / filename
    with open(path, "r+b") as f:  # the tail never reached the disk (power loss)
        f.truncate(offset + 10)
    site.log.clear()
    second = await crawl([site.base], crawl={"workers": 1})
    assert second.result.exit_code == ExitCode.OK
    assert site.log == ["/b"]
    assert {u: len(r) for u, r in second.responses().items()} == {
        site.base: 1, site.base + "a": 1, b: 1}
    assert_captures_read_back(second.archive)


class FullDisk:
    """A WARC file on a disk that fills up after `budget` bytes (ENOSPC)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def __call__(self, path: Path) -> IO[bytes]:
        disk = self

        class File:
            def __init__(self) -> None:
                self.f = open(path, "xb")  # noqa: SIM115

            def write(self, data: bytes) -> int:
                if len(data) > disk.budget:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                disk.budget -= len(data)
                return self.f.write(data)

            def __getattr__(self, name: str):  # tell, seek, truncate, flush, fileno, close
                return getattr(self.f, name)

        return File()  # type: ignore[return-value]


async def test_disk_full_stops_the_run_and_a_later_run_completes(make_site, crawl):
    site = await make_site()
    pages = [f"/{i}" for i in range(12)]
    site.page("/", links(*pages))
    for p in pages:
        site.page(p, p + "x" * 2000)
    first = await crawl([site.base], crawl={"workers": 1}, warc_opener=FullDisk(9000))
    assert first.result.exit_code == ExitCode.DISK_FULL
    assert "disk full writing " in (first.result.error or "")
    assert "nothing lost; run `mirror run` again when there is space" in first.result.error
    with first.db() as db:
        done = {u for (u,) in db.execute("SELECT url FROM urls WHERE state='done'")}
        pending = {u for (u,) in db.execute("SELECT url FROM urls WHERE state='pending'")}
    assert 1 <= len(done) < 13 and pending
    assert not list((first.archive / "warc").glob("*.open"))
    log_before = list(site.log)
    second = await crawl([site.base], crawl={"workers": 1})
    assert second.result.exit_code == ExitCode.OK
    refetched = {p for p in site.log[len(log_before):] if site.base + p.lstrip("/") in done}
    assert refetched == set()
    counts = {u: len(r) for u, r in second.responses().items()}
    assert counts == {site.base + p.lstrip("/"): 1 for p in ["/", *pages]}
    assert_captures_read_back(second.archive)


async def test_damaged_manifest_is_not_resumed(make_site, crawl, tmp_path):
    site = await make_site()
    chain_site(site)
    first = await crawl([site.base])
    db_path = first.archive / "manifest.sqlite3"
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("UPDATE runs SET state='running'")
    db.execute("UPDATE sessions SET alive=0")  # last seen before this boot: a machine crash
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    schema = {n - 1 for (n,) in db.execute(  # the tables' list: damage in it is another case
        "SELECT pageno FROM dbstat WHERE name='sqlite_schema'")}
    db.close()
    data = bytearray(db_path.read_bytes())
    for page in set(range(1, len(data) // page_size)) - schema:  # every page of rows
        data[page * page_size + 10: page * page_size + 60] = b"\xff" * 50
    db_path.write_bytes(bytes(data))
    # found when the manifest opens, or by the check before a resume, as the damage falls
    with pytest.raises(ManifestError, match=r"damaged (after an unclean stop )?\(.*malformed.*"
                       r"\); refusing to (resume|use it)\. Move the archive folder aside"):
        await crawl([site.base])
