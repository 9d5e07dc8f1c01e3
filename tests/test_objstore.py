"""mirror.store.objstore against a real S3 server on loopback (moto in server mode): the
conditional put, a retried upload of the same bytes, a conflict, ranged reads, streaming,
atomic downloads, and the errors a user sees (no credentials, no bucket, no endpoint)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mirror.store.objstore import (
    SHA256,
    StoreConflict,
    StoreError,
    StoreMissing,
    file_digest,
    open_store,
    parse_store_url,
)


@pytest.mark.parametrize(("url", "parsed"), [
    ("s3://bucket", ("bucket", "")),
    ("s3://bucket/", ("bucket", "")),
    ("s3://my.bucket-1/a/b/", ("my.bucket-1", "a/b")),
])
def test_store_urls(url: str, parsed: tuple[str, str]) -> None:
    assert parse_store_url(url) == parsed


@pytest.mark.parametrize(("url", "says"), [
    ("http://bucket/a", "expected an address such as s3://bucket/prefix"),
    ("s3://", "is not a bucket name"),
    ("s3://ab", "is not a bucket name"),
    ("s3://Bucket/a", "is not a bucket name"),
    ("s3://bucket/a//b", "empty, '.' or '..' part"),
    ("s3://bucket/a/../b", "empty, '.' or '..' part"),
    ("s3://bucket/a?x=1", "no query"),
    ("s3://bucket/a b", "no query"),
])
def test_bad_store_urls(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        parse_store_url(url)
    assert says in str(err.value)


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_upload_once_then_identical_bytes_count_as_done(s3: Any, tmp_path: Path) -> None:
    store = open_store(s3.url + "/site")
    path = _file(tmp_path, "a.warc.gz", os.urandom(300_000))
    assert store.upload(path, "warc/a.warc.gz") is True
    assert store.upload(path, "warc/a.warc.gz") is False  # a retried upload: done
    copy = _file(tmp_path, "copy", path.read_bytes())  # the same bytes from another file
    assert store.upload(copy, "warc/a.warc.gz") is False
    objects = s3.objects(s3.url[5:])
    assert objects == {"site/warc/a.warc.gz": path.read_bytes()}
    head = s3.client().head_object(Bucket=s3.url[5:], Key="site/warc/a.warc.gz")
    assert head["Metadata"] == {SHA256: file_digest(path, "sha256")}


def test_other_bytes_are_a_conflict_and_are_not_written(s3: Any, tmp_path: Path) -> None:
    store = open_store(s3.url)
    first = _file(tmp_path, "first", b"first version")
    other = _file(tmp_path, "other", b"other version")  # same size, other bytes
    store.upload(first, "warc/x.warc.gz")
    with pytest.raises(StoreConflict, match="exists with other bytes.*not overwritten"):
        store.upload(other, "warc/x.warc.gz")
    with pytest.raises(StoreConflict):
        store.upload(_file(tmp_path, "longer", b"longer version!"), "warc/x.warc.gz")
    assert store.get_bytes("warc/x.warc.gz") == b"first version"


def test_an_object_put_without_the_digest_is_compared_by_its_md5_etag(
        s3: Any, tmp_path: Path) -> None:
    """Someone else's upload (no x-amz-meta-sha256): a single-part PUT's ETag is the MD5."""
    bucket = s3.url[5:]
    s3.client().put_object(Bucket=bucket, Key="warc/same.warc.gz", Body=b"0123456789")
    s3.client().put_object(Bucket=bucket, Key="warc/diff.warc.gz", Body=b"0123456789")
    store = open_store(s3.url)
    assert store.upload(_file(tmp_path, "s", b"0123456789"), "warc/same.warc.gz") is False
    with pytest.raises(StoreConflict):
        store.upload(_file(tmp_path, "d", b"9876543210"), "warc/diff.warc.gz")


@pytest.mark.parametrize("server", ["moto", "seaweed"])
def test_the_server_honours_if_none_match(server: str, request: pytest.FixtureRequest,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """What upload() relies on against a race: a put with If-None-Match: * (obstore's
    mode="create") on an existing key is refused (412), on moto and on SeaweedFS."""
    if server == "moto":
        s3 = request.getfixturevalue("s3")
        url = s3.url
    else:
        s3 = request.getfixturevalue("seaweed")
        for key, value in s3.env.items():
            monkeypatch.setenv(key, value)
        url = s3.make_bucket("inm-test")
    import obstore

    store = open_store(url)
    obstore.put(store._bulk, "k", b"one", mode="create")
    with pytest.raises(obstore.exceptions.AlreadyExistsError):
        obstore.put(store._bulk, "k", b"two", mode="create")
    assert store.get_bytes("k") == b"one"


def test_ranged_reads_streams_and_listing(s3: Any, tmp_path: Path) -> None:
    store = open_store(s3.url + "/a/b")
    data = os.urandom(200_000)
    path = _file(tmp_path, "f.warc.gz", data)
    store.upload(path, "warc/f.warc.gz")
    store.put_bytes("index.cdxj", b"line\n")
    assert store.read_range("warc/f.warc.gz", 1000, 50) == data[1000:1050]
    assert store.read_range("warc/f.warc.gz", len(data) - 10, 50) == data[-10:]  # at the end
    assert store.size("warc/f.warc.gz") == len(data)
    assert store.size("warc/none") is None
    assert store.list() == {"warc/f.warc.gz": len(data), "index.cdxj": 5}
    assert store.list("warc/") == {"warc/f.warc.gz": len(data)}
    with store.open_range("warc/f.warc.gz", 100, 10_000, chunk=1000) as f:
        assert f.read(3000) == data[100:3100]
        f.seek(9000)
        assert f.read() == data[9000:10100]
    with store.open_stream("warc/f.warc.gz") as f:
        assert b"".join(iter(lambda: f.read(7777), b"")) == data


def test_download_is_atomic_and_checked(s3: Any, tmp_path: Path) -> None:
    store = open_store(s3.url)
    data = os.urandom(3_000_000)
    store.upload(_file(tmp_path, "src", data), "warc/big.warc.gz")
    out = tmp_path / "out" / "big.warc.gz"
    store.download("warc/big.warc.gz", out)
    assert out.read_bytes() == data
    assert sorted(p.name for p in out.parent.iterdir()) == ["big.warc.gz"]  # no temp left
    with pytest.raises(StoreMissing, match="no such object"):
        store.download("warc/none", tmp_path / "out" / "none")
    assert not (tmp_path / "out" / "none").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["big.warc.gz"]


def test_missing_bucket_says_so(s3: Any, tmp_path: Path) -> None:
    store = open_store("s3://no-such-bucket/p")
    with pytest.raises(StoreError, match="bucket 'no-such-bucket' does not exist"):
        store.upload(_file(tmp_path, "f", b"x"), "warc/f.warc.gz")
    with pytest.raises(StoreError, match="bucket 'no-such-bucket' does not exist"):
        store.list()


def test_no_credentials_says_which_variables(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(StoreError, match="no credentials: set AWS_ACCESS_KEY_ID and "
                                         "AWS_SECRET_ACCESS_KEY"):
        open_store(s3.url)


def test_an_endpoint_that_does_not_answer(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from s3server import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    with pytest.raises(StoreError, match=f"cannot reach the store's endpoint {dead}"):
        open_store(s3.url).list()


def test_refused_credentials(seaweed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto takes any key; SeaweedFS checks them."""
    for key, value in seaweed.env.items():
        monkeypatch.setenv(key, value)
    url = seaweed.make_bucket("creds-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(StoreError, match="credentials were refused|access denied"):
        open_store(url).list()


def test_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch, s3: Any) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "obstore", None)  # as if it were not installed
    with pytest.raises(StoreError, match=r"pip install 'mirror\[fleet\]'"):
        open_store(s3.url)
