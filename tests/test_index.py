"""index.cdxj: sorted, equal to cdxj-indexer's output, every line reads back its record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from mirror.archive import index
from mirror.web.http import mime_of


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">x</a>' for h in hrefs)


async def crawled_site(make_site, crawl, **sections):
    site = await make_site()
    site.page("/", links("/a", "/b?x=1", "/gone", "/r") + '<img src="/i.png">')
    site.page("/a", "<p>a</p>")
    site.page("/b?x=1", "<p>b</p>", content_type="text/html")
    site.page("/i.png", b"\x89PNG", content_type="image/png")
    site.redirect("/r", "/a")
    return site, await crawl([site.base], **sections)


async def test_index_equals_cdxj_indexer_and_reads_back(make_site, crawl):
    site, c = await crawled_site(make_site, crawl, archive={"warc_max_bytes": 1500})
    warc_dir = c.archive / "warc"
    files = sorted(str(p) for p in warc_dir.glob("*.warc.gz"))
    assert len(files) > 1  # rotation happened, so several files are indexed
    ours = (c.archive / "index.cdxj").read_text()
    proc = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", "-s", *files],
                          capture_output=True, text=True, check=True)
    assert ours == proc.stdout
    lines = ours.splitlines()
    assert lines == sorted(lines, key=lambda s: s.encode())
    assert len(lines) == 6  # /, /a, /b?x=1, /gone (404), /r (301), /i.png
    for line in lines:
        fields = json.loads(line.split(" ", 2)[2])
        with open(warc_dir / fields["filename"], "rb") as f:
            f.seek(int(fields["offset"]))
            rec = next(iter(ArchiveIterator(f)))
            assert rec.rec_headers.get_header("WARC-Target-URI") == fields["url"]
            assert rec.rec_type == "response"


async def test_rebuild_from_warcs_equals_end_of_run_index(make_site, crawl):
    _, c = await crawled_site(make_site, crawl)
    built = (c.archive / "index.cdxj").read_text()
    (c.archive / "index.cdxj").unlink()
    n, files = index.rebuild_from_warcs(c.archive / "warc", c.archive / "index.cdxj")
    assert (n, files) == (6, 1)
    assert (c.archive / "index.cdxj").read_text() == built


def test_mime_of_matches_cdxj_indexer_rule() -> None:
    assert mime_of("text/html; charset=utf-8") == "text/html"
    assert mime_of("image/png") == "image/png"
    assert mime_of(None) is None
    assert mime_of("") is None


def test_write_index_merges_sorted_runs(tmp_path: Path) -> None:
    import random

    lines = [f"k{random.Random(i).random():.12f} {i} {{}}\n" for i in range(1000)]
    path = tmp_path / "index.cdxj"
    assert index.write_index(path, lines, chunk=64) == 1000  # 16 runs on disk, merged
    assert path.read_text().splitlines(keepends=True) == sorted(lines, key=str.encode)
    assert [p.name for p in tmp_path.iterdir()] == ["index.cdxj"]


def test_write_index_is_atomic_and_sorted(tmp_path: Path) -> None:
    path = tmp_path / "index.cdxj"
    path.write_text("old\n")
    index.write_index(path, ["b 1 {}\n", "a 2 {}\n", "B 3 {}\n"])
    assert path.read_text() == "B 3 {}\na 2 {}\nb 1 {}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["index.cdxj"]
