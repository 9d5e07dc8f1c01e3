"""The manifest's contract, on both implementations: SQLite (a file) and PostgreSQL (a real
server: tests/pgserver.py; skipped with the reason where it cannot start).

The run and URL state machine as the crawler drives it, the queries of status and reports,
and the host lease state machine of a crawl shared by several workers (manifest.schema's
docstring): exclusive leases across connections and processes, expiry by the database's
clock, fencing (a commit under a lost lease writes nothing), recover, Retry-After and the
politeness delay. Then 4 worker processes crawl 8 hosts through one manifest, one of them
killed with SIGKILL: no two leases of a host slot overlap, every URL is committed once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mirror.manifest.reader import ManifestError, ManifestReader, open_reader
from mirror.manifest.writer import Manifest, ManifestWriteError, open_manifest
from mirror.model import CaptureRow, NewUrl, PageText, UrlItem

BACKENDS = ["sqlite", "postgresql"]
H, OTHER = "h.test", "o.test"
HERE = Path(__file__).resolve().parent


def new(url: str, *, site: str = H, skip: str | None = None, via: str = "link",
        kind: str = "link", mode: str = "page", lastmod: str | None = None) -> NewUrl:
    return NewUrl(url, site, 1, 10, "" if skip else mode, via, kind, skip, lastmod)


def capture(n: int, *, status: int = 200, digest: str | None = None, filename: str = "f.warc.gz",
            record_type: str = "response", original: int | None = None,
            mime: str = "text/html") -> CaptureRow:
    return CaptureRow(f"2026-01-01T00:00:{n % 60:02d}Z", f"<urn:uuid:{n}>", filename,
                      n * 100, 50, n * 100 + 50, 50, status, mime, digest or f"sha1:{n}", 10,
                      None, None, None, None, record_type, original)


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a manifest lives: a file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "manifest.sqlite3"
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def manifest(target: Path | str) -> Any:
    m = open_manifest(target)
    yield m
    m.close()


@pytest.fixture
def other(target: Path | str, manifest: Manifest) -> Any:
    """A second connection to the same manifest: another worker."""
    m = open_manifest(target)
    yield m
    m.close()


def states(m: ManifestReader) -> dict[str, str]:
    return dict(m.sql.execute("SELECT url, state FROM urls").fetchall())


def links(m: ManifestReader) -> set[tuple[str, str, str]]:
    return set(m.sql.execute("SELECT s.url, d.url, kind FROM links JOIN urls s ON s.id=src "
                             "JOIN urls d ON d.id=dst").fetchall())


def item(m: ManifestReader, run: int, url: str) -> UrlItem:
    found = m.urls.item_for(run, url)
    assert found is not None, url
    return found


def one(m: ManifestReader, sql: str, params: tuple[object, ...] = ()) -> Any:
    return m.sql.execute(sql, params).fetchone()[0]


# -- the run and URL state machine ----------------------------------------------------------
def test_a_run_starts_with_its_seeds_and_discovers_each_url_once(manifest: Manifest) -> None:
    m = manifest
    run = m.runs.start("2026-01-01T00:00:00Z", "cfg", [new("http://h.test/", via="start")])
    assert m.runs.last() is not None and m.runs.last().state == "running"
    a = item(m, run, "http://h.test/")
    m.captures.commit(run, a, capture(1), [new("http://h.test/b"), new("http://h.test/c"),
                                          new("http://o.test/x", site=OTHER, skip="off_site"),
                                          new("http://h.test/b")])
    b = item(m, run, "http://h.test/b")
    m.captures.commit(run, b, capture(2), [new("http://h.test/"), new("http://h.test/c")])
    assert states(m) == {"http://h.test/": "done", "http://h.test/b": "done",
                         "http://h.test/c": "pending", "http://o.test/x": "skipped"}
    assert links(m) == {("http://h.test/", "http://h.test/b", "link"),
                        ("http://h.test/", "http://h.test/c", "link"),
                        ("http://h.test/", "http://o.test/x", "link"),
                        ("http://h.test/b", "http://h.test/", "link"),
                        ("http://h.test/b", "http://h.test/c", "link")}
    assert [(h.site, h.slot) for h in m.sharedrun.hosts()] == [(H, 0)]  # none for a skipped site
    assert m.urls.count_pending() == 1 and m.counts.done_pages(run) == 2
    assert m.counts.skip_counts(run) == {"off_site": 1}
    assert m.urls.skipped(run) == {"off_site": ["http://o.test/x"]}


def test_skipped_urls_found_again_as_allowed_become_pending(manifest: Manifest) -> None:
    m = manifest
    run = m.runs.start("t", "d")
    m.urls.add(run, None, [new("http://h.test/a", skip="max_depth")])
    m.urls.add(run, None, [new("http://h.test/a")])
    assert states(m) == {"http://h.test/a": "pending"}
    assert m.urls.skip(run, item(m, run, "http://h.test/a"), "robots")
    assert states(m) == {"http://h.test/a": "skipped"}
    m.urls.add(run, None, [new("http://h.test/a")])
    assert states(m) == {"http://h.test/a": "pending"}


def test_the_next_run_discovers_every_url_again(manifest: Manifest) -> None:
    m = manifest
    first = m.runs.start("t", "d", [new("http://h.test/a"), new("http://h.test/b")])
    m.captures.commit(first, item(m, first, "http://h.test/a"), capture(1), [])
    m.runs.finish(first, "t1", "complete", 0)
    second = m.runs.start("t2", "d", [new("http://h.test/a")])
    m.urls.add(second, None, [new("http://h.test/b")])
    assert m.sql.execute("SELECT url, run_id, state, tries FROM urls ORDER BY url").fetchall() \
        == [("http://h.test/a", second, "pending", 0), ("http://h.test/b", second, "pending", 0)]
    assert [r.state for r in m.runs.all()] == ["complete", "running"]
    prev = m.captures.previous(item(m, second, "http://h.test/a").id, second)
    assert prev is not None and prev.status == 200 and prev.original.record_id == "<urn:uuid:1>"
    assert m.captures.any_before(second) and not m.captures.any_before(first)


def test_the_frontier_leases_due_urls_oldest_first(manifest: Manifest) -> None:
    m = manifest
    run = m.runs.start("t", "d", [new(f"http://h.test/{n}") for n in range(4)]
                      + [new("http://o.test/r", site=OTHER, mode="requisite"),
                         new("http://h.test/robots.txt", via="robots", mode="requisite")])
    first = m.urls.lease(2, 100.0)
    assert [i.url for i in first] == ["http://h.test/0", "http://h.test/1"]
    assert [i.url for i in m.urls.lease(10, 100.0, exclude_sites=[H])] == ["http://o.test/r"]
    # next_try = the database's now + the delay: 500 (Unix time) within the clock's ms
    assert m.urls.retry_later(run, item(m, run, "http://h.test/0"), "HTTP 503",
                              500.0 - time.time())
    assert m.urls.next_due() == 0.0
    assert [i.url for i in m.urls.lease(10, 100.0, pages=False)] == []
    assert [i.url for i in m.urls.lease(10, 100.0)] == ["http://h.test/2", "http://h.test/3"]
    assert round(m.urls.next_due() or 0) == 500 and [i.url for i in m.urls.lease(10, 600.0)] == ["http://h.test/0"]
    m.urls.unlease([first[1].id])
    assert states(m)["http://h.test/1"] == "pending"
    assert m.runs.resume(run) == 4  # every lease of a dead process
    assert m.counts.error_counts(run) == [("HTTP 503", 1)]


def test_outcomes_and_the_reports_queries(manifest: Manifest) -> None:
    """What status, runs, explain and the run report ask, after each kind of outcome."""
    m = manifest
    run = m.runs.start("t", "d", [new("http://h.test/", via="start")])
    m.runs.begin_session(run, 1000.0)
    home = item(m, run, "http://h.test/")
    found = [new("http://h.test/gone"), new("http://h.test/busy"), new("http://h.test/dup"),
             new("http://h.test/sm.xml", via="sitemap", mode="requisite"),
             new("http://u.test/x", site="u.test", kind="requisite", mode="requisite")]
    m.captures.commit(run, home, capture(1), found, note="scripted",
                     text=PageText("Home", "welcome"))
    sm = item(m, run, "http://h.test/sm.xml")
    m.captures.commit(run, sm, capture(2, mime="application/xml"),
                     [new("http://h.test/only", via="sitemap", lastmod="2026-01-01")])
    m.captures.commit(run, item(m, run, "http://h.test/only"), capture(3), [])
    m.captures.commit(run, item(m, run, "http://h.test/gone"), capture(4, status=404), [])
    m.captures.commit(run, item(m, run, "http://h.test/busy"), capture(5, status=503), [],
                     failed_reason="HTTP 503")
    m.captures.commit(run, item(m, run, "http://h.test/dup"),
                     capture(6, digest="sha1:1", record_type="revisit", original=1), [])
    m.urls.give_up(run, item(m, run, "http://u.test/x"), "host unreachable: refused")
    m.runs.touch_session(1, 1012.5)
    assert m.counts.url_states(run) == {"done": 5, "failed": 2}
    assert m.counts.failed(run) == [("http://h.test/busy", "HTTP 503"),
                             ("http://u.test/x", "host unreachable: refused")]
    assert m.counts.last_error(run) == "http://u.test/x: host unreachable: refused"
    assert m.counts.error_counts(run) == [("HTTP 503", 1), ("host unreachable: refused", 1)]
    assert m.counts.broken_links(run) == [("http://h.test/busy", 503, "http://h.test/"),
                                   ("http://h.test/gone", 404, "http://h.test/"),
                                   ("http://u.test/x", None, "http://h.test/")]
    assert m.counts.broken_links_total(run) == 3
    assert m.counts.needs_browser(run) == [("http://h.test/", "scripted")]
    assert m.counts.unreachable_hosts(run, "host unreachable: ") == [("u.test", "refused", 1)]
    assert m.counts.sitemap_only_pages(run) == 1
    assert m.counts.capture_stats(run) == {"status": {"2xx": 4, "4xx": 1, "5xx": 1},
                                    "mime": {"text/html": 5, "application/xml": 1},
                                    "payload_bytes": 60, "warc_bytes": 600}
    assert m.counts.host_usage(run) == {H: (6, 60)}
    assert m.runs.totals() == {run: (6, 60)} and m.counts.captures(run) == 6
    assert m.runs.time(run) == (12.5, 1) and m.counts.pages() == 5
    assert m.captures.committed_ends() == {"f.warc.gz": 700}
    assert m.runs.contents(run)["http://h.test/gone"] == (404, "sha1:4")
    dup = m.captures.in_run(run, "http://h.test/dup")
    assert dup is not None and dup.id == 1 and dup.record_id == "<urn:uuid:1>"
    assert m.captures.in_run(None, "http://h.test/dup") == dup
    assert m.captures.original_by_digest("sha1:1", 200) == dup
    assert m.captures.original_by_record("<urn:uuid:1>", "sha1:1") == dup
    assert m.texts.page_text(6) == PageText("Home", "welcome")  # a revisit shares its text
    assert [c.record_type for c in m.texts.page_history("http://h.test/dup")] == ["revisit"]
    assert [dict(r)["offset"] for r in m.captures.all(run)] == [100, 200, 300, 400, 500, 600]
    assert one(m, "SELECT lastmod FROM sitemap_lastmod") == "2026-01-01"
    m.runs.finish(run, "t2", "complete", 3)
    assert m.runs.last() is not None and m.runs.last().exit_code == 3


def test_a_runs_captures_are_walked_by_url_as_python_orders_them(manifest: Manifest) -> None:
    """runs.walk feeds the report's merge of two runs (run/changes.py), which compares URLs
    as Python does: by code point on both engines, whatever PostgreSQL's locale says."""
    m = manifest
    urls = ["http://h.test/b", "http://h.test/B", "http://h.test/é", "http://h.test/a-z",
            "http://h.test/a_z", "http://h.test/Z", "http://h.test/a"]
    run = m.runs.start("t", "d", [new(u, via="start") for u in urls])
    for n, url in enumerate(urls, 1):
        m.captures.commit(run, item(m, run, url), capture(n), [])
    walked = list(m.runs.walk(run))
    assert [w[0] for w in walked] == sorted(urls)
    assert walked[0] == ("http://h.test/B", 200, "sha1:2")


