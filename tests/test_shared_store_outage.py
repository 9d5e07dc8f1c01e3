"""Storage outages in a shared run (`mirror run --db`, real PostgreSQL): the S3 server is
stopped in the middle of a worker's crawl and started again on the same port. Either the
worker's retries upload what is pending (exit 0), or the outage outlasts them: the worker
exits UPLOAD_PENDING (5), says what is not uploaded and how to finish, keeps every file on
disk, and `mirror push SITE --db DSN` finishes it. Either way the run is then whole in the
bucket (every capture once, each object the bytes of the worker's local file). A bucket
that does not exist stops a worker before its first request."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aiohttp import web
from conftest import write_config
from s3server import MotoOnPort, stoppable_store
from test_shared_run import build_site, check_exactly_once, run_worker

from mirror.cli.main import main
from mirror.model import ExitCode

#: the page whose request stops the store (files were closed, some uploaded, before it)
DOWN_AT = "/p3"


@pytest.fixture
def moto_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoOnPort]:
    """moto on a port of its own (started), its AWS_* variables set for the test (and the
    workers it starts)."""
    with stoppable_store("moto", tmp_path, monkeypatch) as moto:
        yield moto


@pytest.fixture(params=["moto", "seaweed"])
def store_outage(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """See s3server.stoppable_store."""
    with stoppable_store(request.param, tmp_path, monkeypatch) as server:
        yield server


def outage_site(site: Any, stop_store: Callable[[], None]) -> None:
    """The shared-run test site; the store stops when DOWN_AT is asked for."""
    build_site(site)
    body = f"<!doctype html><title>p3</title><p>{'words ' * 60}"

    async def down(request: web.Request) -> web.Response:
        stop_store()
        return web.Response(text=body, content_type="text/html")
    site.handler(DOWN_AT, down)


def worker_toml(tmp_path: Path, base: str, store: str, retry: float) -> Path:
    folder = tmp_path / "w1"
    folder.mkdir()
    write_config(folder, [base], scope={"robots": True, "sitemaps": False},
                 crawl={"timeout": 1, "delay": 0, "workers": 4},
                 archive={"store": store, "warc_max_bytes": 6000, "store_retry": retry})
    return folder / "site.toml"


def run_code(dsn: str) -> int:
    """The exit code the shared run's manifest records for its last run."""
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT exit_code FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    assert row is not None
    return int(row[0])


def assert_bucket_is_the_folder(server: Any, bucket: str, folder: Path) -> None:
    """Each WARC object is the bytes of the worker's local file of that name (SHA-256);
    the folder has every file the bucket has (nothing deleted before its upload)."""
    objects = {k[len("warc/"):]: hashlib.sha256(v).hexdigest()
               for k, v in server.objects(bucket, "warc/").items()}
    local = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in (folder / "warc").iterdir()}
    assert objects and objects == local


def test_a_workers_retries_upload_what_an_outage_left_pending(
        site_in_thread: Any, moto_outage: MotoOnPort, pg_dsn: str, tmp_path: Path) -> None:
    url = moto_outage.server.make_bucket("shared-retried")
    site = site_in_thread()
    outage_site(site, moto_outage.stop)
    toml = worker_toml(tmp_path, site.base, url, retry=120)
    log = toml.parent / "archive" / "mirror.log"

    def come_back() -> None:  # once the worker tries its uploads again after its crawl
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and "trying the uploads again (retry" in log.read_text():
                moto_outage.start()
                return
            time.sleep(0.1)
    thread = threading.Thread(target=come_back, daemon=True)
    thread.start()
    done = run_worker(toml, pg_dsn, "w1")
    thread.join(130)
    assert done.returncode == ExitCode.OK, done.stderr
    text = log.read_text()
    assert "not uploaded to s3://shared-retried" in text  # the outage was met
    assert "trying the uploads again (retry" in text
    check_exactly_once(pg_dsn, url)
    assert_bucket_is_the_folder(moto_outage.server, "shared-retried",
                                toml.parent / "archive")


def test_a_worker_whose_outage_outlasts_its_retries_exits_5_and_push_finishes_it(
        site_in_thread: Any, store_outage: Any, pg_dsn: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = store_outage.server.make_bucket("shared-pushed")
    site = site_in_thread()
    outage_site(site, store_outage.stop)
    toml = worker_toml(tmp_path, site.base, url, retry=1)
    done = run_worker(toml, pg_dsn, "w1")
    assert done.returncode == ExitCode.UPLOAD_PENDING, done.stdout + done.stderr
    assert f"files not uploaded to {url}: cannot reach the store's endpoint" in done.stderr
    assert f"`mirror push {toml} --db DSN`" in done.stderr
    warc = toml.parent / "archive" / "warc"
    files = sorted(p.name for p in warc.iterdir())
    assert len(files) > 3 and not [n for n in files if n.endswith(".open")]
    assert run_code(pg_dsn) == ExitCode.UPLOAD_PENDING  # not "complete" with exit 0
    store_outage.start()
    assert main(["push", str(toml)]) == ExitCode.USAGE  # a worker's folder: --db needed
    assert "--db postgresql://" in capsys.readouterr().err
    assert main(["push", str(toml), "--db", pg_dsn]) == ExitCode.OK
    out = capsys.readouterr()
    assert "not uploaded" not in out.out + out.err and ", index" in out.out
    assert run_code(pg_dsn) == ExitCode.OK  # the push that finished the uploads
    assert main(["push", str(toml), "--db", pg_dsn]) == ExitCode.OK  # nothing left to do
    assert "store " + url + ": 0 WARC files uploaded" in capsys.readouterr().out
    assert sorted(p.name for p in warc.iterdir()) == files  # none deleted
    check_exactly_once(pg_dsn, url)
    assert_bucket_is_the_folder(store_outage.server, "shared-pushed", toml.parent / "archive")
    assert "index.cdxj" in store_outage.server.objects("shared-pushed")


def test_a_missing_bucket_stops_a_worker_before_its_first_request(
        site_in_thread: Any, moto_outage: MotoOnPort, pg_dsn: str, tmp_path: Path) -> None:
    site = site_in_thread()
    build_site(site)
    toml = worker_toml(tmp_path, site.base, "s3://no-such-bucket/x", retry=1)
    done = run_worker(toml, pg_dsn, "w1")
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "bucket 'no-such-bucket' does not exist" in done.stderr
    assert site.log == []
