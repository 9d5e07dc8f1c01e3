"""`mirror verify --db`: a run shared by several workers, its manifest in PostgreSQL (a real
server: tests/pgserver.py) and its files in the site's store (moto on loopback).

Each test builds a shared run as workers make one: a run joined through the manifest, host
leases, real WARC records from each worker's own WarcWriter, fenced commits, files opened,
closed, uploaded with ObjectStore.upload and marked uploaded, the index of the manifest's
captures put last. Then one defect, and the check that names it (exit 65); the good run
verifies (exit 0).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config

from mirror.archive.index import capture_line, write_index
from mirror.archive.warcwriter import IDENTICAL, CaptureLocation, WarcWriter, sha1_digest
from mirror.cli.main import build_parser, main
from mirror.manifest.db import ManifestError
from mirror.manifest.writer import Manifest
from mirror.model import CaptureRow, Exchange, ExitCode, HostLease, NewUrl, Revisit, UrlItem
from mirror.store.objstore import INDEX_KEY, WARC_PREFIX, ObjectStore, file_digest
from mirror.verify import format_problems
from mirror.verify.shared import verify_db

HOSTS = {"a.test": ["/", "/one", "/two"], "b.test": ["/", "/copy"]}
#: the body of b.test/copy: a.test/'s, so it is stored as a revisit of a capture in the
#: other worker's file
SAME = b"<p>the same page</p>"


def body_of(url: str) -> bytes:
    return SAME if url in ("http://a.test/", "http://b.test/copy") else url.encode() * 20


def exchange(url: str, body: bytes) -> Exchange:
    return Exchange(url, "GET", "/" + url.split("/", 3)[3], (("Host", "x"),), "1.1", 200,
                    "OK", (("Content-Type", "text/html"),), io.BytesIO(body), len(body),
                    payload_digest=sha1_digest(hashlib.sha1(body)))


def row(loc: CaptureLocation, body: bytes, original: int | None = None) -> CaptureRow:
    return CaptureRow(loc.warc_date, loc.record_id, loc.response.filename, loc.response.offset,
                      loc.response.length, loc.request.offset, loc.request.length, 200,
                      "text/html", loc.payload_digest, len(body), None, None, None, None,
                      "response" if original is None else "revisit", original)


@dataclass
class Worker:
    """One worker: its id, its own folder and WARC writer, the files it opened."""

    owner: str
    writer: WarcWriter
    files: list[str] = field(default_factory=list)


class SharedRun:
    """A run shared by workers, built through the manifest's verbs as workers drive them."""

    def __init__(self, dsn: str, store: ObjectStore, folder: Path) -> None:
        self.m = Manifest(dsn)
        self.store, self.folder = store, folder
        self.workers: list[Worker] = []
        seeds = [NewUrl(f"http://{host}{path}", host, 0, 5, "page", "start", "link")
                 for host, paths in HOSTS.items() for path in paths]
        joined = self.m.sharedrun.join_or_start_run("2026-01-02T03:04:05Z", "cfg", seeds)
        assert joined is not None
        self.run = joined.run_id

    def worker(self, owner: str) -> Worker:
        self.m.sharedrun.register_worker(owner, self.run)
        self.m.sharedrun.recover(owner)
        warc = self.folder / owner / "warc"
        self.workers.append(Worker(owner, WarcWriter(warc, f"test-{owner}", 10**9,
                                                     {"software": "test"})))
        return self.workers[-1]

    def lease(self, w: Worker) -> HostLease:
        leases = self.m.sharedrun.lease_hosts(w.owner, 1, 60)
        assert len(leases) == 1
        return leases[0]

    def crawl_host(self, w: Worker) -> None:
        """Lease a host, fetch each of its URLs into the worker's file, release it."""
        lease = self.lease(w)
        for item in self.m.sharedrun.lease_urls(lease, 10):
            assert self.capture(w, item, lease)
        assert self.m.sharedrun.release_host(lease, 0) is not None

    def capture(self, w: Worker, item: UrlItem, lease: HostLease | None) -> bool:
        """Append the URL's records to the worker's file, then commit (fenced by `lease`)."""
        body = body_of(item.url)
        original = self.m.captures.original_by_digest(sha1_digest(hashlib.sha1(body)), 200)
        revisit = None if original is None else Revisit(
            IDENTICAL, original.record_id, original.url, original.warc_date,
            original.payload_digest)
        loc = w.writer.write_capture(exchange(item.url, body), revisit)
        name = loc.response.filename
        if name not in w.files:
            assert self.m.filemarks.open_file(name, w.owner)
            w.files.append(name)
        cap = row(loc, body, None if original is None else original.id)
        return self.m.captures.commit(self.run, item, cap, [], lease=lease)

    def close_files(self, w: Worker, *, put: bool = True, mark: bool = True) -> None:
        """Close the worker's file, upload it (`put`), mark it uploaded (`mark`)."""
        w.writer.close()
        for name in w.files:
            path = w.writer.warc_dir / name
            assert self.m.filemarks.close_file(name, path.stat().st_size,
                                               file_digest(path, "sha256"))
            if put:
                self.store.upload(path, WARC_PREFIX + name)
            if mark:
                assert self.m.filemarks.mark_uploaded(name)

    def complete(self) -> None:
        """The run ends; its index, made from the manifest's captures, goes up last."""
        self.m.runs.finish(self.run, "2026-01-02T04:00:00Z", "complete", 0)
        index = self.folder / "index.cdxj"
        write_index(index, (capture_line(r) for r in self.m.captures.all()))
        self.store.put_file(index, INDEX_KEY)


