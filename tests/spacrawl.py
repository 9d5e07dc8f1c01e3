"""The SPA fixture (tests/spasite.py) captured by a real `mode = "auto"` crawl (Debian's
chromium), for the replay and export tests: `captured()` runs the site and crawls it once;
the site keeps running, so a test can check that a replay asks it for nothing. Also what
those tests share to look at a page in a browser: settle (scroll until every word shows)
and screenshots at 1280 and 390 px.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import spasite
from conftest import crawl_to_end, write_config

from mirror.browser import find_browser
from mirror.config import load_config
from mirror.model import ExitCode
from mirror.replay.captures import CaptureIndex

CHROMIUM = find_browser()
WIDTHS = {"wide": (1280, 900, False), "phone": (390, 844, True)}
#: the app's own images that show (a replayer's toolbar may add images of its own)
IMAGES_SHOWN = ("[...document.querySelectorAll('#root img')]"
                ".filter(i => i.complete && i.naturalWidth > 0).map(i => i.getAttribute('src'))")
#: each image scrolled into view in turn, as a reader would (the lazy ones load then)
SCROLL_IMAGES = """(async () => { for (const i of document.images) { i.scrollIntoView();
  await new Promise(r => setTimeout(r, 150)); } })()"""


@dataclass
class Captured:
    site: spasite.SpaSite
    folder: Path  # holds site.toml and archive/
    crawled: int  # requests the site received from the crawl

    @property
    def archive(self) -> Path:
        return self.folder / "archive"

    def url(self, path: str) -> str:
        return self.site.base.rstrip("/") + path

    def replayed_nothing(self) -> bool:
        """The site received no request since the crawl."""
        return len(self.site.hits) == self.crawled


@contextmanager
def captured(folder: Path, plain: int = 1, apps: int = len(spasite.KINDS)) -> Iterator[Captured]:
    """The site, crawled to the end by `mirror run` with `[browser] mode = "auto"`."""
    if CHROMIUM is None:
        pytest.skip("no Chromium-family browser installed")
    with spasite.serve(plain=plain, apps=apps) as site:
        cfg = load_config(write_config(
            folder, [site.base], scope={"robots": True},
            crawl={"workers": 2, "parse_processes": 0, "timeout": 10},
            browser={"mode": "auto", "executable": str(CHROMIUM), "page_timeout": 60}))
        result = asyncio.run(crawl_to_end(cfg, timeout=300))
        assert result.exit_code == ExitCode.OK, result
        assert result.browser_loads == len(site.app_paths())
        yield Captured(site, folder, len(site.hits))


def stored_urls(done: Captured) -> set[str]:
    return {c.url for c in CaptureIndex.load(done.archive).latest()}


async def settle(tab: Any, words: list[str], tries: int = 40) -> None:
    """Scroll to the end (the feed loads as its bottom shows) until every word is shown;
    `tab` has `eval(js)` (tests/test_browser.py's Tab)."""
    for _ in range(tries):
        text = await tab.eval("document.body.innerText")
        if all(w in text for w in words):
            return
        await tab.eval("window.scrollTo(0, document.body.scrollHeight)")
        await asyncio.sleep(0.25)  # a page load's worth of turns (not a timing assertion)
    missing = [w for w in words if w not in await tab.eval("document.body.innerText")]
    raise AssertionError(f"{await tab.eval('location.href')}: not shown: {missing}")


async def shots(browser: Any, tab: Any, folder: Path, name: str) -> None:
    """Screenshots of the tab at 1280 and 390 px, into `folder`."""
    for label, (width, height, mobile) in WIDTHS.items():
        await browser.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            tab.session)
        await tab.eval("window.scrollTo(0, 0)")
        await tab.screenshot(folder / f"{name}-{label}.png")
    await browser.call("Emulation.clearDeviceMetricsOverride", {}, tab.session)
