"""Storage outages ([archive] store): the S3 server (moto, then SeaweedFS) is stopped in the
middle of a run and started again on the same port. Either the run's retries upload what
is pending (exit 0), or the outage outlasts them: the run exits UPLOAD_PENDING (5), says
what is not uploaded and how to finish, keeps every file on disk, and `mirror push`
finishes it. Either way the bucket then holds the local files (their SHA-256 compared),
`mirror verify` passes and a restore into a fresh folder gives the same run. A bucket that
does not exist, or credentials the store refuses, stop a run before its first request."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import write_config
from s3server import MotoOnPort, stoppable_store

from mirror.cli.main import main
from mirror.manifest.reader import ManifestReader
from mirror.model import ExitCode
from mirror.store.objstore import open_store
from mirror.store.sync import restore

SMALL = 3000  # warc_max_bytes: files rotate during the run, so uploads begin in it
PAGES = 12


@pytest.fixture
def moto_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoOnPort]:
    """moto on a port of its own (started), its AWS_* variables set for the test."""
    with stoppable_store("moto", tmp_path, monkeypatch) as moto:
        yield moto


@pytest.fixture(params=["moto", "seaweed"])
def store_outage(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """See s3server.stoppable_store."""
    with stoppable_store(request.param, tmp_path, monkeypatch) as server:
        yield server


def outage_site(site: Any, stop_store: Callable[[], None]) -> None:
    """A site of PAGES pages; the store goes down when page 3 is asked for (files were
    closed, and some uploaded, before it)."""
    site.page("/", "".join(f'<a href="/p{i}">p{i}</a>' for i in range(PAGES)))
    for i in range(PAGES):
        body = f"<p>page {i} " + "words " * 300 + "</p>"
        if i == 3:
            async def down(request: web.Request, body: str = body) -> web.Response:
                stop_store()
                return web.Response(text=body, content_type="text/html")
            site.handler(f"/p{i}", down)
        else:
            site.page(f"/p{i}", body)


def digests(files: dict[str, bytes]) -> dict[str, str]:
    return {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}


def assert_store_equals_folder(server: Any, bucket: str, archive: Path,
                               tmp_path: Path) -> None:
    """The bucket's WARC objects are the folder's files (by SHA-256), the store verifies,
    and a restore into a fresh folder has the same captures."""
    objects = server.objects(bucket)
    local = {f"warc/{p.name}": p.read_bytes() for p in sorted((archive / "warc").iterdir())}
    assert digests({k: v for k, v in objects.items() if k.startswith("warc/")}) == \
        digests(local)
    assert {"index.cdxj", "manifest.sqlite3"} <= set(objects)
    assert main(["verify", f"s3://{bucket}"]) == ExitCode.OK
    fresh = tmp_path / "restored"
    assert restore(fresh, open_store(f"s3://{bucket}")).restored
    assert digests({f"warc/{p.name}": p.read_bytes()
                    for p in sorted((fresh / "warc").iterdir())}) == digests(local)
    assert captures(fresh) == captures(archive)


def captures(archive: Path) -> list[tuple[Any, ...]]:
    """Every capture row of the archive's manifest (the same run has the same rows)."""
    reader = ManifestReader(archive / "manifest.sqlite3")
    try:
        return sorted(tuple(row) for row in list(reader.captures.all()))
    finally:
        reader.close()


def run_codes(archive: Path) -> list[int | None]:
    """Each run's exit code in the archive's manifest."""
    reader = ManifestReader(archive / "manifest.sqlite3")
    try:
        return [run.exit_code for run in reader.runs.all()]
    finally:
        reader.close()


def report_code(archive: Path) -> int:
    """The exit code the last run's report (reports/<run>.json) says."""
    last = sorted((archive / "reports").glob("*.json"))[-1]
    return int(json.loads(last.read_text())["exit_code"])


