"""A worker that dies mid-run (SIGKILL, as a machine that fails): its run is handed to the
other worker, which resumes it from the last checkpoint in the store. Real PostgreSQL, a
real S3 server (moto) and two `mirror worker` processes on loopback; the archive is read
back from the bucket with warcio: every URL in exactly one uploaded WARC file, no record
twice, and the archive restored from the store passes `mirror verify`."""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TestSite
from fleetproc import WorkerProcess, mirror, query, runs, site_file, until
from test_fleet import chain
from warcio.archiveiterator import ArchiveIterator

pytestmark = pytest.mark.slow

PAGES = 40


def _gone(pid: int) -> bool:
    """No such process, or a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return True


def _records(objects: dict[str, bytes]) -> list[tuple[str, str, str, str]]:
    """(file, record type, target URI, record id) of every record of every WARC object."""
    out = []
    for key, data in sorted(objects.items()):
        if "/warc/" not in key:
            continue
        for rec in ArchiveIterator(io.BytesIO(data)):
            out.append((key, rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI") or "",
                        rec.rec_headers.get_header("WARC-Record-ID")))
    return out


def test_a_killed_workers_run_is_finished_by_another_from_its_checkpoint(
        tmp_path: Path, pg_dsn: str, s3: Any,
        site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), PAGES, latency=0.15)
    library = tmp_path / "library"
    path = site_file(library, "beta", site.base, s3.url + "/beta", workers=1, per_host=1,
                     archive={"warc_max_bytes": 4000})
    assert mirror("schedule", "apply", str(library), "--db", pg_dsn).returncode == 0
    workers = (WorkerProcess.start(pg_dsn, tmp_path / "w1", name="one"),
               WorkerProcess.start(pg_dsn, tmp_path / "w2", name="two"))
    bucket = s3.url.removeprefix("s3://")
    try:
        until(lambda: query(pg_dsn, "SELECT count(*) AS n FROM mirror_fleet_workers")[0]["n"]
              == 2, 30, "both workers to start", workers=workers)
        assert mirror("schedule", "run-now", str(path), "--db", pg_dsn).returncode == 0
        # mid-run: some files closed and uploaded with a snapshot, many pages still to go
        first = until(lambda: next((r for r in runs(pg_dsn, "beta") if r["state"] == "running"
                                    and (r["progress"] or {}).get("done", 0) >= 15
                                    and len([k for k in s3.objects(bucket, "beta/warc/")]) >= 2),
                                   None), 60, "the run to be well under way", workers=workers)
        pid = query(pg_dsn, "SELECT pid FROM mirror_fleet_workers WHERE worker_id = %s",
                    (first["worker_id"],))[0]["pid"]
        victim = next(w for w in workers if w.pid == pid)
        other = next(w for w in workers if w is not victim)
        victim.kill()
        # the kernel takes the run down with its worker: nothing more is uploaded from it
        until(lambda: _gone(first["pid"]), 10, "the killed worker's run to die")
        done = until(lambda: [r for r in runs(pg_dsn, "beta") if r["state"] == "complete"],
                     90, "the other worker to finish the run", workers=workers)
    finally:
        for w in workers:
            w.stop()
    attempts = runs(pg_dsn, "beta")
    assert [(r["state"], r["attempt"]) for r in attempts] == [("lost", 1), ("complete", 2)], \
        attempts
    assert "sent no heartbeat" in attempts[0]["message"]
    assert done[0]["worker_id"] != first["worker_id"] and done[0]["exit_code"] == 0
    assert attempts[1]["restored"]["checkpoint"] is True
    assert attempts[1]["restored"]["captures"] > 0  # it resumed, it did not start again
    assert other.proc.poll() is None or other.proc.returncode == 0
    # the loss is bounded by what the checkpoint missed: no URL it holds is fetched again
    fetched = Counter(site.log)
    again = sum(n - 1 for n in fetched.values())
    assert again <= PAGES + 1 - attempts[1]["restored"]["captures"], fetched

    objects = s3.objects(bucket, "beta/")
    records = _records(objects)
    expected = {site.base} | {f"{site.base}p{i}.html" for i in range(PAGES)}
    captures = Counter(uri for _, kind, uri, _ in records if kind in ("response", "revisit"))
    assert set(captures) == expected
    assert {uri: n for uri, n in captures.items() if n != 1} == {}  # each URL once, in all
    requests = Counter(uri for _, kind, uri, _ in records if kind == "request")
    assert requests == Counter(expected)
    ids = Counter(rid for *_, rid in records)
    assert {rid: n for rid, n in ids.items() if n != 1} == {}  # no record twice anywhere
    # what the dead worker uploaded after its last checkpoint is not left in the bucket
    _restored_archive_verifies(tmp_path / "check", s3.url + "/beta")


def _restored_archive_verifies(folder: Path, store_url: str) -> None:
    from mirror.manifest.reader import ManifestReader
    from mirror.store.objstore import open_store
    from mirror.store.sync import restore
    from mirror.verify import check_archive

    result = restore(folder, open_store(store_url))
    assert result.restored and not result.rolled_back and result.aside is None
    manifest = ManifestReader(folder / "manifest.sqlite3")
    try:
        verdict = check_archive(folder, manifest)
        assert manifest.runs.last() is not None and manifest.runs.last().state == "complete"
    finally:
        manifest.close()
    assert verdict.problems == (), verdict.problems
    assert sorted(os.listdir(folder / "warc")) == sorted(result.downloaded)
