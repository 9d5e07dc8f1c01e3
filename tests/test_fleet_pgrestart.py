"""The fleet through PostgreSQL restarts (issue 37): the test's own server (tests/pgserver.py,
synchronous_commit on, so that an immediate stop keeps what it answered) is restarted
twice, once as `pg_ctl restart -m fast` does (SIGINT) and once as `-m immediate` does
(SIGQUIT: no shutdown checkpoint, crash recovery at the start), while several workers
crawl. What is asserted comes from the artefacts: every URL stored exactly once in the
bucket's WARC objects, `mirror verify` ok, the run not marked failed, every worker exiting
0, and each worker's log naming the loss and the reconnection (README "Scaling out").

The time from each restart to the first commit after it is printed (a timing: not
asserted; with the load average beside it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from multihost import MultiHost, SharedWorker, query, read_store, site_file

pytestmark = pytest.mark.slow

NAME = "multi"
PAGES = 900
DELAY = 0.05
TTL = 6  # --lease-ttl: more than [crawl] timeout (3) + 2
DEADLINE = 240.0


@pytest.fixture
def pg() -> Iterator[Any]:
    """A server of this test's own (it is restarted): synchronous_commit on."""
    import pgserver

    reason = pgserver.why_not()
    if reason:
        pytest.skip(reason)
    with pgserver.pg_server(durable_commit=True) as server:
        yield server


def _count(dsn: str) -> int:
    try:
        return int(query(dsn, "SELECT count(*) AS n FROM captures")[0]["n"])
    except Exception:  # noqa: BLE001 - not made yet, or the server is restarting
        return -1


def _until(predicate: Callable[[], Any], timeout: float, what: str,
           workers: list[SharedWorker]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.01)
    said = "\n".join(f"--- {w.id}\n{w.output()}" for w in workers)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{said}")


def restart_and_time(pg: Any, dsn: str, mode: str, workers: list[SharedWorker]
                     ) -> dict[str, float]:
    """Restart the server in `mode`; seconds to accepting again and to the first commit
    of a capture after the restart began."""
    before = _count(dsn)
    began = time.monotonic()
    up = pg.postmaster.restart(mode)
    _until(lambda: _count(dsn) > before, 120, f"a commit after the {mode} restart", workers)
    return {"up_s": round(up, 2), "first_commit_s": round(time.monotonic() - began, 2),
            "load": round(os.getloadavg()[0], 1)}