def test_ensure_url_leases_robots_txt_once_per_run(manifest: Manifest) -> None:
    m = manifest
    run = m.runs.start("t", "d")
    robots = m.urls.ensure(run, "http://h.test/robots.txt", H, "robots")
    assert robots is not None and robots.via == "robots" and robots.mode == "requisite"
    assert m.urls.ensure(run, "http://h.test/robots.txt", H, "robots") is None  # leased
    m.captures.commit(run, robots, capture(1, mime="text/plain"), [])
    assert m.urls.ensure(run, "http://h.test/robots.txt", H, "robots") is None  # done
    m.runs.finish(run, "t", "complete", 0)
    later = m.runs.start("t2", "d")
    again = m.urls.ensure(later, "http://h.test/robots.txt", H, "robots")
    assert again is not None and again.id == robots.id


def test_of_path_lists_the_runs_urls_of_one_path_and_its_queries(manifest: Manifest) -> None:
    m = manifest
    api = "http://h.test/api/1.json"
    others = [f"{api}x", f"{api}/more", "http://h.test/api/1.jso", "http://h.test/api/2.json"]
    mine = [f"{api}?_=1700000000000", api, f"{api}?page=2&_=1"]
    run = m.runs.start("t", "d")
    for url in [mine[0], *others, *mine[1:]]:  # one by one: ids in this order
        m.urls.add(run, None, [new(url)])
    assert m.urls.of_path(run, api) == mine  # the first found first
    assert m.urls.of_path(run, "http://h.test/api/3.json") == []
    m.runs.finish(run, "t", "complete", 0)
    later = m.runs.start("t2", "d")
    assert m.urls.of_path(later, api) == []  # another run's rows


