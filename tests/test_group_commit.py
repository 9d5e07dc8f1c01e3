"""Group commit (issue 17): captures whose records are flushed wait in a group that one
manifest transaction commits; a failed transaction undoes the whole group; a group never
outlives its WARC file; the frontier commits when it runs dry; start-up adopts every
capture of a group that a crash lost, in order, without fetching any again."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
from pathlib import Path

import pytest
from conftest import crawl_to_end, write_config
from crashsim import copy_folder
from test_store import Archive, exchange
from warcio.archiveiterator import ArchiveIterator

from mirror import crashpoints
from mirror.config import load_config
from mirror.crawl.store import StorageError
from mirror.manifest.writer import ManifestReader, NewUrl
from mirror.model import NOTHING, Discovered, ExitCode
from mirror.upkeep import recovery


@pytest.fixture
def archive(tmp_path):  # noqa: ANN001, ANN201
    opened: list[Archive] = []

    def make(**options) -> Archive:  # noqa: ANN003
        opened.append(Archive(tmp_path, **options))
        return opened[-1]

    yield make
    for a in opened:
        a.close()


def on_disk(a: Archive) -> list[str]:
    """The URLs of the response/revisit records the WARC files hold as the OS has them (no
    flush by the test: what a kill would leave)."""
    out = []
    for path in sorted(a.store.warc_dir.glob("*.warc.gz*")):
        with open(path, "rb") as f:
            out += [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(f)
                    if r.rec_type in ("response", "revisit")]
    return out


def states(a: Archive) -> dict[str, str]:
    return dict(a.manifest.db.execute("SELECT url, state FROM urls"))


def store(a: Archive, url: str, body: bytes, links: Discovered = NOTHING) -> None:
    a.store.store(a.run, a.item(url), exchange(url, body=body), None, None, links)


def test_a_group_is_one_transaction_of_captures_already_flushed(archive):
    a = archive(group_size=3)
    items = [a.item(f"http://x/{n}") for n in range(3)]
    commits: list[str] = []
    a.manifest.db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT"
                                     else None)
    for n, item in enumerate(items[:2]):
        a.store.store(a.run, item, exchange(item.url, body=b"%d" % n), None, None, NOTHING)
        assert on_disk(a) == [i.url for i in items[: n + 1]]  # flushed before any commit
    assert a.rows() == {} and set(states(a).values()) == {"leased"} and commits == []
    a.store.store(a.run, items[2], exchange(items[2].url, body=b"2"), None, None, NOTHING)
    assert commits == ["COMMIT"]  # the third fills the group: one transaction for all
    assert set(a.rows()) == {i.url for i in items}
    assert set(states(a).values()) == {"done"}


def test_a_revisit_of_a_capture_waiting_in_the_group_commits_the_group_first(archive):
    a = archive(group_size=10)
    store(a, "http://x/one", b"same")
    store(a, "http://x/other", b"other")
    assert a.rows() == {}
    store(a, "http://x/two", b"same")  # its original waits in the group: committed first
    assert a.rows() == {"http://x/one": ("response", 200, None),
                        "http://x/other": ("response", 200, None)}
    a.store.commit_group()
    assert a.rows()["http://x/two"] == ("revisit", 200, "http://x/one")


def test_a_failed_group_transaction_undoes_every_capture_of_the_group(archive, monkeypatch):
    a = archive(group_size=3)
    store(a, "http://x/first", b"first")
    a.store.commit_group()
    before = on_disk(a)
    real = a.manifest.captures.commit
    calls = []

    def failing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(args[1].url)
        if len(calls) == 2:  # the first capture's rows are written, then the disk fails
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)

    monkeypatch.setattr(a.manifest.captures, "commit", failing)
    found = Discovered(None, [NewUrl("http://x/new", "x", 1, 5, "page", "link", "link")])
    store(a, "http://x/a", b"a", found)
    store(a, "http://x/b", b"b")
    with pytest.raises(StorageError, match="cannot update the manifest"):
        store(a, "http://x/c", b"c")
    assert on_disk(a) == before  # the WARC file is cut back to before the group
    assert set(a.rows()) == {"http://x/first"}
    assert {u: s for u, s in states(a).items() if u != "http://x/first"} == {
        "http://x/a": "pending", "http://x/b": "pending", "http://x/c": "pending"}
    monkeypatch.setattr(a.manifest.captures, "commit", real)
    store(a, "http://x/a", b"a", found)  # fetched again later: what it found is new again
    a.store.commit_group()
    assert states(a)["http://x/new"] == "pending"
    assert on_disk(a) == [*before, "http://x/a"]


def test_a_group_never_outlives_its_warc_file(archive):
    a = archive(group_size=10, max_bytes=1)  # every capture fills its file
    store(a, "http://x/one", b"1")
    assert set(a.rows()) == {"http://x/one"}  # committed before the writer rotates
    store(a, "http://x/two", b"2")
    a.store.commit_group()
    files = dict(a.manifest.db.execute("SELECT url, filename FROM captures"))
    closed = sorted(p.name for p in a.store.warc_dir.glob("*.warc.gz"))
    assert files["http://x/one"] in closed and files["http://x/two"] not in closed


async def test_a_group_is_committed_after_group_wait(archive):
    a = archive(group_size=32)
    a.store.group_wait = 0.01
    store(a, "http://x/one", b"1")
    assert a.rows() == {}
    await asyncio.sleep(0.2)
    assert set(a.rows()) == {"http://x/one"}


def chain_site(site, n: int) -> None:  # noqa: ANN001
    """/ -> /p1 -> ... -> /pN: each page's only way in is the page before it."""
    for i in range(n + 1):
        path = "/" if i == 0 else f"/p{i}"
        nxt = f"<a href='/p{i + 1}'>next</a>" if i < n else ""
        site.page(path, f"<title>p{i}</title><p>page {i} {nxt}")


