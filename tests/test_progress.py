"""The progress display is fed frozen snapshots of a crawl's live numbers."""

from __future__ import annotations

import asyncio

from conftest import write_config

from mirror.config import load_config
from mirror.crawl.crawler import Crawler
from mirror.model import Progress
from mirror.progress import render_progress


async def test_a_crawl_reports_progress_snapshots(make_site, tmp_path):
    site = await make_site()
    site.page("/", "".join(f'<a href="/p{i}">p</a>' for i in range(5)))
    for i in range(5):
        site.page(f"/p{i}", f"page {i}")
    seen: list[Progress] = []
    crawler = Crawler(load_config(write_config(tmp_path, [site.base])), on_progress=seen.append)
    try:
        await asyncio.wait_for(crawler.run(), 30)
    finally:
        crawler.close()
    assert seen and all(isinstance(p, Progress) for p in seen)
    last = seen[-1]
    assert (last.done, last.queued, last.failed) == (6, 0, 0)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert render_progress("s", last).startswith("s: 6 done, 0 queued, 0 failed, 0 retries |")
