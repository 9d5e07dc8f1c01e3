"""The fleet for many sites (issue 16): `mirror schedule --db` registers sites in a real
PostgreSQL, `mirror worker` processes run them through Procrastinate with one lock per
site, their archives in a real S3 server (moto) on loopback."""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import TestSite
from fleetproc import WorkerProcess, jobs, mirror, query, runs, site_file, until

from mirror.schedule.spec import parse_schedule

pytestmark = pytest.mark.slow


def chain(site: TestSite, pages: int, latency: float = 0.0) -> TestSite:
    """index -> p0..pN-1, each page linking to the next: a crawl of pages + 1 URLs."""
    links = "".join(f'<a href="/p{i}.html">page {i}</a> ' for i in range(pages))
    site.page("/", f"<html><head><title>Home</title></head><body>{links}</body></html>")
    for i in range(pages):
        site.page(f"/p{i}.html", f"<html><head><title>Page {i}</title></head><body>"
                  f'<p>text {i} {"x" * 200}</p><a href="/p{(i + 1) % pages}.html">next</a>'
                  "</body></html>")
    site.latency = latency
    return site


def test_a_worker_runs_a_site_queued_now(tmp_path: Path, pg_dsn: str, s3: Any,
                                         site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), 5)
    library = tmp_path / "library"
    path = site_file(library, "alpha", site.base, s3.url + "/alpha", workers=2)
    applied = mirror("schedule", "apply", str(library), "--db", pg_dsn)
    assert applied.returncode == 0, applied.stderr
    assert "alpha: in the fleet, daily 03:15" in applied.stdout
    queued = mirror("schedule", "run-now", str(path), "--db", pg_dsn)
    assert queued.returncode == 0 and "alpha: queued a run (job" in queued.stdout, queued
    worker = WorkerProcess.start(pg_dsn, tmp_path / "w1")
    try:
        done = until(lambda: [r for r in runs(pg_dsn, "alpha") if r["finished_at"]], 60,
                     "the run to finish", workers=(worker,))
    finally:
        assert worker.stop() == 0, worker.output()
    assert [(r["state"], r["exit_code"]) for r in done] == [("complete", 0)], done
    bucket = s3.url.removeprefix("s3://")
    objects = s3.objects(bucket, "alpha/")
    assert "alpha/manifest.sqlite3" in objects and "alpha/index.cdxj" in objects
    assert sorted(site.log) == sorted(["/"] + [f"/p{i}.html" for i in range(5)])
    listed = mirror("schedule", "list", str(library), "--db", pg_dsn)
    assert "complete (exit 0) on" in listed.stdout, listed.stdout
    assert query(pg_dsn, "SELECT count(*) AS n FROM mirror_fleet_workers")[0]["n"] == 0


def test_next_due_is_read_on_the_registering_zone() -> None:
    from mirror.fleet.duetime import next_due

    daily = parse_schedule("daily 03:15")
    after = dt.datetime(2026, 3, 28, 12, 0, tzinfo=dt.UTC)
    # Paris is UTC+1 on the 28th; the clocks go forward on the night of the 29th
    assert next_due(daily, "Europe/Paris", after) == dt.datetime(2026, 3, 29, 1, 15,
                                                                  tzinfo=dt.UTC)
    assert next_due(daily, "UTC", after) == dt.datetime(2026, 3, 29, 3, 15, tzinfo=dt.UTC)
    later = next_due(daily, "Europe/Paris", dt.datetime(2026, 3, 29, 1, 15, tzinfo=dt.UTC))
    assert later == dt.datetime(2026, 3, 30, 1, 15, tzinfo=dt.UTC)  # UTC+2 now


def test_next_due_moves_on_across_a_dst_change() -> None:
    """Around New York's fall-back night every due time is strictly later than the
    instant it is computed from, and a repeated wall time runs once."""
    from mirror.fleet.duetime import next_due

    for every in ("hourly", "58 * * * *", "*/15 * * * *", "daily 01:30"):
        schedule = parse_schedule(every)
        at = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)
        seen = []
        while at < dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC):
            due = next_due(schedule, "America/New_York", at)
            assert due > at, (every, at, due)
            seen.append(due)
            at = due
        walls = [d.astimezone(ZoneInfo("America/New_York")).strftime("%d %H:%M") for d in seen]
        assert len(walls) == len(set(walls)), (every, walls)


