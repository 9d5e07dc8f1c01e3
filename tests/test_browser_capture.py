"""Pages built by scripts captured in a real browser (Debian's chromium) during a run, on the
SPA fixture (tests/spasite.py): what `auto`, `always` and `off` load in the browser, that the
browser's requests go through mirror's politeness, and that what they fetched is archived
once and answered from the archive after."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import spasite
from conftest import RunClock, write_config

from mirror.browser import BrowserSettings, find_browser
from mirror.config import SiteConfig, load_config
from mirror.crawl.crawler import Crawler, RunResult
from mirror.crawl.render import Renderer
from mirror.model import ExitCode
from mirror.run.runreport import write_report

pytestmark = [pytest.mark.browser]
CHROMIUM = find_browser()
if CHROMIUM is None:
    pytestmark.append(pytest.mark.skip(reason="no Chromium-family browser installed"))

DELAY = 0.3
#: how much earlier than `delay` after the one before a request may arrive: the frontier
#: spaces the starts of requests, the site logs their arrivals in a thread of this process
#: (it shares the GIL with the crawler and the browser's answerer), so an arrival lags its
#: start by a varying time: up to 0.13 s seen at a load average of 22 on 2 cores. Half the
#: delay still tells pacing from none (two tabs' requests unpaced arrive together).
SLACK = DELAY / 2


GLUED = "browser" in getattr(SiteConfig, "__dataclass_fields__", {})


def site_file(folder: Path, base: str, mode: str, **crawl: Any) -> Path:
    browser = {"browser": {"mode": mode, "executable": str(CHROMIUM), "page_timeout": 30}}
    return write_config(folder, [base], scope={"robots": True},
                        crawl={"workers": 2, "parse_processes": 0, "timeout": 10,
                               "delay": DELAY, "per_host": 1, **crawl},
                        **(browser if GLUED else {}))


async def run(folder: Path, base: str, mode: str, clock: Any = None) -> RunResult:
    cfg = load_config(site_file(folder, base, mode))
    crawler = Crawler(cfg, backoff_base=0.01, seed=1, **({"clock": clock} if clock else {}))
    if not GLUED:
        assert CHROMIUM is not None
        crawler.renderer = Renderer(mode, BrowserSettings(CHROMIUM, page_timeout=30)
                                    if mode != "off" else None)
    try:
        result = await asyncio.wait_for(crawler.run(), timeout=240)
        write_report(cfg, crawler.manifest, result.run_id)
    finally:
        crawler.close()
    assert result.exit_code == ExitCode.OK, result
    return result


def archived(folder: Path, run: int | None = None) -> dict[str, list[tuple[int, str]]]:
    """path (query left off) -> (status, record type) of each capture (of one run)."""
    db = sqlite3.connect(folder / "archive" / "manifest.sqlite3")
    with contextlib.closing(db):
        rows = db.execute("SELECT url, status, record_type, run_id FROM captures").fetchall()
    out: dict[str, list[tuple[int, str]]] = {}
    for url, status, kind, run_id in rows:
        if run is None or run_id == run:
            path = "/" + url.split("/", 3)[3].split("?")[0]
            out.setdefault(path, []).append((status, kind))
    return out


def texts(folder: Path) -> dict[str, str]:
    """path -> the page's text in the search index (latest capture)."""
    db = sqlite3.connect(folder / "archive" / "manifest.sqlite3")
    with contextlib.closing(db):
        rows = db.execute("SELECT c.url, t.body FROM captures c JOIN page_texts t "
                          "ON t.id = c.text_id ORDER BY c.id").fetchall()
    return {"/" + url.split("/", 3)[3]: body or "" for url, body in rows}


def polite(site: spasite.SpaSite) -> None:
    """No request to the site came sooner than `delay` after the one before (per_host=1),
    and none that mirror does not make (a POST, a URL robots.txt disallows)."""
    gap = site.min_gap()
    assert gap is None or gap[0] >= DELAY - SLACK, f"two requests {gap} apart"
    assert site.posts() == 0
    assert not [p for p in site.counts() if p.startswith("/private/")]


async def test_auto_renders_the_app_pages_only_and_archives_their_content(
        tmp_path: Path) -> None:
    with spasite.serve(plain=4, apps=5) as site:
        result = await run(tmp_path, site.base, "auto")
        polite(site)
        first = site.counts()
        clock = RunClock()
        clock.next_run()
        again = await run(tmp_path, site.base, "auto", clock=clock)
        polite(site)
    apps = site.app_paths()
    assert result.browser_loads == len(apps)  # no plain page loaded in the browser
    stored = archived(tmp_path, run=1)
    for path in apps:
        assert path in stored, f"{path}: found only in the rendered DOM, not crawled"
        for need in site.requisites(path):
            assert need in stored, f"{need} (of {path}) not archived"
    words = texts(tmp_path)
    for path in apps:
        for word in site.words(path):
            assert word in words[path], f"{word} not in the text of {path}"
    # every subresource was received once in run 1 ...
    assert {p: n for p, n in first.items() if n > 1} == {}
    # ... and at most once more by the incremental run 2, which archives it as a revisit
    assert again.browser_loads == len(apps)
    twice = {p: n for p, n in site.counts().items() if n > 2}
    assert twice == {}
    for path in {r for p in apps for r in site.requisites(p)}:
        assert [k for _, k in archived(tmp_path, run=2).get(path, [])] in (["revisit"], []), path


@pytest.mark.parametrize("mode", ["off", "always"])
async def test_off_loads_nothing_and_always_every_html_page(tmp_path: Path, mode: str) -> None:
    with spasite.serve(plain=3, apps=5) as site:
        result = await run(tmp_path, site.base, mode)
        polite(site)
    if mode == "off":
        assert result.browser_loads == 0
        assert not [p for p in site.counts() if p.startswith(("/api/", "/img/"))]
    else:
        assert result.browser_loads == len(site.plain_paths()) + len(site.app_paths())


def test_a_renderer_without_a_browser_is_off() -> None:
    assert Renderer("auto", None).mode == "off"
    assert Renderer("always", BrowserSettings(Path("/usr/bin/chromium"))).loads == 0