def test_a_shared_run_goes_on_through_two_database_restarts(
        tmp_path: Path, pg: Any, s3: Any) -> None:
    import pgserver

    dsn = pgserver.create_database(pg, "shared")
    site = MultiHost(tmp_path / "site", PAGES)
    store = f"{s3.url}/{NAME}"
    workers = [SharedWorker(f"w{n}", site_file(tmp_path / f"w{n}" / "site.toml",
                                                site.start_url, site.hosts, store,
                                                name=NAME, delay=DELAY, workers=3),
                            dsn, "--lease-ttl", str(TTL)) for n in (1, 2, 3)]
    timings = {}
    try:
        for w in workers:
            w.start()
        _until(lambda: _count(dsn) >= 60, 90, "the crawl to be under way", workers)
        timings["fast"] = restart_and_time(pg, dsn, "fast", workers)
        _until(lambda: _count(dsn) >= 200, 90, "more captures", workers)
        timings["immediate"] = restart_and_time(pg, dsn, "immediate", workers)
        _until(lambda: not any(w.running() for w in workers), DEADLINE,
               "every worker to exit", workers)
    finally:
        for w in workers:
            w.stop()
        site.stop()
    said = {w.id: w.output(tail=20000) + w.mirror_log.read_text(errors="replace")
            for w in workers}
    assert all(w.exits == [0] for w in workers), {w.id: (w.exits, w.output()) for w in workers}
    runs = query(dsn, "SELECT state FROM runs")
    assert [r["state"] for r in runs] == ["complete"], runs
    stored = Counter(r.uri for r in read_store(store, tmp_path / "bucket")
                     if r.type in ("response", "revisit"))
    urls = site.urls()
    assert sorted(u for u in stored if u in set(urls)) == sorted(urls)
    twice = {u: n for u, n in stored.items() if n > 1}
    assert not twice, twice
    verify = subprocess.run([sys.executable, "-m", "mirror", "verify", str(workers[0].site),
                             "--db", dsn], capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # every worker met both restarts and says so
    for wid, text in said.items():
        assert text.count("database connection lost:") >= 2, (wid, text[-3000:])
        assert "reconnected after" in text, (wid, text[-3000:])
    revalidated = sum(text.count("leases re-validated") for text in said.values())
    print(f"\nrestart -> first commit: {timings}; lease re-validations logged: {revalidated}")


# --- the many-sites fleet (`mirror worker`, Procrastinate) through the same two restarts ---

SITES = ("s1", "s2", "s3", "s4", "s5")
SITE_PAGES = 25
#: --stall-after for this test: a restart (seconds here, under load) is shorter than the
#: fence (half of it: a run whose worker cannot reach the database for that long is
#: stopped, before the fleet may hand it over)
STALL_AFTER = "20"


def _fleet_progress(dsn: str) -> int:
    """Pages the fleet's runs have done (their last progress), -1 while unreadable."""
    try:
        rows = query(dsn, "SELECT coalesce(sum((progress->>'done')::int), 0) AS n, "
                          "count(*) FILTER (WHERE state = 'complete') AS c "
                          "FROM mirror_fleet_runs")
    except Exception:  # noqa: BLE001 - the server is restarting
        return -1
    return int(rows[0]["n"]) + 1000 * int(rows[0]["c"])


def test_a_many_sites_fleet_goes_on_through_two_database_restarts(
        tmp_path: Path, pg: Any, s3: Any, site_in_thread: Callable[[], Any]) -> None:
    import pgserver
    from fleetproc import WorkerProcess, mirror, runs, site_file, until
    from test_fleet import chain
    from test_fleet_takeover import _records, _restored_archive_verifies

    dsn = pgserver.create_database(pg, "fleet")
    library = tmp_path / "library"
    sites = {}
    for name in SITES:
        sites[name] = chain(site_in_thread(), SITE_PAGES, latency=0.1)
        site_file(library, name, sites[name].base, f"{s3.url}/{name}", workers=1,
                  per_host=1, archive={"warc_max_bytes": 4000})
    assert mirror("schedule", "apply", str(library), "--db", dsn).returncode == 0
    workers = tuple(WorkerProcess.start(dsn, tmp_path / f"w{n}", "--concurrency", "2",
                                        "--stall-after", STALL_AFTER, name=f"w{n}")
                    for n in (1, 2))
    timings = {}
    try:
        until(lambda: query(dsn, "SELECT count(*) AS n FROM mirror_fleet_workers")[0]["n"]
              == 2, 60, "both workers to start", workers=workers)
        queued = mirror("schedule", "run-now", str(library), "--db", dsn)
        assert queued.returncode == 0, queued.stdout + queued.stderr
        for mode, at in (("fast", 10), ("immediate", 40)):
            until(lambda at=at: _fleet_progress(dsn) >= at, 120, f"{at} pages done",
                  workers=workers)
            began = time.monotonic()
            up = pg.postmaster.restart(mode)
            timings[mode] = {"up_s": round(up, 2), "load": round(os.getloadavg()[0], 1),
                             "first_write_s": None}
            before = _fleet_progress(dsn)
            until(lambda before=before: _fleet_progress(dsn) > before, 60,
                  f"a run's progress after the {mode} restart", workers=workers)
            timings[mode]["first_write_s"] = round(time.monotonic() - began, 2)
        until(lambda: len([r for r in runs(dsn) if r["finished_at"]]) >= len(SITES), 300,
              "every site's run to finish", workers=workers)
    finally:
        codes = [w.stop() for w in workers]
    said = {w.log.name: w.output() for w in workers}
    assert codes == [0, 0], said
    done = runs(dsn)
    assert sorted((r["site"], r["state"], r["exit_code"]) for r in done) == \
        [(name, "complete", 0) for name in SITES], done
    failed = query(dsn, "SELECT id, status::text AS status FROM procrastinate_jobs "
                        "WHERE status IN ('failed', 'doing', 'todo') "
                        "AND task_name = 'mirror.fleet.run_site'")
    assert failed == [], failed
    bucket = s3.url.removeprefix("s3://")
    for name, site in sites.items():
        records = _records(s3.objects(bucket, f"{name}/"))
        captures = Counter(uri for _, kind, uri, _ in records if kind in ("response", "revisit"))
        expected = {site.base} | {f"{site.base}p{i}.html" for i in range(SITE_PAGES)}
        assert set(captures) == expected, name
        assert {u: n for u, n in captures.items() if n != 1} == {}, name
        _restored_archive_verifies(tmp_path / "check" / name, f"{s3.url}/{name}")
    for name, text in said.items():
        assert text.count("database connection lost") >= 2, (name, text[-4000:])
        assert "reconnected after" in text, (name, text[-4000:])
    print(f"\nmany sites, restart -> first progress written: {timings}")


# --- the give-up: the database gone for longer than MIRROR_DB_GIVE_UP ---

GIVE_UP = 3  # seconds


def test_a_worker_gives_up_on_a_database_gone_for_good_and_loses_nothing(
        tmp_path: Path, pg: Any, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server stopped mid-run and not started again: the worker stops after
    MIRROR_DB_GIVE_UP seconds with ManifestWriteError's exit code and words. The server
    started again, the same worker with --join finishes the run: every URL once."""
    import pgserver

    from mirror.manifest.db import ManifestWriteError

    monkeypatch.setenv("MIRROR_DB_GIVE_UP", str(GIVE_UP))
    dsn = pgserver.create_database(pg, "giveup")
    site = MultiHost(tmp_path / "site", 300)
    store = f"{s3.url}/{NAME}"
    worker = SharedWorker("w1", site_file(tmp_path / "w1" / "site.toml", site.start_url,
                                          site.hosts, store, name=NAME, delay=DELAY),
                          dsn, "--lease-ttl", str(TTL))
    try:
        worker.start()
        _until(lambda: _count(dsn) >= 40, 90, "the crawl to be under way", [worker])
        pg.postmaster.stop("fast")
        _until(lambda: not worker.running(), 120, "the worker to give up", [worker])
        said = worker.output(tail=20000)
        pg.postmaster.start()
        worker.start(join=True)
        _until(lambda: not worker.running(), DEADLINE, "the joined worker to finish", [worker])
    finally:
        worker.stop()
        site.stop()
    assert worker.exits == [int(ManifestWriteError.exit_code), 0], (worker.exits, said)
    assert f"and not back after {GIVE_UP} s" in said and "gave up" in said, said
    assert "Traceback" not in said, said
    runs = query(dsn, "SELECT state FROM runs")
    assert [r["state"] for r in runs] == ["complete"], runs
    stored = Counter(r.uri for r in read_store(store, tmp_path / "bucket")
                     if r.type in ("response", "revisit"))
    assert sorted(u for u in stored if u in set(site.urls())) == sorted(site.urls())
    assert {u: n for u, n in stored.items() if n > 1} == {}


def test_a_fleet_worker_outlasts_a_long_outage_and_gives_up_on_a_lost_database(
        tmp_path: Path, pg: Any, s3: Any, site_in_thread: Callable[[], Any]) -> None:
    """The server down longer than the fence (half of --stall-after) but shorter than
    MIRROR_DB_GIVE_UP: the worker's run is stopped (it could not be fenced), the worker
    stays, and the run is queued again and resumed from its checkpoint once the server is
    back: every URL once. Then the server stopped for good: the worker stops after
    MIRROR_DB_GIVE_UP seconds, with ManifestWriteError's exit code and words."""
    import pgserver
    from fleetproc import WorkerProcess, mirror, runs, site_file, until
    from test_fleet import chain
    from test_fleet_takeover import _records

    from mirror.fleet.connector import FleetDatabaseLost

    dsn = pgserver.create_database(pg, "outage")
    site = chain(site_in_thread(), SITE_PAGES, latency=0.2)
    library = tmp_path / "library"
    site_file(library, "long", site.base, f"{s3.url}/long", workers=1, per_host=1,
              archive={"warc_max_bytes": 4000})
    assert mirror("schedule", "apply", str(library), "--db", dsn).returncode == 0
    worker = WorkerProcess.start(dsn, tmp_path / "w1", "--stall-after", "4", name="w1",
                                 env={"MIRROR_DB_GIVE_UP": "20"})
    try:
        until(lambda: query(dsn, "SELECT count(*) AS n FROM mirror_fleet_workers")[0]["n"]
              == 1, 60, "the worker to start", workers=(worker,))
        assert mirror("schedule", "run-now", str(library), "--db", dsn).returncode == 0
        until(lambda: _fleet_progress(dsn) >= 5, 120, "the run to be under way",
              workers=(worker,))
        pg.postmaster.stop("fast")
        time.sleep(6)  # longer than the fence (2 s), shorter than the give-up (20 s)
        assert worker.proc.poll() is None, worker.output()
        pg.postmaster.start()
        until(lambda: [r for r in runs(dsn) if r["state"] == "complete"], 180,
              "the run to be resumed and finished", workers=(worker,))
        pg.postmaster.stop("fast")
        worker.proc.wait(120)
    finally:
        worker.stop()
        if pg.postmaster.proc.poll() is not None:
            pg.postmaster.start()
    said = worker.output()
    assert worker.proc.returncode == int(FleetDatabaseLost.exit_code), said[-4000:]
    assert "the fleet database: connection lost" in said and "not back after 20 s" in said \
        and "gave up" in said, said[-4000:]
    attempts = runs(dsn)
    assert [(r["state"], r["attempt"]) for r in attempts] == [("lost", 1), ("complete", 2)], \
        attempts
    assert "did not answer" in attempts[0]["message"], attempts
    assert "reconnected after" in said, said[-4000:]
    records = _records(s3.objects(s3.url.removeprefix("s3://"), "long/"))
    captures = Counter(uri for _, kind, uri, _ in records if kind in ("response", "revisit"))
    assert set(captures) == {site.base} | {f"{site.base}p{i}.html" for i in range(SITE_PAGES)}
    assert {u: n for u, n in captures.items() if n != 1} == {}