def test_local_zone_is_an_iana_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirror.fleet.registry import local_zone

    assert local_zone({"TZ": "Europe/Paris"}) == "Europe/Paris"
    assert local_zone({"TZ": ":Asia/Tokyo"}) == "Asia/Tokyo"
    assert ZoneInfo(local_zone({"TZ": "Not/AZone"}))  # falls back to the machine's, or UTC


def _apply(library: Path, dsn: str) -> None:
    done = mirror("schedule", "apply", str(library), "--db", dsn)
    assert done.returncode == 0, done.stdout + done.stderr


def _run_now(path: Path, dsn: str) -> Any:
    return mirror("schedule", "run-now", str(path), "--db", dsn)


def test_one_run_of_a_site_at_a_time_and_at_most_one_waiting(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), 12, latency=0.3)
    library = tmp_path / "library"
    path = site_file(library, "gamma", site.base, s3.url + "/gamma", workers=1, per_host=1)
    _apply(library, pg_dsn)
    # room for four runs at once on two workers: only the site's lock keeps it to one
    workers = (WorkerProcess.start(pg_dsn, tmp_path / "w1", "--concurrency", "2"),
               WorkerProcess.start(pg_dsn, tmp_path / "w2", "--concurrency", "2"))
    try:
        assert _run_now(path, pg_dsn).returncode == 0
        until(lambda: jobs(pg_dsn, "doing"), 30, "the first run to start", workers=workers)
        second = _run_now(path, pg_dsn)
        assert second.returncode == 0 and "queued a run" in second.stdout, second
        third = _run_now(path, pg_dsn)
        assert third.returncode == 75, third
        assert "gamma: a run is already waiting (job" in third.stdout
        for _ in range(10):  # while the first runs, the second waits on every worker
            states = sorted(j["status"] for j in jobs(pg_dsn) if j["status"] != "succeeded")
            if states != ["doing", "todo"]:
                break
            time.sleep(0.3)
        assert states in (["doing", "todo"], ["doing"]), states
        until(lambda: len([r for r in runs(pg_dsn, "gamma") if r["finished_at"]]) == 2, 90,
              "both runs to finish", workers=workers)
    finally:
        for w in workers:
            w.stop()
    first, then = runs(pg_dsn, "gamma")
    assert (first["state"], then["state"]) == ("complete", "complete"), (first, then)
    assert first["finished_at"] <= then["started_at"]  # never two runs of the site at once
    assert jobs(pg_dsn) == []  # succeeded jobs are deleted; mirror_fleet_runs keeps them