async def test_the_frontier_commits_the_group_when_it_runs_dry(make_site, tmp_path):
    """No size or time bound would commit these groups: the crawl goes on because the
    frontier, with nothing to hand out, commits the captures that found the next URL."""
    site = await make_site()
    chain_site(site, 6)
    cfg = load_config(write_config(tmp_path, [site.base], crawl={"workers": 4}))
    result = await crawl_to_end(cfg, timeout=20, group_size=1000, group_wait=math.inf)
    assert result.exit_code == ExitCode.OK
    assert sorted(site.log) == sorted(["/", *(f"/p{i}" for i in range(1, 7))])
    with contextlib.closing(sqlite3.connect(tmp_path / "archive" / "manifest.sqlite3")) as db:
        assert {s for (s,) in db.execute("SELECT state FROM urls")} == {"done"}


def fan_site(site, n: int) -> None:  # noqa: ANN001
    site.page("/", "<title>home</title>" + "".join(f"<a href='/p{i}'>p</a>" for i in range(n)))
    for i in range(n):
        site.page(f"/p{i}", f"<title>p{i}</title><p>page {i}")


async def test_start_up_adopts_every_capture_of_a_lost_group_in_order(make_site, tmp_path):
    site = await make_site()
    fan_site(site, 10)
    work = tmp_path / "run"
    work.mkdir()
    cfg = load_config(write_config(work, [site.base], crawl={"workers": 1,
                                                             "parse_processes": 0}))
    crashed = tmp_path / "crashed"

    def at(step: str, kind: str) -> None:
        if step == "group:inside" and not crashed.exists():
            copy_folder(work, crashed)  # what a kill inside the group's transaction leaves

    crashpoints.hook = at
    try:
        result = await crawl_to_end(cfg, timeout=20, group_size=4, group_wait=math.inf)
    finally:
        crashpoints.hook, crashpoints.label = None, ""
    assert result.exit_code == ExitCode.OK and crashed.exists()
    lost = lost_captures(crashed / "archive")
    assert len(lost) == 4  # the whole group is past the last commit, flushed
    before = committed(crashed / "archive")
    mark = len(site.log)
    result = await crawl_to_end(load_config(crashed / "site.toml"), timeout=20,
                                group_size=4, group_wait=math.inf)
    assert result.exit_code == ExitCode.OK
    refetched = {site.base.rstrip("/") + p for p in site.log[mark:]}
    assert refetched and not refetched & ({url for url, _ in lost} | before)
    with contextlib.closing(sqlite3.connect(crashed / "archive" / "manifest.sqlite3")) as db:
        adopted = db.execute(
            f"SELECT url, record_id FROM captures WHERE record_id IN "
            f"({','.join('?' * len(lost))}) ORDER BY id", [r for _, r in lost]).fetchall()
        assert {s for (s,) in db.execute("SELECT state FROM urls")} == {"done"}
    assert adopted == lost  # every capture of the group, in the order it was written


def committed(archive: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        return {u for (u,) in db.execute("SELECT url FROM captures")}


def lost_captures(archive: Path) -> list[tuple[str, str]]:
    """(URL, record id) of the complete captures past the last commit of each .open file."""
    manifest = ManifestReader(archive / "manifest.sqlite3")
    try:
        ends = manifest.captures.committed_ends()
    finally:
        manifest.close()
    out = []
    for path in recovery.open_files(archive / "warc"):
        final = path.name.removesuffix(".open")
        found, _ = recovery.scan_groups(path, ends.get(final, 0), final)
        out += [(f.exchange.url, f.location.record_id) for f in found]
        for f in found:
            f.exchange.body.close()
    return out
