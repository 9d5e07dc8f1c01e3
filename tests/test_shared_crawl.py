"""One crawl shared by several `mirror run SITE --db DSN` workers (README "Scaling out",
DISTRIBUTED.md §5.2): hosts leased with a fencing epoch by database time, each worker
writing WARC files of its own and uploading the closed ones to the store.

Real PostgreSQL (tests/pgserver.py), moto's S3, a 2,000-page site on 8 loopback hosts in
a process of its own (tests/multihost.py), and 4 worker processes, SIGKILLed at random
moments (one at a time, and once all four at once) and started again with --join. What
is asserted comes from the artefacts: the workers' lease log lines (no two leases of one
host slot at once), the WARC objects in the bucket read with warcio (every page exactly
once; nothing that the manifest did not commit), the manifest in PostgreSQL, `mirror
verify`, `warcio check`, and the site's own request log, stamped by the kernel (per host:
no two requests at once, none closer than [crawl] delay).

The kill schedule is drawn from a seeded RNG; the seed is in every failure message, and
MIRROR_TEST_SEED=N runs that schedule again (the moments depend on timing too).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kernelstamp import KernelStampHost
from multihost import (
    MultiHost,
    SharedWorker,
    lease_overlaps,
    politeness,
    query,
    read_leases,
    read_store,
    site_file,
)

pytestmark = pytest.mark.slow

PAGES = 2000
WORKERS = 4
DELAY = 0.05
TTL = 6  # --lease-ttl: more than [crawl] timeout (3) + 2
#: below DELAY between two arrivals at one host, as the kernel stamped them
#: (tests/kernelstamp.py; test_fleet_politeness.py says why 1 ms)
JITTER = 0.001
#: every worker has exited within this many seconds of the start
DEADLINE = 240.0
NAME = "multi"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MultiHost]:
    site = KernelStampHost(tmp_path / "site", PAGES)
    try:
        yield site
    finally:
        site.stop()


def _seed() -> int:
    return int(os.environ.get("MIRROR_TEST_SEED") or random.SystemRandom().randrange(1 << 30))


def _workers(tmp_path: Path, server: MultiHost, dsn: str, store: str, count: int,
             **crawl: Any) -> list[SharedWorker]:
    return [SharedWorker(f"w{n}", site_file(tmp_path / f"w{n}" / "site.toml",
                                            server.start_url, server.hosts, store,
                                            name=NAME, delay=DELAY, **crawl),
                         dsn, "--lease-ttl", str(TTL))
            for n in range(1, count + 1)]


def _scalar(dsn: str, sql: str, params: Any = None) -> Any:
    try:
        rows = query(dsn, sql, params)
    except Exception:  # noqa: BLE001 - the tables are not made yet
        return None
    return next(iter(rows[0].values())) if rows else None


def _unfinished(dsn: str) -> bool:
    state = _scalar(dsn, "SELECT state FROM runs ORDER BY id DESC LIMIT 1")
    return state is None or state == "running"


def _until(predicate: Callable[[], Any], timeout: float, what: str,
           workers: list[SharedWorker], note: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    said = "\n".join(f"--- {w.id}\n{w.output()}" for w in workers)
    raise AssertionError(f"{note}: timed out after {timeout:.0f} s waiting for {what}\n{said}")


def _all_exited(workers: list[SharedWorker], note: str, timeout: float) -> None:
    _until(lambda: not any(w.running() for w in workers), timeout,
           "every worker to exit", workers, note)
    bad = {w.id: w.exits for w in workers if any(code != 0 for code in w.exits)}
    assert not bad, f"{note}: exit codes other than 0 (a kill is not counted): {bad}\n" + \
        "\n".join(f"--- {w.id}\n{w.output()}" for w in workers if w.id in bad)


def _check_artefacts(tmp_path: Path, server: MultiHost, log: dict[str, list[dict[str, Any]]],
                     workers: list[SharedWorker], dsn: str, store: str, note: str
                     ) -> dict[str, Any]:
    """(a)-(e) of the module's docstring; returns what the report prints."""
    urls = server.urls()
    robots = {f"http://{h}:{server.port}/robots.txt" for h in server.hosts}
    # (a) host leases: for each slot, the [taken, end) intervals never overlap
    leases = read_leases([w.mirror_log for w in workers])
    assert leases, f"{note}: no `mirror.crawl.sharedfrontier` lines in the workers' mirror.log"
    sites = {site for site, _ in leases}
    assert sites >= {f"{h}:{server.port}" for h in server.hosts}, (note, sorted(sites))
    overlaps = lease_overlaps(leases, {w.id: w.started_ms for w in workers})
    assert not overlaps, f"{note}: leases of one slot overlap:\n" + "\n".join(overlaps[:20])
    # (b) every page exactly once in the bucket's WARC objects
    records = read_store(store, tmp_path / "bucket")
    stored = Counter(r.uri for r in records if r.type in ("response", "revisit"))
    twice = {u: n for u, n in stored.items() if n > 1 and u not in robots}
    missing = [u for u in urls if u not in stored]
    strangers = set(stored) - set(urls) - robots
    assert not twice and not missing and not strangers, (
        f"{note}: {len(twice)} URLs stored more than once {sorted(twice.items())[:10]}, "
        f"{len(missing)} never {missing[:10]}, {len(strangers)} not of the site "
        f"{sorted(strangers)[:10]}")
    # robots.txt: each worker that leases a host reads its rules (fetched again, up to once
    # per worker and host), but it is stored once per host, by the first
    robots_stored = {u: stored[u] for u in sorted(robots)}
    assert all(n == 1 for n in robots_stored.values()), (note, robots_stored)
    # (c) nothing in the bucket that the manifest did not commit; every capture uploaded
    captures = query(dsn, 'SELECT filename, "offset", req_offset, url, record_type '
                          "FROM captures")
    committed = {(c["filename"], c["offset"]) for c in captures}
    requests = {(c["filename"], c["req_offset"]) for c in captures}
    in_bucket = {(r.key.rsplit("/", 1)[-1], r.offset) for r in records
                 if r.type in ("response", "revisit")}
    asked = {(r.key.rsplit("/", 1)[-1], r.offset) for r in records if r.type == "request"}
    assert in_bucket <= committed, (
        f"{note}: records in the bucket without a capture: {sorted(in_bucket - committed)[:10]}")
    assert asked <= requests, (
        f"{note}: request records without a capture: {sorted(asked - requests)[:10]}")
    assert committed <= in_bucket, (
        f"{note}: captures not in the bucket: {sorted(committed - in_bucket)[:10]}")
    others = Counter(r.type for r in records
                     if r.type not in ("response", "revisit", "request", "warcinfo"))
    assert not others, (note, others)
    files = {f["name"]: f["state"] for f in query(dsn, "SELECT name, state FROM files")}
    not_up = {c["filename"]: files.get(c["filename"]) for c in captures
              if files.get(c["filename"]) != "uploaded"}
    assert not not_up, f"{note}: captures in files not uploaded: {not_up}"
    # (d) mirror verify on the shared run; warcio check on the bucket's copies
    verify = subprocess.run([sys.executable, "-m", "mirror", "verify", str(workers[0].site),
                             "--db", dsn], capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, f"{note}: mirror verify: {verify.stdout}{verify.stderr}"
    warcs = sorted(str(p) for p in (tmp_path / "bucket").iterdir())
    warcio = Path(sys.executable).with_name("warcio")
    check = subprocess.run([str(warcio), "check", *warcs], capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, f"{note}: warcio check: {check.stdout}{check.stderr}"
    # (e) the site's own log: per host, one request at a time, DELAY apart
    polite = politeness(log)
    assert sum(p["requests"] for p in polite.values()) >= len(urls)
    rude = {h: p for h, p in polite.items()
            if p["min_gap"] < DELAY - JITTER or p["max_overlap"] > 0}
    assert not rude, (f"{note}: requests to one host closer than [crawl] delay = {DELAY} s "
                      f"(less {JITTER} s) or at once: {rude}")
    asked_for = Counter((h, r["path"]) for h, reqs in log.items() for r in reqs)
    return {
        "leases": len(leases),
        "renewals": sum(x.renewals for x in leases.values()),
        "unreleased": sum(x.released is None for x in leases.values()),
        "objects": len(warcs), "records": len(records),
        "robots": robots_stored,
        "requests": sum(p["requests"] for p in polite.values()),
        "fetched_again": {"robots.txt": sum(n - 1 for (_, path), n in asked_for.items()
                                            if path == "/robots.txt"),
                          "pages": sum(n - 1 for (_, path), n in asked_for.items()
                                       if path != "/robots.txt")},
        "min_gap_ms": round(1000 * min(p["min_gap"] for p in polite.values()), 2),
    }


def test_four_workers_share_one_crawl_through_kills(tmp_path: Path, pg_dsn: str, s3: Any,
                                                    server: MultiHost) -> None:
    seed = _seed()
    rng = random.Random(seed)
    note = f"seed {seed} (MIRROR_TEST_SEED={seed} draws this kill schedule again)"
    store = f"{s3.url}/{NAME}"
    # 4 workers x 2 host slots each = the 8 hosts: every worker holds hosts when killed
    workers = _workers(tmp_path, server, pg_dsn, store, WORKERS, workers=2)
    singles = rng.randint(4, 6)
    plan = ["one"] * singles
    plan.insert(rng.randint(1, singles - 1), "all")
    done: list[str] = []
    began = time.monotonic()
    try:
        for w in workers:
            w.start()
        _until(lambda: (_scalar(pg_dsn, "SELECT count(*) FROM captures") or 0) >= 20, 60,
               "the crawl to begin", workers, note)
        for event in plan:
            time.sleep(rng.uniform(0.5, 2.0))
            if not _unfinished(pg_dsn):
                break
            if event == "all":
                victims = [w for w in workers if w.kill()]
            else:
                alive = [w for w in workers if w.running()]
                victims = [rng.choice(alive)] if alive else []
                for w in victims:
                    w.kill()
            if not victims:
                break
            done.append(event + ":" + ",".join(w.id for w in victims))
            time.sleep(rng.uniform(0.2, 1.0))
            for w in victims:
                w.start(join=True)
        _all_exited(workers, note, DEADLINE - (time.monotonic() - began))
    finally:
        for w in workers:
            w.stop()
        log = server.stop()
    wall = time.monotonic() - began
    note += f"; kills: {done}"
    assert any(e.startswith("all:") for e in done) and len(done) >= 4, (
        f"{note}: the crawl ended before the kills it should survive")
    assert not _unfinished(pg_dsn), f"{note}: the run is not finished"
    report = _check_artefacts(tmp_path, server, log, workers, pg_dsn, store, note)
    print(f"\n{note}\nwall {wall:.1f} s; {report}")


def test_a_worker_killed_for_good_has_its_hosts_taken_over(tmp_path: Path, pg_dsn: str,
                                                            s3: Any) -> None:
    """One of three workers killed while it holds hosts and never started again: after
    the lease ttl the others take its hosts over and finish the crawl. What it had
    committed is in its own folder only (a file never closed, never uploaded): the run is
    complete in the manifest but those captures are not in the store until a worker
    is started with `--forget-worker` (its files lost, their URLs fetched again); then
    every page is in the store exactly once."""
    site = KernelStampHost(tmp_path / "site", 800)
    store = f"{s3.url}/{NAME}"
    workers = _workers(tmp_path, site, pg_dsn, store, 3, workers=3)
    note = "one worker killed for good"
    began = time.monotonic()
    try:
        for w in workers:
            w.start()
        _until(lambda: (_scalar(pg_dsn, "SELECT count(*) FROM captures") or 0) >= 50, 60,
               "the crawl to be under way", workers, note)

        def holder() -> tuple[SharedWorker, list[str]] | None:
            for row in query(pg_dsn, "SELECT lease_owner, array_agg(site) AS sites FROM "
                                     "hosts WHERE lease_owner IS NOT NULL GROUP BY 1 "
                                     "ORDER BY count(*) DESC"):
                victim = next((w for w in workers if w.id == row["lease_owner"]), None)
                if victim is not None and victim.running():
                    return victim, list(row["sites"])
            return None

        victim, held = _until(holder, 30, "a worker that holds hosts", workers, note)
        victim.kill()
        killed_at = victim.kills[-1] / 1000  # time.time(), as the kernel's stamps
        rest = [w for w in workers if w is not victim]
        _all_exited(rest, note, DEADLINE - (time.monotonic() - began))
        note += f" ({victim.id}, holding {held})"
        assert not _unfinished(pg_dsn), f"{note}: the run is not finished"
        # the victim's committed captures are in its own folder only
        files = query(pg_dsn, "SELECT name, state FROM files WHERE worker = %s", (victim.id,))
        kept = query(pg_dsn, "SELECT count(*) AS n FROM captures c JOIN files f ON "
                             "f.name = c.filename WHERE f.state != 'uploaded'")[0]["n"]
        forget = subprocess.run(
            [sys.executable, "-m", "mirror", "run", str(rest[0].site), "--db", pg_dsn,
             "--worker-id", rest[0].id, "--lease-ttl", str(TTL), "--join",
             "--forget-worker", victim.id], capture_output=True, text=True, timeout=120)
        assert forget.returncode == 0, f"{note}: --forget-worker: {forget.stdout}{forget.stderr}"
    finally:
        for w in workers:
            w.stop()
        log = site.stop()
    takeover = {}
    for site_key in held:
        host = site_key.rsplit(":", 1)[0]
        after = [r["arrived"] for r in log[host] if r["arrived"] > killed_at]
        assert after, f"{note}: no request to {host} after the kill"
        takeover[host] = round(after[0] - killed_at, 2)
    # when a host is taken over depends on when a survivor has a slot free for it (each
    # holds up to 3 of the 8 hosts until it releases one after SLICE URLs), not on the ttl
    # only: a time bound here failed under load (10-12 s against TTL + 5, load 20), so the
    # times are printed, and `after` above asserts that each host was taken over
    lost = query(pg_dsn, "SELECT name, state FROM files WHERE worker = %s", (victim.id,))
    assert all(f["state"] == "lost" for f in lost), (note, lost)
    report = _check_artefacts(tmp_path, site, log, workers, pg_dsn, store, note)
    print(f"\n{note}: takeover after the kill (s) {takeover}; the victim's files "
          f"{[(f['name'], f['state']) for f in files]} held {kept} committed captures "
          f"not in the store until --forget-worker; {report}")


def test_four_workers_stop_at_the_runs_max_pages_through_a_kill(
        tmp_path: Path, pg_dsn: str, s3: Any) -> None:
    """[scope] max_pages is the run's budget, spent by all its workers together: four
    workers on eight hosts take exactly that many pages, although one is killed while it
    holds leased pages (they come back into the budget when its leases are taken over);
    every worker stops by itself with exit 4, and the run ends in state limit with only
    pages pending, each URL captured once."""
    budget = 150
    site = MultiHost(tmp_path / "site", 800)
    store = f"{s3.url}/{NAME}"
    workers = _workers(tmp_path, site, pg_dsn, store, WORKERS, workers=2, max_pages=budget)
    note = f"max_pages = {budget}, one worker killed"
    began = time.monotonic()
    try:
        for w in workers:
            w.start()

        def holder() -> SharedWorker | None:
            for row in query(pg_dsn, "SELECT lease_owner FROM urls WHERE state = 'leased' "
                                     "AND mode = 'page' AND lease_owner IS NOT NULL"):
                victim = next((w for w in workers if w.id == row["lease_owner"]), None)
                if victim is not None and victim.running():
                    return victim
            return None

        _until(lambda: (_scalar(pg_dsn, "SELECT count(*) FROM captures") or 0) >= 30, 60,
               "the crawl to be under way", workers, note)
        victim = _until(holder, 30, "a worker that holds leased pages", workers, note)
        victim.kill()
        time.sleep(0.5)
        victim.start(join=True)
        _until(lambda: not any(w.running() for w in workers),
               DEADLINE - (time.monotonic() - began), "every worker to exit", workers, note)
    finally:
        for w in workers:
            w.stop()
        site.stop()
    said = "\n".join(f"--- {w.id}\n{w.output()}" for w in workers)
    assert all(w.exits and set(w.exits) == {4} for w in workers), (
        f"{note}: exit codes {[(w.id, w.exits) for w in workers]}\n{said}")
    pages = {r["state"]: r["n"] for r in query(
        pg_dsn, "SELECT state, count(*) AS n FROM urls WHERE mode = 'page' GROUP BY state")}
    assert pages.get("done", 0) + pages.get("failed", 0) == budget, (note, pages)
    assert "leased" not in pages and pages["pending"] > 0, (note, pages)
    assert query(pg_dsn, "SELECT state, exit_code FROM runs") == [
        {"state": "limit", "exit_code": 4}], note
    twice = query(pg_dsn, "SELECT url, count(*) AS n FROM captures GROUP BY url "
                          "HAVING count(*) > 1")
    assert not twice, (note, twice)
    print(f"\n{note} ({victim.id}): pages {pages}; "
          f"wall {time.monotonic() - began:.1f} s")