def test_rollback_past_forgets_captures_beyond_a_cut_file(manifest: Manifest) -> None:
    m = manifest
    urls = [f"http://h.test/{n}" for n in range(1, 5)]
    run = m.runs.start("t", "d", [new(u) for u in urls])
    for n, url in enumerate(urls, 1):
        m.captures.commit(run, item(m, run, url), capture(n), [], text=PageText(url, "x"))
    assert m.captures.rollback_past(run, "f.warc.gz", 350) == urls[2:]  # 2 ends at 300, 3 at 400
    assert states(m) == {urls[0]: "done", urls[1]: "done", urls[2]: "pending",
                         urls[3]: "pending"}
    assert one(m, "SELECT COUNT(*) FROM page_texts") == 2
    assert m.captures.committed_ends() == {"f.warc.gz": 300}


def test_abandon_run_and_drop_runs(manifest: Manifest) -> None:
    m = manifest
    old = m.runs.start("t", "d", [new("http://h.test/a")])
    m.captures.commit(old, item(m, old, "http://h.test/a"), capture(1), [])
    m.runs.finish(old, "t", "complete", 0)
    run = m.runs.start("t2", "d", [new("http://h.test/a")])
    m.urls.lease(10, 1.0)
    m.runs.abandon(run, "t3")
    assert states(m) == {"http://h.test/a": "pending"}
    targets = m.prune.targets([old])
    assert (targets.captures, list(targets.files)) == (1, ["f.warc.gz"])
    m.prune.drop_runs([old], [], '{"done": true}')
    assert [r.id for r in m.runs.all()] == [run] and m.counts.captures(old) == 0
    assert m.prune.journal() == '{"done": true}'
    m.prune.set_journal(None)
    assert m.prune.journal() is None


