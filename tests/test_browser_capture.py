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
from mirror.cli.main import main
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
# Politeness is checked on the site's log of arrivals. The frontier lets a request go
# `delay` after the one before to its host was let go, and counts again from when its
# headers are sent (Frontier.sent), so the starts are never closer than `delay`, on
# loopback their arrivals neither; but the site logs an arrival when its loop runs, in a
# thread sharing this process's GIL with the crawler and the browser's answerer on a loaded
# machine, so the earlier request of a pair may be logged late and the gap look shorter.
# The slack allowed is that lag, measured (SpaSite.lag: how late the site's loop ticked
# around the earlier arrival), not guessed: 0.2 s of lag seen at a load average of 47 on 2
# cores, a few ms when quiet. Two requests unpaced arrive within milliseconds of each
# other, and two served at once are caught exactly by `overlaps` (per_host = 1).
#: seconds each /api/ answer takes: longer than DELAY, so a request let go on time but
#: without its host's slot would arrive while the one before is still served
SLOW = 0.4


GLUED = "browser" in getattr(SiteConfig, "__dataclass_fields__", {})


def site_file(folder: Path, base: str, mode: str, **crawl: Any) -> Path:
    browser = {"browser": {"mode": mode, "executable": str(CHROMIUM), "page_timeout": 30}}
    return write_config(folder, [base], scope={"robots": True},
                        crawl={"workers": 2, "parse_processes": 0, "timeout": 10,
                               "delay": DELAY, "per_host": 1, **crawl},
                        **(browser if GLUED else {}))


async def run(folder: Path, base: str, mode: str, clock: Any = None, *,
              check: bool = True, **crawl: Any) -> RunResult:
    cfg = load_config(site_file(folder, base, mode, **crawl))
    crawler = Crawler(cfg, backoff_base=0.01, seed=1, **({"clock": clock} if clock else {}))
    if not GLUED:
        assert CHROMIUM is not None
        crawler.renderer = Renderer(mode, BrowserSettings(CHROMIUM, page_timeout=30)
                                    if mode != "off" else None)
    try:
        result = await asyncio.wait_for(crawler.run(), timeout=240)
        write_report(cfg, crawler.manifest, result.run_id)
        # the browser's version outlives its pool: the run's last log line names it
        assert not crawler.renderer.loads or "hrom" in (crawler.renderer.version or "")
    finally:
        crawler.close()
    assert not check or result.exit_code == ExitCode.OK, result
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
    assert site.too_close(DELAY) == []
    assert site.overlaps() == []  # per_host = 1: the browser's requests take the slot too
    assert site.posts() == 0
    assert not [p for p in site.counts() if p.startswith("/private/")]


async def test_auto_renders_the_app_pages_only_and_archives_their_content(
        tmp_path: Path) -> None:
    with spasite.serve(plain=4, apps=5, slow=SLOW) as site:
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
        if site.requisites(path):  # its footer, from the run's one /api/site.json
            assert spasite.SITE_WORD in words[path], path
    # every subresource was received once in run 1 ...
    assert {p: n for p, n in first.items() if n > 1} == {}
    # ... and at most once more by the incremental run 2, which archives it as a revisit
    assert again.browser_loads == len(apps)
    twice = {p: n for p, n in site.counts().items() if n > 2}
    assert twice == {}
    for path in {r for p in apps for r in site.requisites(p)}:
        assert [k for _, k in archived(tmp_path, run=2).get(path, [])] in (["revisit"], []), path


async def test_a_page_in_the_browser_does_not_wait_for_its_host_to_run_dry(
        tmp_path: Path) -> None:
    """A browser's request goes before the crawl's next URL of its host: a page open in a
    tab waits on it. The one app page is linked halfway down a list of 200 plain pages of
    its host, crawled one request at a time; its requisites arrive while at least a quarter
    of the plain pages are still to come (without the priority, every slot the crawl freed
    went to the next plain page, and the render waited for the last one)."""
    with spasite.serve(plain=200, apps=1, latency=0.05, spread=True) as site:
        await run(tmp_path, site.base, "auto", delay=0.0, workers=4)
    order = [h.path_qs.split("?")[0] for h in sorted(site.hits, key=lambda h: h.at)]
    plain = [n for n, path in enumerate(order) if path.startswith("/plain/")]
    need = order.index("/api/0.json")
    assert len([n for n in plain if n > need]) >= 50, (need, len(plain), order[need - 5:])


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


async def test_a_requisite_answered_503_is_retried_by_the_frontier(tmp_path: Path) -> None:
    """The run's retry rule for what the browser asked for: a 503 (Retry-After: 1) with
    tries left is not stored; the page gets the 503, and the frontier fetches the URL again
    after the hold and archives its 200, once."""
    with spasite.serve(plain=1, apps=1, flaky=frozenset({"/api/0.json"})) as site:
        await run(tmp_path, site.base, "auto")
        polite(site)
    assert site.received("/api/0.json") == 2
    assert archived(tmp_path)["/api/0.json"] == [(200, "response")]


async def test_the_rendered_text_is_searched_and_diffed(tmp_path: Path, capsys: Any) -> None:
    """Run 1 over HTTP only stores the app page's empty shell; run 2 in auto renders it:
    `mirror search` finds words only the scripts wrote, and `mirror diff` shows them added."""
    with spasite.serve(plain=1, apps=1) as site:
        await run(tmp_path, site.base, "off")
        clock = RunClock()
        clock.next_run()
        await run(tmp_path, site.base, "auto", clock=clock)
    config, page = str(tmp_path / "site.toml"), site.base + "app/0"
    [word] = site.words("/app/0")
    assert main(["search", config, word]) == 0
    assert page in capsys.readouterr().out
    assert main(["diff", config, "1", "2", "--page", page]) == 0
    out = capsys.readouterr().out
    added = [part.split("+}")[0] for part in out.split("{+")[1:]]
    assert [a for a in added if word in a], out
