"""[archive] store: a run uploads its closed WARC files, the index and a manifest snapshot to
S3 (moto on loopback); a dead store never stops a run (it exits 5, uploads pending) and
`mirror push` catches up;
`serve`, `export` and `verify` read the store with ranged reads and agree with the local
folder; `restore` rebuilds a folder a next run continues; prune's changes reach the store."""

from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest
from conftest import Crawl, RunClock, crawl_to_end, write_config
from s3server import free_port

from mirror.archive.lock import ArchiveLock
from mirror.cli.main import main
from mirror.config import ConfigError, load_config
from mirror.manifest.reader import ManifestReader
from mirror.model import ExitCode
from mirror.outputdir import is_archive, output_dir_problem
from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.serve import Site, make_app
from mirror.replay.wacz import write_wacz
from mirror.store.files import StoreFiles
from mirror.store.objstore import ObjectStore, open_store
from mirror.store.sync import push, restore
from mirror.verify import check_archive

ROOT = Path(__file__).resolve().parent.parent
SMALL = 3000  # warc_max_bytes: a few captures per file, so files rotate during the run


def bucket_of(s3: Any) -> str:
    return str(s3.url[len("s3://"):])


def stored(s3: Any, prefix: str = "") -> dict[str, bytes]:
    """The bucket's objects below `prefix`, by key relative to it."""
    objects = s3.objects(bucket_of(s3), prefix)
    return {k[len(prefix):]: v for k, v in objects.items()}


def local_files(archive: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((archive / "warc").iterdir())}


def snapshot_of(s3: Any, tmp_path: Path, prefix: str = "") -> ManifestReader:
    path = tmp_path / f"snapshot-{len(list(tmp_path.glob('snapshot-*')))}.sqlite3"
    path.write_bytes(stored(s3, prefix)["manifest.sqlite3"])
    return ManifestReader(path)


async def crawl_offline_site(make_site: Any, crawl: Any, store: str, latency: float = 0.0,
                             **archive: Any) -> Any:
    site, other = await make_site(), await make_site()
    site_def.build(site, other)
    site.latency = latency  # seconds each answer takes
    done = await crawl([site.base], crawl={"workers": 4},
                       scope={"exclude": [re.escape(other.base)]},
                       archive={"warc_max_bytes": SMALL, "store": store, **archive})
    return site, done


async def test_a_run_uploads_closed_files_then_the_index_and_a_snapshot(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    # slow answers: the run lasts long enough for the thread to upload before its end
    _site, done = await crawl_offline_site(make_site, crawl, s3.url + "/sites/test",
                                           latency=0.2)
    assert done.result.exit_code == ExitCode.OK
    said = [r.getMessage() for r in caplog.records]
    first_upload = next(i for i, m in enumerate(said) if m.startswith("uploaded "))
    index_written = next(i for i, m in enumerate(said) if m.startswith("wrote ")
                         and m.endswith("lines)"))
    assert first_upload < index_written  # a closed file goes up while the run works
    files = local_files(done.archive)
    assert len(files) >= 3 and not any(n.endswith(".open") for n in files)
    objects = stored(s3, "sites/test/")
    assert objects == {**{f"warc/{n}": b for n, b in files.items()},  # byte for byte
                       "index.cdxj": (done.archive / "index.cdxj").read_bytes(),
                       "manifest.sqlite3": objects["manifest.sqlite3"]}
    uploads = done.result.uploads
    assert uploads is not None and uploads.complete and uploads.index and uploads.snapshot
    assert sorted(uploads.uploaded) == sorted(files)  # during the run and at its end
    snapshot = snapshot_of(s3, tmp_path, "sites/test/")
    local = ManifestReader(done.archive / "manifest.sqlite3")
    try:
        assert snapshot.captures.committed_ends() == local.captures.committed_ends()
        assert [r.state for r in snapshot.runs.all()] == ["complete"]
    finally:
        snapshot.close()
        local.close()
    assert json.loads((done.archive / ".store.json").read_text())["store"] == \
        s3.url + "/sites/test"


def test_a_run_without_a_store_loads_nothing_of_it(site_in_thread: Any, tmp_path: Path) -> None:
    """The desktop path is untouched: no obstore, no upload thread or its module
    (mirror.store.objstore itself is loaded: it imports obstore only when used)."""
    site = site_in_thread()
    site.page("/", "<p>hello</p>")
    toml = write_config(tmp_path, [site.base])
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mirror", "run", "-q",
                           str(toml)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines()
              if line.startswith("import time:")}
    assert not loaded & {"obstore", "mirror.crawl.uploads", "mirror.store.sync"}