# -- the host lease state machine -----------------------------------------------------------
def crawl_setup(m: Manifest, urls: int = 3, sites: tuple[str, ...] = (H,)) -> int:
    """A run shared by workers: `urls` pending URLs on each site."""
    seeds = [new(f"http://{s}/{n}", site=s) for s in sites for n in range(urls)]
    joined = m.sharedrun.join_or_start_run("t", "d", seeds)
    assert joined.started
    return joined.run_id


def test_a_host_is_leased_by_one_worker_at_a_time(manifest: Manifest, other: Manifest) -> None:
    run = crawl_setup(manifest, sites=(H, OTHER))
    mine = manifest.sharedrun.lease_hosts("w1", 1, 30)
    theirs = other.sharedrun.lease_hosts("w2", 5, 30)
    assert [lease.site for lease in mine] == [H] and [lease.site for lease in theirs] == [OTHER]
    assert other.sharedrun.lease_hosts("w2", 5, 30) == [] \
        == manifest.sharedrun.lease_hosts("w3", 5, 30)
    assert [i.url for i in manifest.sharedrun.lease_urls(mine[0], 2)] == ["http://h.test/0",
                                                                "http://h.test/1"]
    assert other.sharedrun.lease_urls(replace(mine[0], owner="w2"), 2) == []  # not its lease
    assert manifest.sharedrun.release_host(mine[0], 0)
    assert states(manifest)["http://h.test/1"] == "pending"  # unfetched: back to pending
    again = other.sharedrun.lease_hosts("w2", 5, 30)
    assert [(lease.site, lease.epoch > mine[0].epoch) for lease in again] == [(H, True)]
    assert other.sharedrun.join_or_start_run("t", "d") == (run, False)


def test_a_lease_expires_by_the_databases_clock_and_fences_the_old_holder(
        manifest: Manifest, other: Manifest, monkeypatch: pytest.MonkeyPatch) -> None:
    run = crawl_setup(manifest)
    [old] = manifest.sharedrun.lease_hosts("w1", 1, 0.3)
    fetched = manifest.sharedrun.lease_urls(old, 3)
    monkeypatch.setattr(time, "time", lambda: 4e9)  # a worker's clock decides nothing
    assert other.sharedrun.lease_hosts("w2", 1, 30) == []
    monkeypatch.undo()
    assert manifest.captures.commit(run, fetched[0], capture(1), [], lease=old)  # in time
    time.sleep(0.4)
    assert manifest.sharedrun.lease_urls(old, 3) == []  # expired: no more URLs under it
    [new_lease] = other.sharedrun.lease_hosts("w2", 1, 30)  # taken over: its URLs back to pending
    assert new_lease.epoch > old.epoch and states(manifest)["http://h.test/1"] == "pending"
    assert [i.url for i in other.sharedrun.lease_urls(new_lease, 5)] == ["http://h.test/1",
                                                              "http://h.test/2"]
    # every write of the old holder under its lost lease: False, nothing written
    before = (one(manifest, "SELECT COUNT(*) FROM captures"),
              one(manifest, "SELECT COUNT(*) FROM errors"), states(manifest))
    assert not manifest.captures.commit(run, fetched[1], capture(2), [new("http://h.test/z")],
                                       text=PageText("t", "b"), lease=old)
    assert not manifest.urls.retry_later(run, fetched[1], "timeout", 0, lease=old)
    assert not manifest.urls.give_up(run, fetched[2], "timeout", lease=old)
    assert not manifest.urls.skip(run, fetched[2], "robots", lease=old)
    manifest.urls.unlease([fetched[1].id], lease=old)
    assert not manifest.sharedrun.release_host(old, 0) \
        and manifest.sharedrun.renew_host(old, 30) is None
    assert (one(manifest, "SELECT COUNT(*) FROM captures"),
            one(manifest, "SELECT COUNT(*) FROM errors"), states(manifest)) == before
    assert other.captures.commit(run, fetched[1], capture(3), [], lease=new_lease)
    assert one(other, "SELECT COUNT(*) FROM captures WHERE url_id=?", (fetched[1].id,)) == 1
    assert other.sharedrun.renew_host(new_lease, 60) is not None


def test_a_lease_renewed_or_released_after_expiry_but_not_taken_over_holds(
        manifest: Manifest) -> None:
    run = crawl_setup(manifest)
    [lease] = manifest.sharedrun.lease_hosts("w1", 1, 0.1)
    [first] = manifest.sharedrun.lease_urls(lease, 1)
    time.sleep(0.2)  # expired; no one took it: what it leased is still its own
    renewed = manifest.sharedrun.renew_host(lease, 30)
    assert renewed is not None and renewed.epoch == lease.epoch and renewed.until > lease.until
    assert manifest.captures.commit(run, first, capture(1), [], lease=renewed)
    assert [i.url for i in manifest.sharedrun.lease_urls(renewed, 1)] == ["http://h.test/1"]