@pytest.fixture
def shared(pg_dsn: str, s3: Any, tmp_path: Path) -> Iterator[tuple[SharedRun, Path]]:
    """Two workers crawled a host each and uploaded their files; the run is not finished
    yet. With the site file that names the store."""
    url = s3.url + "/sites/test"
    site = write_config(tmp_path, ["http://a.test/"], archive={"store": url})
    run = SharedRun(pg_dsn, ObjectStore(url), tmp_path)
    try:
        for owner in ("w1", "w2"):  # w1 takes a.test (its ids come first), w2 b.test
            w = run.worker(owner)
            run.crawl_host(w)
            run.close_files(w)
        yield run, site
    finally:
        for w in run.workers:
            w.writer.close()
        run.m.close()


def verify(run: SharedRun, dsn: str | None = None) -> tuple[int, str]:
    """The exit code and what `mirror verify SITE --db DSN` prints."""
    result = verify_db(dsn or str(run.m.path), run.store.url)
    problems = [format_problems(result.verdict.problems)] if result.verdict.problems else []
    return result.exit_code, "\n".join([*problems, result.summary()]) + "\n"


def checks(out: str) -> dict[str, list[str]]:
    """check name -> the lines of format_problems that name it (`where: check: detail`;
    a where may hold ': ' itself, a check is one lower-case token)."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines()[:-1]:
        if m := re.search(r": ([a-z][a-z0-9-]*): ", line):
            found.setdefault(m[1], []).append(line)
    return found


def test_a_good_shared_run_verifies(shared: tuple[SharedRun, Path],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = shared
    run.complete()
    streamed: list[str] = []
    open_stream = ObjectStore.open_stream

    def counted(store: ObjectStore, key: str) -> Any:
        streamed.append(key)
        return open_stream(store, key)

    monkeypatch.setattr(ObjectStore, "open_stream", counted)
    revisits = run.m.sql.execute("SELECT COUNT(*) FROM captures WHERE record_type='revisit'")
    assert revisits.fetchone()[0] == 1  # a revisit across the two workers' files
    dsn = str(run.m.path).replace("postgres@", "postgres:pw-s3cret@")  # trust ignores it
    code, out = verify(run, dsn)
    assert code == ExitCode.OK, out
    assert "pw-s3cret" not in out
    assert out.splitlines() == [
        f"{run.m.sql.name} (shared run 1, complete, 2 workers; files in {run.store.url}): "
        "verified 2 files, 12 records: OK"]
    # each file is read whole twice, as `verify s3://...` reads it (its records, then its
    # index lines); its SHA-256 is taken on the way, not by a third read
    assert sorted(k for k in streamed if k.startswith(WARC_PREFIX)) == sorted(
        WARC_PREFIX + f.name for f in run.m.sharedrun.files() for _ in range(2))


def test_a_capture_in_a_file_not_marked_uploaded(shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.m.urls.add(run.run, None, [NewUrl("http://c.test/", "c.test", 0, 5, "page", "start",
                                          "link")])
    w3 = run.worker("w3")
    run.crawl_host(w3)
    run.close_files(w3, mark=False)  # in the store, and then the worker died
    run.complete()
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    found = checks(out)
    name = w3.files[0]
    assert found["file-not-uploaded"] == [
        f"warc/{name}: file-not-uploaded: 1 capture of the manifest points into this file, "
        "which worker w3 closed but never marked uploaded"]
    assert found["stray-object"] == [
        f"warc/{name}: stray-object: in the store, but the manifest has it closed (worker w3): "
        "uploaded, and never marked uploaded"]


def test_a_capture_in_a_file_never_uploaded(shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.m.urls.add(run.run, None, [NewUrl("http://c.test/", "c.test", 0, 5, "page", "start",
                                          "link")])
    w3 = run.worker("w3")
    run.crawl_host(w3)  # its file still open
    run.complete()
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    found = checks(out)
    assert found["file-not-uploaded"] == [
        f"warc/{w3.files[0]}: file-not-uploaded: 1 capture of the manifest points into this "
        "file, which worker w3 still has open: it is not in the store"]
    assert "manifest-missing-file" in found  # check_archive's view of the same capture


def test_an_object_of_a_lost_file_is_stray(shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.m.urls.add(run.run, None, [NewUrl("http://c.test/", "c.test", 0, 5, "page", "start",
                                          "link")])
    w3 = run.worker("w3")
    run.crawl_host(w3)
    run.close_files(w3, mark=False)  # uploaded; then declared lost before it was marked
    assert run.m.filemarks.mark_lost("w3") == w3.files
    w4 = run.worker("w4")
    run.crawl_host(w4)  # c.test/ fetched again, as a lost file's URLs are
    run.close_files(w4)
    run.complete()
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    found = checks(out)
    assert found["stray-object"] == [
        f"warc/{w3.files[0]}: stray-object: in the store, but declared lost with worker w3: "
        "its captures were forgotten and fetched again, so a reader of the store finds them "
        "twice"]
    assert "file-not-uploaded" not in found and "captured-twice" not in found


def test_a_flipped_byte_in_an_uploaded_object(shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.complete()
    key = WARC_PREFIX + run.m.sharedrun.files("w1")[0].name
    data = bytearray(run.store.get_bytes(key))
    data[len(data) // 2] ^= 0x01
    run.store.put_bytes(key, bytes(data))  # the same size: only the digest tells
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    found = checks(out)
    digest = hashlib.sha256(data).hexdigest()
    assert found["object-sha256"] == [
        f"{key}: object-sha256: the store's bytes have SHA-256 {digest}; worker w1 closed it "
        f"with {run.m.sharedrun.files('w1')[0].sha256}"]
    assert "object-size" not in found


def test_a_url_captured_twice_in_one_run(shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    w3 = run.worker("w3")
    twice = UrlItem(*run.m.sql.execute(
        "SELECT id, url, site, depth, redirects_left, mode, tries, via FROM urls "
        "WHERE url='http://a.test/two'").fetchone())
    assert run.capture(w3, twice, None)  # unfenced: what a broken lease would let through
    run.close_files(w3)
    run.complete()
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    first, second = [cid for (cid,) in run.m.sql.execute(
        "SELECT id FROM captures WHERE url='http://a.test/two' ORDER BY id")]
    assert checks(out) == {"captured-twice": [
        f"manifest: http://a.test/two: captured-twice: 2 captures in run 1: capture {first} "
        f"in warc/{run.m.sharedrun.files('w1')[0].name} (worker w1), capture {second} in "
        f"warc/{w3.files[0]} (worker w3)"]}


def test_a_complete_run_with_a_url_pending(
        shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.m.urls.add(run.run, None, [NewUrl("http://a.test/late", "a.test", 1, 5, "page", "link",
                                          "link")])
    run.complete()  # ... as a worker that miscounted would
    code, out = verify(run)
    assert code == ExitCode.DAMAGED
    assert checks(out) == {
        "complete-run-pending": ["manifest: http://a.test/late: complete-run-pending: "
                                 "pending in run 1, which is complete"]}


def test_a_running_run_is_not_held_to_what_a_complete_one_is(
        shared: tuple[SharedRun, Path]) -> None:
    run, _ = shared
    run.m.urls.add(run.run, None, [NewUrl("http://a.test/late", "a.test", 1, 5, "page", "link",
                                          "link")])
    code, out = verify(run)
    assert code == ExitCode.DAMAGED  # no index yet: its workers have not finished
    assert set(checks(out)) == {"index-missing"}
    assert "(shared run 1, running, 2 workers;" in out.splitlines()[-1]


def _cli_has_db() -> bool:
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(["verify", "site.toml", "--db", "postgresql://x/y"])
        except SystemExit:
            return False
    return True


wired = pytest.mark.skipif(not _cli_has_db(), reason="cli.py has no `verify --db` yet")


@wired
def test_the_command_line(shared: tuple[SharedRun, Path],
                          capsys: pytest.CaptureFixture[str]) -> None:
    run, site = shared
    run.complete()
    assert main(["verify", str(site), "--db", str(run.m.path)]) == ExitCode.OK
    assert capsys.readouterr().out.endswith("verified 2 files, 12 records: OK\n")
    run.store.delete(WARC_PREFIX + run.m.sharedrun.files("w2")[0].name)
    assert main(["verify", str(site), "--db", str(run.m.path)]) == ExitCode.DAMAGED
    assert ": object-missing: " in capsys.readouterr().out


@wired
def test_without_a_store_the_site_file_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = write_config(tmp_path, ["http://a.test/"])
    code = main(["verify", str(site), "--db", "postgresql://u:pw-s3cret@127.0.0.1:1/none"])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "[archive] store" in err and "pw-s3cret" not in err


def test_db_takes_a_database_address_not_a_manifest_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"postgresql://"):
        verify_db(str(tmp_path / "manifest.sqlite3"), "s3://bucket/prefix")
