"""A COMMIT whose answer is lost with the connection (issue 37): the transaction may have
committed or not, and the client cannot tell from the wire. PostgresDb looks it up on a new
connection by its transaction id (pg_xact_status). A TCP proxy (tests/commitproxy.py)
between the client and a real PostgreSQL cuts the connection at each of the two points
that matter: after forwarding the COMMIT and before its answer (it committed: done, not
run again), and before forwarding it (it did not: ManifestReconnected, run it again). Then a
shared run whose worker loses the answers of several COMMITs: every URL stored once."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from commitproxy import CommitCutter, CommitProxy
from multihost import MultiHost, SharedWorker, query, read_store, site_file

from mirror.manifest.db import ManifestReconnected, PostgresDb


def _proxy(dsn: str, cutter: CommitCutter) -> tuple[CommitProxy, str]:
    parts = urlsplit(dsn)
    assert parts.port is not None
    proxy = CommitProxy(parts.port, cutter)
    return proxy, proxy.dsn(parts.path.lstrip("/"))


def _insert(db: PostgresDb, settled: list[bool]) -> None:
    with db.transaction(settled.append):
        db.execute("INSERT INTO t (x) VALUES (?)", (1,))


@pytest.mark.parametrize("where", ["answer", "request"])
def test_a_commit_cut_is_looked_up_by_its_transaction_id(
        pg_dsn: str, where: str, caplog: pytest.LogCaptureFixture) -> None:
    query(pg_dsn, "CREATE TABLE t (x integer)")
    proxy, dsn = _proxy(pg_dsn, CommitCutter(where=where))
    db = PostgresDb(dsn)
    settled: list[bool] = []
    try:
        with caplog.at_level(logging.WARNING, logger="mirror.manifest.db"):
            if where == "answer":  # it committed: done, once
                _insert(db, settled)
            else:  # it never reached the server: run it again
                with pytest.raises(ManifestReconnected, match="lost at COMMIT"):
                    _insert(db, settled)
                _insert(db, settled)
    finally:
        db.close()
        proxy.close()
    assert proxy.cutter.cut == 1
    assert query(pg_dsn, "SELECT count(*) AS n FROM t")[0]["n"] == 1
    assert settled == ([True] if where == "answer" else [False, True])
    committed = [r for r in caplog.records if "the answer to a COMMIT was lost" in r.message]
    assert len(committed) == (1 if where == "answer" else 0), caplog.text
    assert "reconnected after" in caplog.text


NAME = "lost"
PAGES = 240


@pytest.mark.slow
def test_a_shared_run_whose_commit_answers_are_lost_stores_every_url_once(
        tmp_path: Path, pg_dsn: str, s3: Any) -> None:
    cutter = CommitCutter(every=2, times=4)
    proxy, dsn = _proxy(pg_dsn, cutter)
    site = MultiHost(tmp_path / "site", PAGES)
    store = f"{s3.url}/{NAME}"
    worker = SharedWorker("w1", site_file(tmp_path / "w1" / "site.toml", site.start_url,
                                          site.hosts, store, name=NAME, delay=0.02),
                          dsn, "--lease-ttl", "6")
    try:
        worker.start()
        worker.proc.wait(240)
        worker.running()
    finally:
        worker.stop()
        site.stop()
        proxy.close()
    said = worker.output(tail=50000) + worker.mirror_log.read_text(errors="replace")
    assert worker.exits == [0], said[-5000:]
    assert cutter.cut == cutter.times, cutter
    # every cut COMMIT was the manifest's, and each was found committed (not run again)
    logged = worker.mirror_log.read_text(errors="replace")
    assert logged.count("the answer to a COMMIT was lost") == cutter.cut, said[-5000:]
    runs = query(pg_dsn, "SELECT state FROM runs")
    assert [r["state"] for r in runs] == ["complete"], runs
    stored = Counter(r.uri for r in read_store(store, tmp_path / "bucket")
                     if r.type in ("response", "revisit"))
    urls = site.urls()
    assert sorted(u for u in stored if u in set(urls)) == sorted(urls)
    assert {u: n for u, n in stored.items() if n > 1} == {}
    print(f"\nCOMMITs seen {cutter.seen}, answers cut and looked up {cutter.cut}")


def test_a_fetched_job_whose_answer_was_lost_is_run_not_left_behind(
        pg_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    """The fleet's connector (mirror/fleet/connector.py): Procrastinate's fetch_job took a
    job (it is "doing" under this worker) and the answer was lost with the connection. The
    fetch runs again on a new connection and returns that job, not the next one: no job
    stays "doing" under a live worker that never saw it."""
    import asyncio

    from mirror.fleet.db import connect
    from mirror.fleet.queue import new_app

    connect(pg_dsn).close()  # the schema
    # Procrastinate's pool connections are not in autocommit: the fetch's transaction ends
    # with a COMMIT of its own, whose answer is cut
    cutter = CommitCutter(after=b"procrastinate_fetch_job_v2")
    proxy, dsn = _proxy(pg_dsn, cutter)

    async def scenario() -> tuple[Any, Any, Any]:
        app = new_app(dsn)
        async with app.open_async():
            first = await app.configure_task("t", queueing_lock="a").defer_async()
            second = await app.configure_task("t", queueing_lock="b").defer_async()
            worker = await app.job_manager.register_worker()
            got = await app.job_manager.fetch_job(queues=None, worker_id=worker)
            then = await app.job_manager.fetch_job(queues=None, worker_id=worker)
            last = await app.job_manager.fetch_job(queues=None, worker_id=worker)
        return (first, second), (got, then), last

    try:
        with caplog.at_level(logging.WARNING, logger="mirror.fleet.connector"):
            (first, second), (got, then), last = asyncio.run(scenario())
    finally:
        proxy.close()
    assert cutter.cut == 1
    assert (got.id, then.id, last) == (first, second, None), caplog.text
    assert f"job {first} was taken by this worker by a fetch whose answer was lost" \
        in caplog.text
    assert "reconnected after" in caplog.text
    doing = query(pg_dsn, "SELECT id FROM procrastinate_jobs WHERE status = 'doing' "
                          "ORDER BY id")
    assert [r["id"] for r in doing] == [first, second]


def test_a_job_end_whose_answer_was_lost_is_not_an_error(
        pg_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    """Procrastinate's finish_job committed (the job is "succeeded") and the answer was
    lost: run again, it is refused (the job is no longer "doing"), which after a loss says
    it was done; the worker goes on rather than failing the job's task."""
    import asyncio

    from procrastinate.jobs import Status

    from mirror.fleet.db import connect
    from mirror.fleet.queue import new_app

    connect(pg_dsn).close()
    cutter = CommitCutter(after=b"procrastinate_finish_job_v1")
    proxy, dsn = _proxy(pg_dsn, cutter)

    async def scenario() -> int:
        app = new_app(dsn)
        async with app.open_async():
            job_id = await app.configure_task("t", queueing_lock="a").defer_async()
            worker = await app.job_manager.register_worker()
            job = await app.job_manager.fetch_job(queues=None, worker_id=worker)
            assert job is not None and job.id == job_id
            await app.job_manager.finish_job(job, status=Status.SUCCEEDED, delete_job=False)
        return job_id

    try:
        with caplog.at_level(logging.WARNING, logger="mirror.fleet.connector"):
            job_id = asyncio.run(scenario())
    finally:
        proxy.close()
    assert cutter.cut == 1
    assert f"job {job_id}: its status was written before the connection was lost" \
        in caplog.text, caplog.text
    rows = query(pg_dsn, "SELECT status::text AS s FROM procrastinate_jobs WHERE id = %s",
                 (job_id,))
    assert rows == [{"s": "succeeded"}]