def test_recover_ends_the_own_leases_at_once_and_the_expired_ones_of_others(
        manifest: Manifest, other: Manifest) -> None:
    crawl_setup(manifest, sites=("a.test", "b.test", "c.test"))
    [a] = manifest.sharedrun.lease_hosts("w1", 1, 30)
    [b] = other.sharedrun.lease_hosts("w2", 1, 0.1)
    [c] = other.sharedrun.lease_hosts("w3", 1, 30)
    for lease in (a, b, c):
        assert len(manifest.sharedrun.lease_urls(lease, 2)) == 2
    time.sleep(0.2)
    restarted = open_manifest(manifest.path)  # w1 again, after a crash
    try:
        # its own two, and w2's two (expired); its own host waits the delay: it may have
        # sent a request just before it died
        assert restarted.sharedrun.recover("w1", delay=30) == 4
    finally:
        restarted.close()
    owners = {h.site: h.lease_owner for h in manifest.sharedrun.hosts()}
    assert owners == {"a.test": None, "b.test": None, "c.test": "w3"}
    assert [h.site for h in other.sharedrun.lease_hosts("w4", 3, 30)] == ["b.test"]
    assert Counter(states(manifest).values()) == {"pending": 7, "leased": 2}
    assert other.sharedrun.release_host(c, 0) and not other.sharedrun.release_host(b, 0)


def test_politeness_next_fetch_at_and_block_until_hold_for_every_worker(
        manifest: Manifest, other: Manifest) -> None:
    crawl_setup(manifest)
    [lease] = manifest.sharedrun.lease_hosts("w1", 1, 30)
    assert manifest.sharedrun.release_host(lease, 0.3)  # the politeness delay
    assert other.sharedrun.lease_hosts("w2", 1, 30) == []
    time.sleep(0.35)
    [lease] = other.sharedrun.lease_hosts("w2", 1, 30)
    assert other.sharedrun.release_host(lease, 0)
    manifest.sharedrun.block_host(H, 0.3)  # Retry-After
    manifest.sharedrun.block_host(H, 0.01)  # a shorter one does not shorten it
    assert other.sharedrun.lease_hosts("w2", 1, 30) == []
    time.sleep(0.35)
    assert [h.site for h in other.sharedrun.lease_hosts("w2", 1, 30)] == [H]


def test_only_hosts_with_due_pending_urls_are_leased(manifest: Manifest) -> None:
    run = crawl_setup(manifest, urls=1, sites=("a.test", "b.test"))
    m = manifest
    m.urls.ensure(run, "http://c.test/robots.txt", "c.test", "robots")  # no host row needed
    m.captures.commit(run, item(m, run, "http://a.test/0"), capture(1), [])
    m.urls.retry_later(run, item(m, run, "http://b.test/0"), "HTTP 503", 3600)
    assert m.sharedrun.lease_hosts("w1", 5, 30) == []
    m.urls.retry_later(run, item(m, run, "http://b.test/0"), "HTTP 503", -1)
    assert [h.site for h in m.sharedrun.lease_hosts("w1", 5, 30)] == ["b.test"]


def test_host_slots_let_workers_share_a_host_on_disjoint_urls(
        manifest: Manifest, other: Manifest) -> None:
    crawl_setup(manifest, urls=4)
    manifest.sharedrun.set_host_slots(2)
    [one_slot] = manifest.sharedrun.lease_hosts("w1", 1, 30)
    [two_slot] = other.sharedrun.lease_hosts("w2", 1, 30)
    assert {one_slot.slot, two_slot.slot} == {0, 1}
    mine = {i.id for i in manifest.sharedrun.lease_urls(one_slot, 2)}
    theirs = {i.id for i in other.sharedrun.lease_urls(two_slot, 5)}
    assert len(mine) == 2 and len(theirs) == 2 and not mine & theirs


def test_workers_heartbeats_and_files(manifest: Manifest, other: Manifest) -> None:
    run = crawl_setup(manifest, urls=3)
    manifest.sharedrun.register_worker("w1", run)
    other.sharedrun.register_worker("w2", run)
    assert manifest.sharedrun.heartbeat("w1") and not manifest.sharedrun.heartbeat("nobody")
    time.sleep(0.2)
    assert other.sharedrun.heartbeat("w2")
    assert manifest.sharedrun.lost_workers(0.15) == ["w1"]
    assert [(w.id, w.run_id) for w in manifest.sharedrun.workers()] == [("w1", run), ("w2", run)]
    [lease] = manifest.sharedrun.lease_hosts("w1", 1, 30)
    items = manifest.sharedrun.lease_urls(lease, 3)
    assert manifest.filemarks.open_file("w1-1.warc.gz", "w1") \
        and manifest.filemarks.open_file("w1-2.warc.gz", "w1")
    assert manifest.filemarks.open_file("w1-3.warc.gz", "w1")
    for n, (it, name) in enumerate(zip(items, ["w1-1", "w1-2", "w1-3"], strict=True), 1):
        assert manifest.captures.commit(run, it, capture(n, filename=f"{name}.warc.gz"), [],
                                       lease=lease)
    assert manifest.filemarks.close_file("w1-1.warc.gz", 100, "ab") \
        and manifest.filemarks.mark_uploaded("w1-1.warc.gz")
    assert manifest.filemarks.close_file("w1-2.warc.gz", 200, "cd")
    assert not manifest.filemarks.mark_uploaded("w1-3.warc.gz")  # not closed yet
    assert other.filemarks.mark_lost("w1") == ["w1-2.warc.gz", "w1-3.warc.gz"]
    assert [(f.name, f.state) for f in other.sharedrun.files("w1")] == [
        ("w1-1.warc.gz", "uploaded"), ("w1-2.warc.gz", "lost"), ("w1-3.warc.gz", "lost")]
    assert states(other) == {"http://h.test/0": "done", "http://h.test/1": "pending",
                             "http://h.test/2": "pending"}
    assert other.sharedrun.hosts()[0].lease_owner is None
    # w1 comes back: its lost files are not its to write or upload any more
    assert not manifest.filemarks.close_file("w1-3.warc.gz", 300, "ef")
    assert not manifest.filemarks.mark_uploaded("w1-2.warc.gz") \
        and not manifest.filemarks.open_file("w1-2.warc.gz", "w1")