async def test_a_dead_store_never_stops_a_run_and_push_catches_up(
        make_site: Any, crawl: Any, s3: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    _site, done = await crawl_offline_site(make_site, crawl, s3.url, store_retry=0)
    # the archive is complete here, its uploads are pending (tried again for 0 s)
    assert done.result.exit_code == ExitCode.UPLOAD_PENDING
    uploads = done.result.uploads
    assert uploads is not None and not uploads.complete
    assert f"cannot reach the store's endpoint {dead}" in (uploads.error or "")
    assert stored(s3) == {}
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    capsys.readouterr()
    assert main(["push", str(done.root / "site.toml")]) == ExitCode.OK
    said = capsys.readouterr().out
    files = local_files(done.archive)
    assert f"{len(files)} WARC files uploaded" in said and "manifest snapshot" in said
    objects = stored(s3)
    assert {k: v for k, v in objects.items() if k.startswith("warc/")} == \
        {f"warc/{n}": b for n, b in files.items()}
    assert {"index.cdxj", "manifest.sqlite3"} <= set(objects)
    assert main(["push", str(done.root / "site.toml")]) == ExitCode.OK  # nothing to do
    assert f"0 WARC files uploaded, {len(files)} already there" in capsys.readouterr().out


async def test_serve_from_the_store_answers_as_the_folder_does(
        make_site: Any, crawl: Any, s3: Any, aiohttp_client: Any) -> None:
    site, done = await crawl_offline_site(make_site, crawl, s3.url)
    local = await aiohttp_client(make_app(done.archive, Site("test")), auto_decompress=False)
    files = StoreFiles(open_store(s3.url))
    remote = await aiohttp_client(make_app(files, Site("test")), auto_decompress=False)
    archive = CaptureIndex.load(done.archive)
    assert len(archive.captures) > 10
    try:
        for cap in archive.captures:
            for mode in ("", "id_"):
                path = f"/{cap.timestamp}{mode}/{cap.url}"
                a, b = await local.get(path), await remote.get(path)
                assert (a.status, a.headers.get("Content-Type"), await a.read()) == \
                    (b.status, b.headers.get("Content-Type"), await b.read()), path
        landing = await (await remote.get("/")).text()
        assert "Home page" in landing and "complete" in landing  # the snapshot's runs
    finally:
        files.close()


async def test_export_from_the_store_equals_export_from_the_folder(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path) -> None:
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    files = StoreFiles(open_store(s3.url))
    try:
        remote = CaptureIndex.load(files)
        local = CaptureIndex.load(done.archive)
        assert list(remote.captures) == list(local.captures)
        export_folder(local, tmp_path / "local")
        export_folder(remote, tmp_path / "remote")
        assert _same_tree(tmp_path / "local", tmp_path / "remote")
        write_wacz(local, tmp_path / "local.wacz", title="t")
        write_wacz(remote, tmp_path / "remote.wacz", title="t")
        assert _wacz_members(tmp_path / "local.wacz") == _wacz_members(tmp_path / "remote.wacz")
    finally:
        files.close()


def _same_tree(a: Path, b: Path) -> bool:
    names = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert names == sorted(p.relative_to(b) for p in b.rglob("*"))
    files = [str(n) for n in names if (a / n).is_file()]
    match, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    assert (mismatch, errors) == ([], [])
    return len(match) > 10


def _wacz_members(path: Path) -> dict[str, bytes]:
    """A WACZ's entries but its datapackage (which holds the time it was written)."""
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist() if not n.startswith("datapackage")}


async def test_export_zim_from_the_store(make_site: Any, crawl: Any, s3: Any,
                                         tmp_path: Path) -> None:
    pytest.importorskip("libzim")
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    assert main(["export", str(done.root / "site.toml"), "--zim",
                 str(tmp_path / "local.zim")]) == ExitCode.OK
    assert main(["export", s3.url, "--zim", str(tmp_path / "remote.zim")]) == ExitCode.OK
    from libzim.reader import Archive

    a, b = Archive(tmp_path / "local.zim"), Archive(tmp_path / "remote.zim")
    assert (a.entry_count, a.article_count) == (b.entry_count, b.article_count)