def test_a_run_stops_when_its_job_is_no_longer_its_workers(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    """The fence: a worker cut off from the fleet (its job handed over) kills its run
    before the run can upload anything more."""
    site = chain(site_in_thread(), 30, latency=0.3)
    library = tmp_path / "library"
    path = site_file(library, "delta", site.base, s3.url + "/delta", workers=1, per_host=1)
    _apply(library, pg_dsn)
    worker = WorkerProcess.start(pg_dsn, tmp_path / "w1")
    try:
        assert _run_now(path, pg_dsn).returncode == 0
        run = until(lambda: next((r for r in runs(pg_dsn, "delta")
                                  if r["state"] == "running"), None), 30, "the run",
                    workers=(worker,))
        # what the tick does to a silent worker's job (it is failed, another is queued)
        query(pg_dsn, "UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %s",
              (run["job_id"],))
        lost = until(lambda: next((r for r in runs(pg_dsn, "delta") if r["state"] == "lost"),
                                  None), 10, "the run to be stopped", workers=(worker,))
        assert "is no longer this worker's" in lost["message"]
        assert worker.proc.poll() is None  # the worker goes on
    finally:
        assert worker.stop() == 0, worker.output()
    assert len(site.log) < 31


def test_a_stopping_worker_hands_its_run_back(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), 30, latency=0.2)
    library = tmp_path / "library"
    path = site_file(library, "eps", site.base, s3.url + "/eps", workers=1, per_host=1,
                     archive={"warc_max_bytes": 3000})
    _apply(library, pg_dsn)
    first = WorkerProcess.start(pg_dsn, tmp_path / "w1")
    try:
        assert _run_now(path, pg_dsn).returncode == 0
        until(lambda: any((r["progress"] or {}).get("done", 0) >= 8
                          for r in runs(pg_dsn, "eps")), 30, "the run", workers=(first,))
    finally:
        assert first.stop() == 0, first.output()  # SIGTERM: the run stops as on Ctrl-C
    stopped, = runs(pg_dsn, "eps")
    assert (stopped["state"], stopped["exit_code"], stopped["message"]) == (
        "interrupted", 130, "the worker stopped")
    waiting, = jobs(pg_dsn, "todo")
    assert waiting["args"]["attempt"] == 2 and "the worker stopped" in waiting["args"]["reason"]
    second = WorkerProcess.start(pg_dsn, tmp_path / "w2")
    try:
        until(lambda: runs(pg_dsn, "eps")[-1]["state"] == "complete", 60, "the resumed run",
              workers=(second,))
    finally:
        second.stop()
    assert runs(pg_dsn, "eps")[-1]["restored"]["checkpoint"] is True
    # stopped gracefully, the run pushed what it had: the next one fetches nothing twice
    assert stopped["checkpoint"]["complete"] is True
    assert {p: n for p, n in Counter(site.log).items() if n > 1} == {}


def test_the_tick_queues_a_due_run_once_whatever_the_number_of_workers(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), 3)
    library = tmp_path / "library"
    later = (dt.datetime.now() + dt.timedelta(hours=12)).strftime("%H:%M")
    site_file(library, "zeta", site.base, s3.url + "/zeta", every=f"daily {later}")
    _apply(library, pg_dsn)
    # due a minute ago (the fleet was down at the time): one run, then the next due time
    query(pg_dsn, "UPDATE mirror_fleet_sites SET next_due = now() - interval '1 minute'")
    workers = tuple(WorkerProcess.start(pg_dsn, tmp_path / f"w{i}") for i in range(3))
    try:
        until(lambda: [r for r in runs(pg_dsn, "zeta") if r["state"] == "complete"], 60,
              "the scheduled run", workers=workers)
        time.sleep(3)  # three more ticks on each worker
    finally:
        for w in workers:
            w.stop()
    done = runs(pg_dsn, "zeta")
    assert len(done) == 1 and done[0]["reason"].startswith("schedule ("), done
    due = query(pg_dsn, "SELECT next_due FROM mirror_fleet_sites")[0]["next_due"]
    assert due.astimezone().strftime("%H:%M") == later and due > dt.datetime.now(dt.UTC)


def test_a_run_that_prunes_leaves_the_pruned_archive_in_its_store(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    """[retention]: a scheduled run prunes after its last push, and pushes the pruned
    archive (cli._retention): the next worker restores it, not the one before."""
    from mirror.manifest.reader import ManifestReader
    from mirror.store.objstore import open_store
    from mirror.store.sync import restore

    site = chain(site_in_thread(), 4)
    library = tmp_path / "library"
    path = site_file(library, "eta", site.base, s3.url + "/eta")
    path.write_text(path.read_text() + "\n[retention]\nkeep_last = 1\n")
    _apply(library, pg_dsn)
    worker = WorkerProcess.start(pg_dsn, tmp_path / "w1")
    try:
        for n in (1, 2):
            assert _run_now(path, pg_dsn).returncode == 0
            until(lambda n=n: len([r for r in runs(pg_dsn, "eta")
                                   if r["state"] == "complete"]) == n, 60, f"run {n}",
                  workers=(worker,))
    finally:
        worker.stop()
    assert runs(pg_dsn, "eta")[-1]["checkpoint"]["complete"] is True
    restore(tmp_path / "check", open_store(s3.url + "/eta"))
    manifest = ManifestReader(tmp_path / "check" / "manifest.sqlite3")
    try:
        assert [r.id for r in manifest.runs.all()] == [2]
    finally:
        manifest.close()
