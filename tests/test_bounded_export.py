"""Exports and verify of a big archive (issue 36): the captures and the export's plan live in
temporary SQLite tables, the contents are split into pages, and the command line shows a
progress bar on a terminal and nothing in a pipe. The memory figures themselves are
bench/million.py's."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest
from bs4 import BeautifulSoup
from test_export import assert_no_broken_links

from mirror.replay import exportpages
from mirror.replay.captures import CaptureIndex, parse_cdxj
from mirror.replay.export import export_folder, plan_export

MIRROR = str(Path(sys.executable).parent / "mirror")


def line(url: str, ts: str, offset: int, **extra: Any) -> str:
    fields = {"url": url, "mime": "text/html", "status": "200", "digest": f"sha1:{url}{ts}",
              "offset": str(offset), "length": "10", "filename": "a.warc.gz", **extra}
    return f"{url} {ts} {json.dumps(fields)}\n"


def test_the_captures_come_back_in_url_time_and_arrival_order(tmp_path: Path) -> None:
    """Every order CaptureIndex promises, from its table: by URL, by time, and two captures
    of one URL at one second in the order they were read."""
    lines = [line("http://h.test/b", "20240101000000", 1),
             line("http://h.test/a", "20240301000000", 2),
             line("http://h.test/a", "20240101000000", 3),
             line("http://h.test/b", "20240101000000", 4),
             line("http://h.test/é", "20230101000000", 5)]
    caps = [parse_cdxj(x) for x in lines]
    archive = CaptureIndex(tmp_path, [c for c in caps if c is not None])
    offsets = [c.offset for c in archive.captures]
    assert offsets == [3, 2, 1, 4, 5]
    assert len(archive.captures) == 5 and archive.captures[0].offset == 3
    assert archive.captures[-1].offset == 5
    with pytest.raises(IndexError):
        archive.captures[5]
    assert [c.offset for c in archive.captures_of("http://h.test/b")] == [1, 4]
    assert [c.offset for c in archive.latest()] == [2, 4, 5]
    assert [c.offset for c in archive.latest("2024")] == [2, 4, 5]
    assert [c.offset for c in archive.latest("202402")] == [3, 4, 5]
    assert [c.offset for c in archive.latest("2023")] == [5]
    sorted_lines = list(archive.captures.cdxj_lines(lambda name: "z.warc.gz"))
    assert sorted_lines == sorted(sorted_lines, key=lambda s: s.encode("utf-8"))
    assert len(sorted_lines) == 5 and all('"z.warc.gz"' in x for x in sorted_lines)


def test_a_revisit_finds_its_original_by_digest_across_urls(tmp_path: Path) -> None:
    lines = [line("http://h.test/a", "20240101000000", 1, digest="sha1:X"),
             line("http://h.test/b", "20240201000000", 2, digest="sha1:X",
                  mime="warc/revisit", status="200"),
             line("http://h.test/c", "20240101000000", 3, digest="sha1:X")]
    archive = CaptureIndex(tmp_path, [c for c in map(parse_cdxj, lines) if c is not None])
    revisit = archive.captures_of("http://h.test/b")[0]
    assert archive.original(revisit).offset == 1  # the first response with the digest
    assert archive.status_and_mime(revisit) == (200, "text/html")


async def test_contents_past_a_page_are_split_with_links_between(
        make_site: Any, crawl: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(exportpages, "CONTENTS_ROWS", 2)
    site, _, done = await site_def.crawl_site(make_site, crawl)
    archive = CaptureIndex.load(done.archive)
    listed = [e for e in plan_export(archive).values()
              if e.mime in ("text/html",) or 300 <= e.status < 400]
    assert len(listed) > 4
    out = tmp_path / "export"
    export_folder(archive, out)
    pages = (len(listed) + 1) // 2
    names = ["index.html", *(f"contents-{k}.html" for k in range(2, pages + 1))]
    assert sorted(p.name for p in out.glob("*.html") if p.name.startswith(("index", "contents"))
                  ) == sorted(names)
    rows = []
    for k, name in enumerate(names):
        soup = BeautifulSoup((out / name).read_bytes(), "html.parser")
        found = [a["href"] for a in soup.select("table.pages td:first-child a")]
        assert len(found) == (2 if k < pages - 1 else len(listed) - 2 * (pages - 1))
        rows += found
        pager = soup.select_one("p.pager")
        assert pager is not None and f"contents page {k + 1} of {pages}" in pager.text
        assert f"{len(listed):,} pages." in soup.text  # the whole count on each page
        links = {a.text: a["href"] for a in pager.select("a")}
        if k + 1 < pages:
            assert links["next"] == names[k + 1]
        if k > 0:
            assert links["previous"] == names[k - 1] and links["first"] == "index.html"
    assert len(rows) == len(set(rows)) == len(listed)  # every row once, in URL order
    urls = [e.capture.url for e in listed]
    assert urls == sorted(urls)
    assert assert_no_broken_links(out) > 15


async def test_export_and_verify_show_a_bar_on_a_terminal_and_nothing_in_a_pipe(
        make_site: Any, crawl: Any, tmp_path: Path) -> None:
    await site_def.crawl_site(make_site, crawl)
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100", "NO_COLOR": "1"}
    for argv, says in ((["export", "site.toml", "--wacz", "a.wacz"], "export --wacz"),
                       (["export", "site.toml", "--to", "out"], "export --to"),
                       (["verify", "site.toml"], "verify")):
        shown, out, code = on_terminal([MIRROR, *argv], tmp_path, env)
        assert says in shown and "━" in shown, shown  # the bar, on stderr
        assert out.strip() and "━" not in out  # stdout keeps the result only
        piped = subprocess.run([MIRROR, *argv], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
        assert piped.stdout.split()[:2] == out.split()[:2]  # "exported N" / "verified N"
        assert "━" not in piped.stderr and says not in piped.stderr
        assert code == piped.returncode
    with zipfile.ZipFile(tmp_path / "a.wacz") as z:
        index = z.read("indexes/index.cdxj").decode().splitlines(keepends=True)
    assert index == sorted(index, key=lambda s: s.encode("utf-8")) and len(index) > 10


def on_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, str, int]:
    """Run with stderr on a pseudo-terminal (a person's terminal) and stdout in a pipe:
    (what the terminal showed, stdout, exit code)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed: the command ended
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    out = proc.communicate(timeout=60)[0].decode()
    return shown.decode(errors="replace"), out, proc.returncode
