"""Reading an archive back: index lines, closest capture, revisits, unindexed and .open WARCs."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import offline_site as site_def
import pytest

from mirror.archive.warcread import ReadError
from mirror.replay.captures import CaptureIndex, parse_cdxj


def test_parse_cdxj_reads_index_lines_and_rejects_others() -> None:
    line = ('com,example)/a 20240102030405 {"url": "http://example.com/a", "mime": '
            '"text/html", "status": "200", "digest": "sha1:X", "length": "10", "offset": "5", '
            '"filename": "f.warc.gz"}\n')
    cap = parse_cdxj(line)
    assert cap is not None
    assert (cap.url, cap.timestamp, cap.status, cap.offset, cap.length) == (
        "http://example.com/a", "20240102030405", 200, 5, 10)
    assert cap.cdxj() == line
    assert cap.cdxj("g.warc.gz").endswith('"filename": "g.warc.gz"}\n')
    for bad in ("", "no json here", 'k 2024 {"url": "x"}', "k 2024 {not json}"):
        assert parse_cdxj(bad) is None


def test_every_revisit_reads_back_the_original_payload(tmp_path: Path) -> None:
    site_def.write_history(tmp_path)
    archive = CaptureIndex.load(tmp_path)
    got = {(c.url, c.timestamp): archive.read(c) for c in archive.captures}
    assert got[(site_def.HISTORY_URL, "20240101000000")].payload == site_def.V1
    for ts in ("20250101000000", "20250601000000", "20250701000000"):
        record = got[(site_def.HISTORY_URL, ts)]
        assert (record.status, record.payload, record.mime) == (200, site_def.V2, "text/html")
    twin = got[(site_def.HISTORY_TWIN, "20250801000000")]  # no Refers-To: found by digest
    assert (twin.payload, twin.revisit_of) == (site_def.V2, "2025-01-01T00:00:00Z")
    not_modified = archive.captures_of(site_def.HISTORY_URL)[3]
    assert archive.status_and_mime(not_modified) == (200, "text/html")


def test_closest_capture_and_latest_as_of(tmp_path: Path) -> None:
    site_def.write_history(tmp_path)
    archive = CaptureIndex.load(tmp_path)
    url = site_def.HISTORY_URL

    def closest(ts: str) -> str:
        cap = archive.closest(url, ts)
        assert cap is not None
        return cap.timestamp

    assert closest("2023") == "20240101000000"
    assert closest("20240601") == "20240101000000"
    assert closest("20240901") == "20250101000000"  # nearer in seconds, not in digits
    assert closest("2030") == "20250701000000"
    assert archive.closest("http://history.test/nothing", "2024") is None
    assert archive.closest("HTTP://History.test:80/page#frag", "2024") is not None  # canonical
    latest = {c.url: c.timestamp for c in archive.latest("2024")}
    assert latest == {url: "20240101000000"}  # '2024' = as of the end of 2024
    assert {c.url for c in archive.latest()} == {url, site_def.HISTORY_TWIN}


def test_revisit_whose_original_is_gone_is_a_read_error(tmp_path: Path) -> None:
    site_def.write_history(tmp_path)
    lines = (tmp_path / "index.cdxj").read_text().splitlines(keepends=True)
    (tmp_path / "index.cdxj").write_text("".join(ln for ln in lines if "20250101" not in ln))
    archive = CaptureIndex.load(tmp_path)
    revisit = archive.captures_of(site_def.HISTORY_URL)[-1]
    with pytest.raises(ReadError, match="original not found"):
        archive.read(revisit)


def test_warc_files_missing_from_the_index_are_read_from_their_complete_records(
    tmp_path: Path,
) -> None:
    """A run killed before it rebuilt the index: one closed file and one .open file with a
    torn last record are not in index.cdxj; replay still finds every complete capture."""
    src = site_def.write_history(tmp_path / "src")
    warc_dir = tmp_path / "warc"
    warc_dir.mkdir()
    shutil.copy(src, warc_dir / src.name)
    torn = warc_dir / "hist-20250101000000000-00002.warc.gz.open"
    data = src.read_bytes()
    torn.write_bytes(data + gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n")[:-12])
    (tmp_path / "index.cdxj").write_text("")
    archive = CaptureIndex.load(tmp_path)
    files = {c.filename for c in archive.captures}
    assert files == {src.name, torn.name}
    assert len(archive.captures) == 2 * len(site_def.HISTORY)
    for cap in archive.captures:
        assert archive.read(cap).payload in (site_def.V1, site_def.V2)
    assert [p.name for p in archive.warc_paths()] == sorted([src.name, torn.name])


def test_missing_warc_file_is_a_read_error(tmp_path: Path) -> None:
    path = site_def.write_history(tmp_path)
    archive = CaptureIndex.load(tmp_path)
    os.remove(path)
    with pytest.raises(ReadError):
        archive.read(archive.captures[0])


async def test_crawled_bodies_read_back_as_served(make_site, crawl) -> None:
    site, _other, done = await site_def.crawl_site(make_site, crawl)
    archive = CaptureIndex.load(done.archive)
    headers_page = archive.closest(site.base + "headers?x=1", "2999")
    assert headers_page is not None
    record = archive.read(headers_page)
    assert record.header("Content-Encoding") == "gzip"  # stored as received
    assert gzip.decompress(record.payload) == site_def.HEADERS_HTML
    assert record.decoded() == (site_def.HEADERS_HTML, True)
    image = archive.closest(site.base + "img/a.png", "2999")
    assert image is not None
    assert archive.read(image).payload == site_def.png(*site_def.IMAGES["a.png"])