def test_a_worker_joins_the_unfinished_run_and_the_next_run_starts_anew(
        manifest: Manifest, other: Manifest) -> None:
    first = manifest.sharedrun.join_or_start_run("t", "d", [new("http://h.test/")])
    assert first.started and other.sharedrun.join_or_start_run("t", "d") == (first.run_id, False)
    manifest.runs.finish(first.run_id, "t", "interrupted", 130)
    assert other.sharedrun.join_or_start_run("t", "d") == (first.run_id, False)
    assert manifest.runs.last() is not None and manifest.runs.last().state == "running"
    manifest.runs.finish(first.run_id, "t", "complete", 0)
    second = other.sharedrun.join_or_start_run("t", "d", [new("http://h.test/")])
    assert second.started and second.run_id == first.run_id + 1


def test_a_reader_reads_what_the_writer_wrote(target: Path | str) -> None:
    m = open_manifest(target)
    try:
        run = m.runs.start("t", "d", [new("http://h.test/")])
    finally:
        m.close()
    reader = open_reader(target)
    try:
        assert [r.id for r in reader.runs.all()] == [run] and reader.quick_check() == "ok"
        assert reader.urls.item_for(run, "http://h.test/") is not None
    finally:
        reader.close()


def test_search_needs_the_sqlite_manifest(manifest: Manifest) -> None:
    run = manifest.runs.start("t", "d", [new("http://h.test/")])
    manifest.captures.commit(run, item(manifest, run, "http://h.test/"), capture(1), [],
                            text=PageText("Title", "some words"))
    manifest.runs.finish(run, "t", "complete", 0)
    if manifest.sql.dialect == "sqlite":
        assert [h.title for h in manifest.texts.search("words")] == ["Title"]
    else:
        with pytest.raises(ManifestError, match="search needs the SQLite manifest"):
            manifest.texts.search("words")
    assert manifest.texts.page_text(1) == PageText("Title", "some words")


# -- several worker processes ---------------------------------------------------------------
SITES = [f"s{n}.test" for n in range(8)]
PER_SITE = 150
TTL = 0.6


def universe() -> list[str]:
    return [f"http://{site}/p{n}" for site in SITES for n in range(PER_SITE)]


def found_on(url: str) -> list[NewUrl]:
    """About 20 links of a page, to pages of every site (found by many pages at once)."""
    site, n = url.split("/")[2], int(url.rsplit("p", 1)[1])
    out = [new(f"http://{site}/p{(n * 4 + k) % PER_SITE}", site=site) for k in range(1, 5)]
    out += [new(f"http://{s}/p{(n * 7 + i * 13) % PER_SITE}", site=s)
            for i, s in enumerate(SITES * 2)]
    return out


def worker(target: str, owner: str, log_path: str, stall_on: int) -> None:
    """A crawl worker: lease hosts, lease their URLs, commit a capture of each (fenced),
    release; on its `stall_on`-th lease, stall past the lease's ttl first. Logs every
    lease and every commit, one line at a time (a killed worker's log ends where it died)."""
    m = open_manifest(target)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    joined = m.sharedrun.join_or_start_run("t", "d", [new(f"http://{s}/p0", site=s) for s in SITES])
    m.sharedrun.register_worker(owner, joined.run_id)
    m.sharedrun.recover(owner)
    leases = 0
    while True:
        got = m.sharedrun.lease_hosts(owner, 2, TTL)
        if not got:
            if m.urls.count_pending() == 0:
                break
            time.sleep(0.01)
            continue
        for lease in got:
            leases += 1
            print(json.dumps(["L", lease.site, lease.slot, lease.epoch, lease.acquired,
                              lease.until]), file=log)
            for n, it in enumerate(m.sharedrun.lease_urls(lease, 4)):
                if leases == stall_on and n == 1:
                    time.sleep(TTL + 0.3)  # the lease expires: another worker takes over
                time.sleep(0.002)  # the fetch
                ok = m.captures.commit(joined.run_id, it, capture(it.id), found_on(it.url),
                                      lease=lease)
                print(json.dumps(["C", it.url, ok]), file=log)
            end = one(m, f"SELECT {m.sql.now_ms}")
            released = m.sharedrun.release_host(lease, 0.003)
            print(json.dumps(["R", lease.site, lease.slot, lease.epoch,
                              end if released else lease.until]), file=log)
    m.close()