class Seen(logging.Handler):
    """Sets `event` when a log message holds `text`."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.event = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_the_retries_upload_what_an_outage_left_pending(
        site_in_thread: Any, moto_outage: MotoOnPort, tmp_path: Path) -> None:
    url = moto_outage.server.make_bucket("outage-retried")
    site = site_in_thread()
    outage_site(site, moto_outage.stop)
    toml = write_config(tmp_path, [site.base], archive={
        "warc_max_bytes": SMALL, "store": url, "store_retry": 120})
    seen = Seen("trying the uploads again")
    logging.getLogger("mirror.crawl.uploads").addHandler(seen)

    def come_back() -> None:  # once the run's last push is being tried again
        if seen.event.wait(120):
            moto_outage.start()
    thread = threading.Thread(target=come_back, daemon=True)
    thread.start()
    try:
        code = main(["run", "-q", str(toml)])
    finally:
        logging.getLogger("mirror.crawl.uploads").removeHandler(seen)
        thread.join(130)
    assert seen.event.is_set()  # the store was down at the end: the retries uploaded
    assert code == ExitCode.OK
    assert_store_equals_folder(moto_outage.server, "outage-retried", tmp_path / "archive",
                               tmp_path)


def test_an_outage_longer_than_the_retries_exits_5_and_push_finishes_it(
        site_in_thread: Any, store_outage: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = store_outage.server.make_bucket("outage-pushed")
    site = site_in_thread()
    outage_site(site, store_outage.stop)
    toml = write_config(tmp_path, [site.base], archive={
        "warc_max_bytes": SMALL, "store": url, "store_retry": 1})
    assert main(["run", "-q", str(toml)]) == ExitCode.UPLOAD_PENDING
    err = capsys.readouterr().err
    archive = tmp_path / "archive"
    files = sorted(p.name for p in (archive / "warc").iterdir())
    assert len(files) > 3 and not [n for n in files if n.endswith(".open")]
    assert f"files not uploaded to {url}: cannot reach the store's endpoint " in err
    assert f"`mirror push {toml}` uploads them" in err
    assert ExitCode.UPLOAD_PENDING.meaning == "uploads pending"
    assert run_codes(archive) == [ExitCode.UPLOAD_PENDING]  # not "complete" with exit 0
    assert report_code(archive) == ExitCode.UPLOAD_PENDING
    assert main(["status", str(toml)]) == ExitCode.OK
    assert "exit 5 (uploads pending: `mirror push`)" in capsys.readouterr().out
    assert main(["push", str(toml)]) == ExitCode.UPLOAD_PENDING  # the store still down
    assert run_codes(archive) == [ExitCode.UPLOAD_PENDING]
    capsys.readouterr()
    store_outage.start()
    assert main(["push", str(toml)]) == ExitCode.OK
    assert run_codes(archive) == [ExitCode.OK]  # the push that finished the uploads
    assert report_code(archive) == ExitCode.OK
    assert "not uploaded" not in capsys.readouterr().err
    assert main(["push", str(toml)]) == ExitCode.OK  # idempotent: nothing to do
    assert f"0 WARC files uploaded, {len(files)} already there" in capsys.readouterr().out
    assert sorted(p.name for p in (archive / "warc").iterdir()) == files  # none deleted
    assert_store_equals_folder(store_outage.server, "outage-pushed", archive, tmp_path)


def test_a_missing_bucket_stops_the_run_before_its_first_request(
        site_in_thread: Any, moto_outage: MotoOnPort, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    site = site_in_thread()
    site.page("/", "<p>hello</p>")
    toml = write_config(tmp_path, [site.base], archive={"store": "s3://no-such-bucket/x"})
    assert main(["run", "-q", str(toml)]) == ExitCode.USAGE
    assert site.log == []
    assert "bucket 'no-such-bucket' does not exist" in capsys.readouterr().err
    assert main(["restore", str(toml), "--force"]) == ExitCode.USAGE  # not an empty store
    assert "bucket 'no-such-bucket' does not exist" in capsys.readouterr().err


def test_credentials_the_store_refuses_stop_the_run_before_its_first_request(
        site_in_thread: Any, seaweed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """SeaweedFS checks signatures (moto does not): a wrong secret is refused up front."""
    url = seaweed.make_bucket("refused-credentials")
    for key, value in seaweed.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    site = site_in_thread()
    site.page("/", "<p>hello</p>")
    toml = write_config(tmp_path, [site.base], archive={"store": url})
    assert main(["run", "-q", str(toml)]) == ExitCode.USAGE
    assert site.log == []
    err = capsys.readouterr().err
    assert "bucket 'refused-credentials': the credentials were refused" in err, err
