"""A run's live numbers: pulled from the crawler, written to progress.json for other
processes, shown on a terminal; and the summary table at the end."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from aiohttp import web
from conftest import write_config
from rich.console import Console

from mirror.config import load_config
from mirror.crawl.crawler import Crawler
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestReader
from mirror.model import Progress
from mirror.run.progress import progress_renderable, render_progress, summary_table
from mirror.run.progressfile import LiveProgress, read_progress
from mirror.run.runreport import gather

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">x</a>' for h in hrefs)


async def watch(crawler: Crawler, every: float = 0.02) -> tuple[list[Progress], Progress]:
    """Run the crawl to its end, pulling its numbers meanwhile; returns them and the last."""
    assert crawler.progress() is None  # before the run has begun
    seen: list[Progress] = []

    async def pull() -> None:
        while True:
            if (p := crawler.progress()) is not None:
                seen.append(p)
            await asyncio.sleep(every)

    puller = asyncio.create_task(pull())
    try:
        await asyncio.wait_for(crawler.run(), 30)
    finally:
        puller.cancel()
        await asyncio.gather(puller, return_exceptions=True)
    last = crawler.progress()
    assert last is not None
    return seen, last


async def test_progress_is_pulled_while_a_crawl_runs(make_site, tmp_path):
    site = await make_site()
    site.latency = 0.05
    home = links(*[f"/p{i}" for i in range(5)])
    site.page("/", home)
    for i in range(5):
        site.page(f"/p{i}", f"page {i}")
    crawler = Crawler(load_config(write_config(tmp_path, [site.base], crawl={"workers": 1})))
    try:
        seen, last = await watch(crawler)
    finally:
        crawler.close()
    assert len(seen) >= 5
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert [p.elapsed for p in seen] == sorted(p.elapsed for p in seen)
    assert any(p.queued >= 5 for p in seen)  # the five links, once "/" is stored
    assert (last.run_id, last.done, last.queued, last.failed, last.retried, last.held_back) \
        == (1, 6, 0, 0, 0, 0)
    assert last.bytes == len(home) + sum(len(f"page {i}") for i in range(5))
    live = LiveProgress.of(last, pid=1, started=100.0, updated=102.0, rate=3.0)
    assert render_progress("s", live).startswith("s: 6/6, 3.0 pages/s, ETA 0:00, ")


async def test_a_host_answering_429_is_held_back_until_its_retry_after(make_site, tmp_path):
    site = await make_site()
    site.page("/", links("/slow"))
    answers: list[float] = []

    async def slow(request: web.Request) -> web.StreamResponse:
        answers.append(time.monotonic())
        if len(answers) == 1:
            return web.Response(status=429, text="slow down", headers={"Retry-After": "2"})
        return web.Response(text="finally", content_type="text/html")

    site.handler("/slow", slow)
    cfg = load_config(write_config(tmp_path, [site.base], crawl={"max_retry_after": 5}))
    crawler = Crawler(cfg, backoff_base=0.01, seed=1)
    try:
        seen, last = await watch(crawler)
    finally:
        crawler.close()
    assert len(answers) == 2 and answers[1] - answers[0] >= 2.0
    held = [p for p in seen if p.held_back]
    assert held and {p.held_back for p in held} == {1}
    assert held[-1].elapsed - held[0].elapsed >= 1.8  # held back for the whole Retry-After
    assert all(p.retried == 1 for p in held)
    assert (last.done, last.queued, last.failed, last.retried, last.held_back) == (2, 0, 0, 1, 0)


async def test_a_long_crawl_delay_holds_its_host_back_while_it_has_urls(make_site, tmp_path):
    site = await make_site()
    site.page("/robots.txt", "User-agent: *\nCrawl-delay: 0.5\n", content_type="text/plain")
    site.page("/", links("/a", "/b"))
    site.page("/a", "a")
    site.page("/b", "b")
    cfg = load_config(write_config(tmp_path, [site.base], scope={"robots": True}))
    crawler = Crawler(cfg)
    try:
        seen, last = await watch(crawler)
    finally:
        crawler.close()
    held = [p for p in seen if p.held_back]
    assert held and {p.held_back for p in held} == {1}
    assert held[-1].elapsed - held[0].elapsed >= 0.4  # "/a" and "/b" start 0.5 s apart
    # none once its URLs are done (robots.txt is stored too)
    assert (last.done, last.queued, last.held_back) == (5, 0, 0)  # robots.txt, sitemap.xml


def test_the_display_shows_the_numbers(tmp_path):
    live = LiveProgress(pid=1, run_id=3, updated=1000.0, started=900.0, done=42, queued=78,
                        failed=3, retried=5, bytes=1_234_567, held_back=2, rate=3.14,
                        eta=78 / 3.14)
    console = Console(record=True, width=100, color_system=None)
    console.print(progress_renderable("site", live))
    text = console.export_text()
    for part in ("site", "42/120", "3.1 pages/s", "ETA 0:25", "1.2 MB", "3 failed",
                 "5 retries", "2 hosts held back", "elapsed 1:40"):
        assert part in text, (part, text)
    assert render_progress("site", live) == (
        "site: 42/120, 3.1 pages/s, ETA 0:25, 1.2 MB, 3 failed, 5 retries, "
        "2 hosts held back, elapsed 1:40")
    calm = LiveProgress(pid=1, run_id=3, updated=1000.0, started=999.0, done=0, queued=0,
                        failed=0, retried=0, bytes=0, held_back=0, rate=0.0, eta=None)
    assert render_progress("site", calm) == (
        "site: 0/0, 0.0 pages/s, ETA --, 0 B, 0 failed, 0 retries, elapsed 0:01")


async def test_the_summary_table_of_a_real_run(crawl, make_site):
    site = await make_site()
    site.page("/", links("/a", "/missing", "/boom"))
    site.page("/a", "a")
    site.page("/boom", "down", status=500)
    c = await crawl([site.base], crawl={"max_tries": 1})
    cfg = load_config(c.root / "site.toml")
    manifest = ManifestReader(ArchiveLayout(cfg.site.output_dir).manifest)
    try:
        data = gather(cfg, manifest, 1)
    finally:
        manifest.close()
    console = Console(record=True, width=100, color_system=None)
    console.print(summary_table(data))
    text = console.export_text()
    assert "test: run 1 complete (exit 3)" in text
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") == 3}
    assert rows["captures"] == "4"
    assert rows["failed"] == "1"
    assert rows["changes"] == "4 new, 0 changed, 0 unchanged, 0 gone"
    assert rows["status"] == "2xx 2, 4xx 1, 5xx 1"
    assert rows["content types"].startswith("text/html")
    assert rows["bytes"].startswith("payload ") and ", WARC " in rows["bytes"]
    assert re.fullmatch(r"\d+\.\d+s \(\d+\.\d+ pages/s\)", rows["duration"])
    assert rows["most frequent errors"].endswith("1  HTTP 500")
    assert rows["failed URLs (1)"] == f"{site.base}boom  (HTTP 500)"
    assert rows["broken links (2)"] == f"{site.base}boom  [500]  linked from {site.base}"
    assert f"{site.base}missing  [404]  linked from" in text  # not markup, whole
    assert rows["archive"] == str(cfg.site.output_dir)


def slow_site(site, pages: int, latency: float) -> None:
    site.latency = latency
    paths = [f"/{i}" for i in range(pages)]
    site.page("/", links(*paths))
    for p in paths:
        site.page(p, f"page {p}")


async def test_progress_json_lives_while_a_run_works(make_site, tmp_path):
    """`mirror run` writes progress.json (stdout is no terminal here) and removes it at
    the end; nothing it prints has a terminal escape."""
    site = await make_site()
    slow_site(site, 20, 0.2)  # 2 at a time: about 2 s
    write_config(tmp_path, [site.base], crawl={"workers": 2})
    path = ArchiveLayout(tmp_path / "archive").progress
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "site.toml", cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FORCE_COLOR": "1"})
    seen: list[LiveProgress] = []
    try:
        ended = asyncio.ensure_future(proc.communicate())
        while not ended.done():
            if (p := read_progress(path)) is not None:
                seen.append(p)
            await asyncio.sleep(0.05)
        out, err = (b.decode() for b in await asyncio.wait_for(ended, 60))
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err
    assert len(seen) >= 3
    assert {(p.pid, p.run_id) for p in seen} == {(proc.pid, 1)}
    dones = [p.done for p in seen]
    assert dones == sorted(dones) and dones[-1] > dones[0]
    assert all(p.started <= p.updated <= time.time() for p in seen)
    assert any(p.rate > 0 and p.eta is not None for p in seen)
    assert all(p.done + p.queued <= 21 for p in seen)
    assert not path.exists()
    assert sorted(p.name for p in path.parent.glob("*progress*")) == []  # no temporary file
    assert "\x1b" not in out + err
    assert out.startswith("test: run 1 complete (exit 0): 21 captures")
    assert "  report         " in out


def test_a_terminal_shows_a_live_bar_and_a_summary_table(site_in_thread, tmp_path):
    site = site_in_thread()
    slow_site(site, 10, 0.15)  # one at a time: about 1.6 s, three ticks or more
    write_config(tmp_path, [site.base], crawl={"workers": 1})
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirror", "run", "site.toml"], cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
        env={**env, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "LINES": "40",
             "TERM": "xterm-256color", "PYTHONIOENCODING": "utf-8"})
    os.close(follower)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
        os.close(leader)
    raw = b"".join(chunks).decode("utf-8", "replace")
    assert "\x1b[" in raw  # a terminal gets rich output
    text = ANSI.sub("", raw)
    assert re.search(r"test +[━╸╺ ]*\S* *\d+/\d+ +\d+\.\d pages/s +ETA ", text), text
    assert "test: run 1 complete (exit 0)" in text
    assert re.search(r"captures\W+11\b", text), text
    assert re.search(r"report  \S+1\.json", text), text
    assert not ArchiveLayout(tmp_path / "archive").progress.exists()