async def test_verify_reads_the_store_and_finds_a_damaged_object(
        make_site: Any, crawl: Any, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    toml = str(done.root / "site.toml")
    assert main(["verify", s3.url]) == ExitCode.OK
    assert main(["verify", "--from-store", toml]) == ExitCode.OK
    out = capsys.readouterr().out
    assert f"{s3.url}: verified {len(local_files(done.archive))} files" in out
    name, data = sorted(local_files(done.archive).items())[1]
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF  # one byte, same size: only reading it all can tell
    s3.client().put_object(Bucket=bucket_of(s3), Key=f"warc/{name}", Body=bytes(damaged))
    assert main(["verify", s3.url]) == ExitCode.DAMAGED
    assert f"warc/{name}" in capsys.readouterr().out
    assert main(["verify", toml]) == ExitCode.OK  # the folder is whole


async def test_restore_into_an_empty_folder_then_an_incremental_run(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path) -> None:
    clock = RunClock()
    site, done = await crawl_offline_site(make_site, crawl, s3.url)
    again = tmp_path / "again"
    again.mkdir()
    toml = write_config(again, [site.base], crawl={"workers": 4, "timeout": 10},
                        archive={"warc_max_bytes": SMALL, "store": s3.url})
    assert main(["restore", str(toml)]) == ExitCode.OK
    restored = again / "archive"
    assert local_files(restored) == local_files(done.archive)
    assert (restored / "index.cdxj").read_bytes() == (done.archive / "index.cdxj").read_bytes()
    assert check_archive(restored, ManifestReader(restored / "manifest.sqlite3")).problems == ()
    assert main(["restore", str(toml)]) == ExitCode.USAGE  # it has an archive now
    clock.next_run()
    cfg = load_config(toml)
    result = await crawl_to_end(cfg, clock=clock)
    assert (result.run_id, result.exit_code) == (2, ExitCode.OK)
    second = Crawl(result, again)
    revisits = [r for r in second.records() if r["type"] == "revisit"]
    assert len(revisits) >= 10  # run 2 found run 1's payloads in the restored archive
    second.assert_verifies()
    assert result.uploads is not None and result.uploads.complete
    assert main(["verify", s3.url]) == ExitCode.OK  # the store holds both runs now
    assert stored(s3).keys() >= {f"warc/{n}" for n in local_files(restored)}


async def test_the_snapshot_never_names_a_file_the_store_lacks(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path) -> None:
    """As at a rotation mid-run: the file being written is not in the store, so its
    captures are rolled back in the snapshot (their URLs pending), and a run restored
    from it fetches them again."""
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    warc = done.archive / "warc"
    last = sorted(local_files(done.archive))[-1]
    os.replace(warc / last, warc / (last + ".open"))  # still being written
    s3.client().delete_object(Bucket=bucket_of(s3), Key=f"warc/{last}")
    store = open_store(s3.url)
    result = push(done.archive, store, index_too=False, delete_unnamed=False)
    assert result.rolled_back == [last] and result.snapshot and not result.failed
    snapshot = snapshot_of(s3, tmp_path)
    local = ManifestReader(done.archive / "manifest.sqlite3")
    try:
        assert (set(snapshot.captures.committed_ends())
                == set(local.captures.committed_ends()) - {last})
        lost = [row["url"] for row in local.captures.all() if row["filename"] == last]
        states = dict(snapshot.db.execute("SELECT url, state FROM urls").fetchall())
        assert lost and {states[u] for u in lost} == {"pending"}
    finally:
        snapshot.close()
        local.close()
    folder = tmp_path / "restored"
    outcome = restore(folder, store)
    assert outcome.rolled_back == [] and last not in local_files(folder)
    assert check_archive(folder, ManifestReader(folder / "manifest.sqlite3")).problems == ()


async def test_restore_rolls_back_what_the_store_lost(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path) -> None:
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    gone = sorted(local_files(done.archive))[0]
    s3.client().delete_object(Bucket=bucket_of(s3), Key=f"warc/{gone}")
    folder = tmp_path / "restored"
    outcome = restore(folder, open_store(s3.url))
    assert outcome.restored and outcome.rolled_back == [gone]
    manifest = ManifestReader(folder / "manifest.sqlite3")
    try:
        assert gone not in manifest.captures.committed_ends()
        assert check_archive(folder, manifest).problems == ()
    finally:
        manifest.close()


async def test_a_store_without_a_snapshot_restores_nothing(s3: Any, tmp_path: Path) -> None:
    outcome = restore(tmp_path / "empty", open_store(s3.url))
    assert not outcome.restored and not (tmp_path / "empty" / "manifest.sqlite3").exists()


def test_a_folder_restored_from_an_empty_store_is_an_archive_a_run_may_use(
        s3: Any, tmp_path: Path) -> None:
    """As a fleet worker before a site's first run: restore under the archive's lock leaves
    only the lock and the store's note; the run's output_dir check accepts that folder."""
    toml = write_config(tmp_path, ["http://127.0.0.1:9/"], archive={"store": s3.url})
    folder = tmp_path / "archive"
    folder.mkdir()
    with ArchiveLock(folder):
        assert not restore(folder, open_store(s3.url)).restored
    assert sorted(p.name for p in folder.iterdir()) == [".lock", ".store.json"]
    assert is_archive(folder) and output_dir_problem(folder) is None
    assert load_config(toml).site.output_dir == folder


async def test_prune_brings_the_store_along(make_site: Any, crawl: Any, s3: Any,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    clock = RunClock()
    site, other = await make_site(), await make_site()
    site_def.build(site, other)
    archive = {"warc_max_bytes": SMALL, "store": s3.url}
    scope = {"exclude": [re.escape(other.base)]}
    await crawl([site.base], scope=scope, archive=archive, clock=clock)
    clock.next_run()
    site.page("/about", site_def.ABOUT_HTML.replace("About us", "About us, changed"))
    done = await crawl([site.base], scope=scope, archive=archive, clock=clock)
    before = set(local_files(done.archive))
    assert main(["prune", str(done.root / "site.toml"), "--keep-last", "1"]) == ExitCode.OK
    after = set(local_files(done.archive))
    assert after != before
    out = capsys.readouterr().out
    assert "files deleted" in out
    assert {k for k in stored(s3) if k.startswith("warc/")} == {f"warc/{n}" for n in after}
    assert main(["verify", s3.url]) == ExitCode.OK


async def test_a_new_folder_does_not_overwrite_another_archive_in_the_store(
        make_site: Any, crawl: Any, s3: Any, tmp_path: Path) -> None:
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    theirs = stored(s3)["manifest.sqlite3"]
    other = tmp_path / "other"
    other.mkdir()
    toml = write_config(other, [_site.base], archive={"store": s3.url})
    result = await crawl_to_end(load_config(toml))
    assert result.exit_code == ExitCode.UPLOAD_PENDING and result.uploads is not None
    assert "did not push or restore" in (result.uploads.error or "")
    assert result.uploads.lasting  # not tried again: it will not pass by itself
    assert stored(s3)["manifest.sqlite3"] == theirs  # untouched
    assert main(["push", str(toml)]) == ExitCode.USAGE
    assert main(["push", "--force", str(toml)]) == ExitCode.OK
    assert stored(s3)["manifest.sqlite3"] != theirs


async def test_a_file_changed_under_its_name_is_a_conflict_not_an_overwrite(
        make_site: Any, crawl: Any, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _site, done = await crawl_offline_site(make_site, crawl, s3.url)
    name = sorted(local_files(done.archive))[0]
    before = stored(s3)[f"warc/{name}"]
    with open(done.archive / "warc" / name, "ab") as f:
        f.write(b"tampered")
    assert main(["push", str(done.root / "site.toml")]) == ExitCode.USAGE
    assert f"not uploaded: {name} (exists with other bytes" in capsys.readouterr().out
    assert stored(s3)[f"warc/{name}"] == before


async def test_a_revisit_replays_from_the_store(s3: Any, tmp_path: Path) -> None:
    """Revisits (both kinds, and one found by digest alone) read their originals by
    ranged GETs, as from the folder."""
    site_def.write_history(tmp_path / "hist")
    store = open_store(s3.url)
    assert push(tmp_path / "hist", store).complete
    files = StoreFiles(store)
    local, remote = CaptureIndex.load(tmp_path / "hist"), CaptureIndex.load(files)
    assert [c.is_revisit for c in remote.captures].count(True) == 3
    for a, b in zip(local.captures, remote.captures, strict=True):
        assert local.read(a) == remote.read(b)


def test_the_store_setting_is_checked(tmp_path: Path) -> None:
    toml = write_config(tmp_path, ["http://a.test/"], archive={"store": "http://bucket/x"})
    with pytest.raises(ConfigError, match=r"\[archive\] store: 'http://bucket/x': expected "
                                          "an address such as s3://bucket/prefix"):
        load_config(toml)
    toml = write_config(tmp_path, ["http://a.test/"], archive={"store": "s3://bucket/x/"})
    assert load_config(toml).archive.store == "s3://bucket/x"
    plain = write_config(tmp_path, ["http://a.test/"])
    assert load_config(plain).digest() == load_config(toml).digest()  # not a crawl setting


def test_object_store_type() -> None:
    assert ObjectStore.__module__ == "mirror.store.objstore"


def test_the_summary_and_the_report_say_what_was_uploaded(
        site_in_thread: Any, s3: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    site = site_in_thread()
    site.page("/", "".join(f'<a href="/p{i}">p{i}</a>' for i in range(6)))
    for i in range(6):
        site.page(f"/p{i}", f"<p>page {i} " + "words " * 300 + "</p>")
    toml = write_config(tmp_path, [site.base], archive={"warc_max_bytes": SMALL,
                                                        "store": s3.url})
    assert main(["run", "-q", str(toml)]) == ExitCode.OK
    files = local_files(tmp_path / "archive")
    out = capsys.readouterr().out
    assert f"store {s3.url}: {len(files)} WARC files uploaded, 0 already there, index, " \
        "manifest snapshot" in out
    report = json.loads((tmp_path / "archive" / "reports" / "1.json").read_text())
    assert report["store"]["complete"] is True
    assert sorted(report["store"]["uploaded"]) == sorted(files)