def _start(target: str, owner: str, log: Path, stall_on: int) -> subprocess.Popen[bytes]:
    code = (f"import test_manifest_contract as t; "
            f"t.worker({target!r}, {owner!r}, {str(log)!r}, {stall_on})")
    return subprocess.Popen([sys.executable, "-c", code], cwd=HERE,
                            env={**os.environ, "PYTHONPATH": f"{HERE}:{HERE.parent}"})


def commits(log: Path) -> int:
    return log.read_text().count('["C"') if log.exists() else 0


def test_four_workers_never_share_a_host_slot_and_commit_every_url_once(
        target: Path | str, tmp_path: Path) -> None:
    """4 processes, 8 hosts, 1,200 URLs each found by about 20 pages: each worker stalls past
    its lease once (taken over: its late commits are refused), and one is killed with
    SIGKILL mid-crawl (its leases expire; the others take its hosts over)."""
    m = open_manifest(target)  # the schema, before the workers race for it
    m.close()
    logs = [tmp_path / f"w{n}.log" for n in range(4)]
    procs = [_start(str(target), f"w{n}", logs[n], stall_on=3 + n) for n in range(4)]
    try:
        while commits(logs[0]) < 40:
            assert procs[0].poll() is None, "worker 0 ended before it was killed"
            time.sleep(0.01)
        procs[0].kill()  # SIGKILL
        for proc in procs[1:]:
            assert proc.wait(timeout=240) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert procs[0].returncode == -signal.SIGKILL
    intervals: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    committed: Counter[str] = Counter()
    refused = 0
    for n, log in enumerate(logs):
        open_leases: dict[tuple[str, int, int], tuple[int, int]] = {}
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if rec[0] == "L":
                open_leases[rec[1], rec[2], rec[3]] = (rec[4], rec[5])
            elif rec[0] == "R":
                start, _ = open_leases.pop((rec[1], rec[2], rec[3]))
                intervals[rec[1], rec[2]].append((start, rec[4], f"w{n}"))
            elif rec[2]:
                committed[rec[1]] += 1
            else:
                refused += 1
        for (site, slot, _), (start, until) in open_leases.items():  # killed holding them
            intervals[site, slot].append((start, until, f"w{n}"))
    overlaps = [(slot, a, b) for slot, spans in intervals.items()
                for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False) if b[0] < a[1]]
    assert overlaps == []
    assert sum(len(spans) for spans in intervals.values()) > 100
    assert refused > 0  # the stalls were taken over, and their commits fenced
    assert set(committed.values()) == {1}  # (the killed one may have died before its log
    assert len(set(universe()) - set(committed)) <= 1  # line: the manifest counts it)
    m = open_manifest(target)
    try:
        assert m.counts.url_states(1) == {"done": len(universe())}
        assert one(m, "SELECT COUNT(*) FROM captures") == len(universe())
        assert one(m, "SELECT COUNT(DISTINCT url_id) FROM captures") == len(universe())
    finally:
        m.close()


