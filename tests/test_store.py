"""CaptureStore: the durability order (append, flush, one commit, undo on failure) and the
revisit choice, on a real manifest and WARC writer in a temporary folder."""

from __future__ import annotations

import hashlib
import io
import sqlite3
from pathlib import Path

import pytest
from test_resume import FullDisk
from warcio.archiveiterator import ArchiveIterator

from mirror.archive.warcwriter import Exchange, WarcWriter, default_info, sha1_digest
from mirror.crawl.store import CaptureStore, StorageError
from mirror.manifest.writer import Manifest, NewUrl, UrlItem
from mirror.model import NOTHING

BODY = b"<p>the same body</p>"


def exchange(url: str, status: int = 200, body: bytes = BODY) -> Exchange:
    return Exchange(url, "GET", "/" + url.rsplit("/", 1)[1], (("Host", "x"),), "1.1", status,
                    "OK", (("Content-Type", "text/html"),), io.BytesIO(body), len(body),
                    payload_digest=sha1_digest(hashlib.sha1(body)))


class Archive:
    def __init__(self, folder: Path, opener=None, group_size: int = 1,  # noqa: ANN001
                 max_bytes: int = 10**9) -> None:
        self.manifest = Manifest(folder / "manifest.sqlite3")
        writer = WarcWriter(folder / "warc", "t", max_bytes, default_info("d", "t/run-1"),
                            opener=opener)
        self.store = CaptureStore(self.manifest, folder / "warc", lambda *_: False,
                                  writer=writer, group_size=group_size)
        self.run = self.manifest.runs.start("2026-01-01T00:00:00Z", "d")

    def item(self, url: str) -> UrlItem:
        self.manifest.urls.add(self.run, None, [NewUrl(url, "x", 0, 5, "page", "link", "link")])
        [item] = [i for i in self.manifest.urls.lease(100, 1e12) if i.url == url]
        return item

    def store_one(self, url: str, status: int = 200, body: bytes = BODY) -> None:
        self.store.store(self.run, self.item(url), exchange(url, status, body), None, None,
                         NOTHING)

    def rows(self) -> dict[str, tuple[str, int, str | None]]:
        return {u: (t, s, o) for u, t, s, o in self.manifest.db.execute(
            "SELECT c.url, c.record_type, c.status, o.url FROM captures c "
            "LEFT JOIN captures o ON o.id = c.original_id")}

    def close(self) -> None:
        self.store.close()
        self.manifest.close()

    def records(self) -> list[tuple[str, str]]:
        out = []
        assert self.store.writer is not None
        self.store.writer._flush()
        for path in sorted(self.store.warc_dir.glob("*.warc.gz*")):
            with open(path, "rb") as f:
                out += [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"))
                        for r in ArchiveIterator(f) if r.rec_type != "warcinfo"]
        return out


@pytest.fixture
def archive(tmp_path):  # noqa: ANN001, ANN201
    opened: list[Archive] = []

    def make(opener=None, **options) -> Archive:  # noqa: ANN001, ANN003
        opened.append(Archive(tmp_path, opener, **options))
        return opened[-1]

    yield make
    for a in opened:
        a.close()


def test_a_2xx_payload_already_stored_becomes_a_revisit_of_the_same_status(archive):
    a = archive()
    a.store_one("http://x/one")
    a.store_one("http://x/two")  # same 200 body: a revisit of /one
    a.store_one("http://x/gone", status=404)  # same body, an error: stored whole
    a.store_one("http://x/moved", status=301)  # same body, a redirect: stored whole
    assert a.rows() == {
        "http://x/one": ("response", 200, None),
        "http://x/two": ("revisit", 200, "http://x/one"),
        "http://x/gone": ("response", 404, None),
        "http://x/moved": ("response", 301, None),
    }
    assert a.records() == [(k, u) for u in ("http://x/one", "http://x/two", "http://x/gone",
                                           "http://x/moved")
                           for k in ("revisit" if u.endswith("two") else "response",
                                     "request")]


def test_a_failed_commit_cuts_the_records_off_again(archive):
    a = archive()
    a.store_one("http://x/one")
    before = a.records()
    item = a.item("http://x/two")
    a.manifest.db.execute("PRAGMA query_only = ON")  # every write now fails
    with pytest.raises(StorageError, match="cannot update the manifest"):
        a.store.store(a.run, item, exchange("http://x/two", body=b"other"), None, None,
                      NOTHING)
    a.manifest.db.execute("PRAGMA query_only = OFF")
    assert a.records() == before  # the manifest never misses a record the WARC has
    assert "http://x/two" not in a.rows()


def test_a_full_disk_is_a_storage_error_and_leaves_no_torn_record(archive, tmp_path):
    a = archive(FullDisk(1500))
    a.store_one("http://x/one")
    with pytest.raises(StorageError, match=r"disk full writing \S+\.open: .*nothing lost"):
        a.store_one("http://x/big", body=bytes(range(256)) * 40)
    assert a.records() == [("response", "http://x/one"), ("request", "http://x/one")]
    with sqlite3.connect(tmp_path / "manifest.sqlite3") as db:
        assert db.execute("SELECT state FROM urls WHERE url='http://x/big'").fetchone() == (
            "leased",)  # not done: fetched again on resume
