"""A page loaded in a browser, stored (issue 35): its rendered DOM as a WARC conversion record
right after its response record, the renders row, the rendered text for search; read back by
warcio, `mirror verify` and the index, none of which takes it for the page; recovery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_store import Archive, exchange
from warcio.archiveiterator import ArchiveIterator

from mirror import __version__
from mirror.archive import index, warcread
from mirror.browser.api import Rendered
from mirror.crawl.runmode import write_index
from mirror.manifest.reader import ManifestReader
from mirror.model import NOTHING
from mirror.upkeep import recovery

URL = "http://x/app"
DOM = "<!DOCTYPE html><html><head><title>App</title></head><body><p>Loaded café</p></body></html>"
PNG = b"\x89PNG\r\n\x1a\n-not-really"


@pytest.fixture
def archive(tmp_path: Path):  # noqa: ANN201
    opened: list[Archive] = []

    def make(**options: int) -> Archive:
        opened.append(Archive(tmp_path, None, **options))
        return opened[-1]

    yield make
    for a in opened:
        a.close()


def rendered(screenshot: bytes | None = None) -> Rendered:
    return Rendered(URL, DOM, "Loaded café", "App", ("http://x/next",), 7, screenshot)


def store_rendered(a: Archive, screenshot: bytes | None = None) -> None:
    a.store.store(a.run, a.item(URL), exchange(URL, body=b"<div id=app></div>"), None, None,
                  NOTHING, rendered(screenshot), "Chromium/120.0.1")
    a.store.commit_pending()


def records(folder: Path) -> list:  # type: ignore[type-arg]
    out = []
    for path in sorted(folder.glob("*.warc.gz*")):
        with open(path, "rb") as f:
            for r in ArchiveIterator(f):
                out.append((r.rec_type, dict(r.rec_headers.headers), r.content_stream().read()))
    return out


def test_conversion_record_after_the_response(archive) -> None:  # noqa: ANN001
    a = archive(group_size=1)
    store_rendered(a, PNG)
    recs = [r for r in records(a.store.warc_dir) if r[0] != "warcinfo"]
    assert [(t, h["WARC-Target-URI"]) for t, h, _ in recs] == [
        ("response", URL), ("conversion", URL), ("resource", "urn:mirror:screenshot:" + URL),
        ("request", URL)]
    (_, resp, _), (_, conv, dom), (_, shot, png), _ = recs
    assert dom == DOM.encode()
    assert png == PNG
    assert conv["WARC-Refers-To"] == resp["WARC-Record-ID"]
    assert conv["WARC-Refers-To-Target-URI"] == URL
    assert conv["WARC-Refers-To-Date"] == resp["WARC-Date"]
    assert conv["Content-Type"] == "text/html; charset=utf-8"
    assert conv["WARC-Payload-Digest"].startswith("sha1:")
    assert conv["WARC-Rendered-By"] == f"mirror/{__version__}; Chromium/120.0.1"
    assert shot["Content-Type"] == "image/png"
    # warcio checks every digest of the file
    files = [str(p) for p in a.store.warc_dir.glob("*.warc.gz*")]
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *files],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_renders_row_text_and_index(archive, tmp_path: Path) -> None:  # noqa: ANN001
    a = archive(group_size=4)
    store_rendered(a)
    a.store_one("http://x/plain")
    a.store.commit_pending()
    reader = ManifestReader(tmp_path / "manifest.sqlite3")
    try:
        [(cid,)] = reader.db.execute("SELECT id FROM captures WHERE url=?", (URL,)).fetchall()
        ref = reader.renders.of_capture(cid)
        assert ref is not None and reader.renders.captures(a.run) == {cid}
        assert reader.renders.count(a.run) == 1
        raw = warcread.read_raw(a.store.warc_path(ref.warc_file), ref.offset)
        assert (raw.rec_type, raw.payload) == ("conversion", DOM.encode())
        assert [u for u, _ in reader.db.execute("SELECT url, 1 FROM captures")] == [
            URL, "http://x/plain"]
        plain = reader.db.execute("SELECT id FROM captures WHERE url='http://x/plain'")
        assert reader.renders.of_capture(plain.fetchone()[0]) is None
    finally:
        reader.close()
    a.store.manifest.texts.index()  # as a finished run is
    found = a.store.manifest.texts.search("café")
    assert [hit.url for hit in found] == [URL]
    # the index names the response only; the conversion and screenshot records are not in it
    a.close()
    m = ManifestReader(tmp_path / "manifest.sqlite3")
    try:
        lines = [index.capture_line(row) for row in m.captures.all()]
    finally:
        m.close()
    assert len(lines) == 2 and all('"status": "200"' in line or '"status":' in line
                                   for line in lines)
    assert not any("conversion" in line for line in lines)


def test_verify_accepts_the_conversion_record(archive, tmp_path: Path) -> None:  # noqa: ANN001
    a = archive(group_size=1)
    store_rendered(a, PNG)
    a.store.manifest.runs.finish(a.run, "2026-01-01T00:01:00Z", "complete", 0)
    write_index(a.store.manifest, tmp_path / "index.cdxj", lambda: False)
    a.close()
    assert "conversion" not in (tmp_path / "index.cdxj").read_text()
    site = tmp_path / "site.toml"
    site.write_text(f'[site]\nname = "x"\nstart_urls = ["{URL}"]\noutput_dir = "."\n')
    proc = subprocess.run([sys.executable, "-m", "mirror", "verify", str(site)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_recovery_does_not_adopt_a_rendered_page(archive, tmp_path: Path) -> None:  # noqa: ANN001
    """A crash after the flush, before the commit: the group is found whole, marked
    rendered, so start-up fetches and renders the page again instead of adopting it."""
    a = archive(group_size=10)
    a.store_one("http://x/before")
    a.store.store(a.run, a.item(URL), exchange(URL), None, None, NOTHING, rendered(PNG), "C/1")
    assert a.store.writer is not None
    a.store.writer._flush()
    [path] = list(a.store.warc_dir.glob("*.open"))
    found, end = recovery.scan_groups(path, 0, path.name[:-5])
    assert [(f.exchange.url, f.rendered) for f in found] == [("http://x/before", False),
                                                            (URL, True)]
    assert end == path.stat().st_size
    for f in found:
        f.exchange.body.close()
    a.store.commit_pending()