def test_a_commit_rolled_back_by_the_database_leaves_its_urls_to_be_found_again(
        manifest: Manifest) -> None:
    """A failure after the discovered URLs were written (here: a trigger on links) rolls
    the whole capture back; those URLs are inserted when found again."""
    m = manifest
    run = m.runs.start("t", "d", [new("http://h.test/a")])
    page = item(m, run, "http://h.test/a")
    if m.sql.dialect == "sqlite":
        m.db.execute("CREATE TRIGGER fail BEFORE INSERT ON links "
                     "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    else:
        m.db.execute("CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN RAISE EXCEPTION 'disk full'; END $$")
        m.db.execute("CREATE TRIGGER fail BEFORE INSERT ON links "
                     "FOR EACH ROW EXECUTE FUNCTION fail()")
    with pytest.raises(ManifestWriteError, match="disk full"):
        m.captures.commit(run, page, capture(1), [new("http://h.test/b")])
    assert states(m) == {"http://h.test/a": "pending"} and m.counts.captures(run) == 0
    m.db.execute("DROP TRIGGER fail" + ("" if m.sql.dialect == "sqlite" else " ON links"))
    m.urls.add(run, None, [new("http://h.test/b")])
    assert states(m)["http://h.test/b"] == "pending"
    assert m.captures.commit(run, page, capture(1), [new("http://h.test/b")])
    assert links(m) == {("http://h.test/a", "http://h.test/b", "link")}


def test_a_transaction_the_database_rolls_back_to_break_a_deadlock_runs_again(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL only (SQLite has one writer): the capture's transaction waits for a row
    another transaction holds, which then waits for the capture's own row; the database
    rolls the capture back (its deadlock_timeout is the shorter), and it runs again."""
    import threading

    import psycopg

    from mirror.manifest import sharedrun as manifest_fleet

    m = open_manifest(pg_dsn)
    blocker = psycopg.connect(pg_dsn, autocommit=True)
    try:
        old = m.runs.start("t", "d", [new("http://h.test/b")])
        m.captures.commit(old, item(m, old, "http://h.test/b"), capture(1), [])
        m.runs.finish(old, "t", "complete", 0)
        run = m.runs.start("t", "d", [new("http://h.test/a")])
        [page] = m.urls.lease(10, time.time())
        m.db.execute("SET deadlock_timeout = '50ms'")
        blocker.execute("SET deadlock_timeout = '10s'")
        waits: list[float] = []
        monkeypatch.setattr(manifest_fleet, "time", type("T", (), {
            "sleep": staticmethod(waits.append)}))
        blocker.execute("BEGIN")
        blocker.execute("UPDATE urls SET tries=tries WHERE url='http://h.test/b'")
        result: list[object] = []
        worker = threading.Thread(target=lambda: result.append(m.captures.commit(
            run, page, capture(2), [new("http://h.test/b")])))
        worker.start()
        pid = m.db.info.backend_pid
        while blocker.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                              (pid,)).fetchone()[0] != "Lock":  # it waits for b
            time.sleep(0.01)
        blocker.execute("UPDATE urls SET tries=tries WHERE url='http://h.test/a'")
        blocker.execute("COMMIT")
        worker.join(30)
        assert result == [True] and len(waits) == 1
        assert m.counts.url_states(run) == {"done": 1, "pending": 1}  # b: found again in this run
    finally:
        blocker.close()
        m.close()


def test_both_databases_hold_the_same_tables_and_columns(pg_dsn: str, tmp_path: Path) -> None:
    """The PostgreSQL schema is the SQLite one rendered (manifest.schema.postgres): the same
    tables and columns in the same order (and SQLite's implicit rowid made explicit where
    the manifest reads it); only FTS5's index is SQLite's alone."""
    lite, pg = open_manifest(tmp_path / "m.sqlite3"), open_manifest(pg_dsn)
    try:
        # FTS5's indexes (texts, latest_index) and their shadow tables are SQLite's alone
        shadow = re.compile(r"(texts|latest_index)_(config|data|docsize|idx|content)")
        ours = {t: [c[1] for c in lite.db.execute(f"PRAGMA table_info({t})")]
                for (t,) in lite.db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                            "AND sql NOT LIKE '%VIRTUAL%' "
                                            "AND name != 'sqlite_sequence'")
                if not shadow.fullmatch(t)}
        theirs: dict[str, list[str]] = defaultdict(list)
        for table, column in pg.db.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE "
                "table_schema = 'public' ORDER BY table_name, ordinal_position"):
            theirs[table].append(column)
        assert {t: [c for c in cols if c != "rowid"] for t, cols in theirs.items()} == ours
        assert [t for t, cols in theirs.items() if "rowid" in cols] == [
            "errors", "files", "meta", "workers"]
    finally:
        lite.close()
        pg.close()


def test_a_database_url_needs_the_fleet_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without psycopg (the desktop install), a PostgreSQL manifest is refused with what to
    install, before anything is tried; a file path still means SQLite."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg: ImportError
    with pytest.raises(ManifestError, match=r"needs psycopg.*pip install 'mirror\[fleet\]'"):
        open_manifest("postgresql://u:secret@db.example/crawl")


def test_a_database_is_named_without_its_password() -> None:
    from mirror.manifest.db import is_database_url, shown

    assert shown("postgresql://u:secret@db.example:5433/crawl?sslmode=require") \
        == "postgresql://u@db.example:5433/crawl"
    assert is_database_url("postgres://h/d") and not is_database_url("archive/m.sqlite3")
    assert not is_database_url(Path("postgresql://h/d"))


def test_an_unreachable_database_is_a_manifest_error() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ManifestError, match=r"postgresql://u@127.0.0.1:1/x: cannot reach"):
        open_manifest("postgresql://u:pw@127.0.0.1:1/x")
    with pytest.raises(ManifestError, match="cannot reach"):
        open_reader("postgresql://u:pw@127.0.0.1:1/x")


# -- pages loaded in a browser (issue 35) -------------------------------------------------------
def test_a_render_is_committed_with_its_capture_and_read_back(target: Path | str,
                                                              manifest: Manifest) -> None:
    from mirror.manifest.renders import RenderRef, RenderRow

    m = manifest
    run = m.runs.start("t", "d", [new("http://h.test/", via="start"), new("http://h.test/p")])
    m.captures.commit(run, item(m, run, "http://h.test/"), capture(1), [],
                      render=RenderRow("f.warc.gz", 150, 40, "mirror/x; C/1", 9, "t1"))
    m.captures.commit(run, item(m, run, "http://h.test/p"), capture(2), [])
    app, plain = (one(m, "SELECT id FROM captures WHERE url=?", (u,))
                  for u in ("http://h.test/", "http://h.test/p"))
    assert m.renders.of_capture(app) == RenderRef("f.warc.gz", 150, 40)
    assert m.renders.of_capture(plain) is None
    assert m.renders.captures(run) == {app} and m.renders.count(run) == 1
    assert one(m, "SELECT browser FROM renders") == "mirror/x; C/1"
    reader = open_reader(target)
    try:
        assert reader.renders.captures(run) == {app}
        assert reader.renders.captures(run + 1) == set()
    finally:
        reader.close()
    m.captures.forget(run, "id=?", (app,))  # a capture forgotten takes its render along
    assert one(m, "SELECT COUNT(*) FROM renders") == 0
