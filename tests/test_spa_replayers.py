"""Pages built by scripts (tests/spasite.py), captured by a real `mode = "auto"` crawl, replay
with their content in the other readers of our archive, in a real Chromium driven by
Playwright: pywb (over the archive folder: index.cdxj and warc/) and ReplayWeb.page (over
`mirror export --wacz`). Each page's scripts run there again: their fetch() calls carry a
cache-busting `?_=<Date.now()>` of today, and the capture stored the one the crawl's browser
asked for (`/api/1.json?_=<then>`), so each reader matches the query back by its own fuzzy
rules (pywb's url_normalize `[?&](_|cb|uncache)=\\d+` on both URLs; wabac.js's fuzzy
lookup, which searches only archived URLs beginning with `/api/1.json?`). The JSON content,
the lazy images and the three batches of the infinite scroll show; neither reader asks the
site for anything. Screenshots at 1280 and 390 px are kept in the test's folder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import replayers
import spasite
from spacrawl import IMAGES_SHOWN, SCROLL_IMAGES, WIDTHS, Captured, captured
from test_pywb import pywb

from mirror.cli.main import main

pytestmark = [pytest.mark.interop, pytest.mark.browser]


@pytest.fixture(scope="module")
def spa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    replayers.require_browser()
    with captured(tmp_path_factory.mktemp("spa")) as done:
        yield done


async def settle(frame: Any, words: list[str], tries: int = 60) -> None:
    """Scroll the frame to its end (the feed loads as its bottom shows) until every word
    shows."""
    text = ""
    for _ in range(tries):
        try:
            text = await frame.evaluate("document.body ? document.body.innerText : ''")
            if all(w in text for w in words):
                return
            await frame.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        except Exception:  # noqa: BLE001 - the frame is still navigating: look again
            pass
        await asyncio.sleep(0.25)  # a page load's worth of turns (not a timing assertion)
    raise AssertionError(f"{frame.url}: not shown: {[w for w in words if w not in text]}")


async def look(page: Any, frame: Any, site: spasite.SpaSite, path: str, folder: Path,
               name: str) -> None:
    """The page's words and lazy images show in `frame`; screenshots at 1280 and 390 px."""
    await settle(frame, site.words(path))
    if site.kind(int(path.split("/")[2])) == "lazy":
        await frame.evaluate(SCROLL_IMAGES)
        await frame.wait_for_function(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}",
                                      timeout=replayers.TIMEOUT * 1000)
    for label, (width, height, _) in WIDTHS.items():
        await page.set_viewport_size({"width": width, "height": height})
        await frame.evaluate("window.scrollTo(0, 0)")
        await page.screenshot(path=str(folder / f"{name}-{path.strip('/').replace('/', '-')}"
                                                f"-{label}.png"))


async def replayed(page: Any) -> Any:
    """The frame showing the archived page: pywb shows a page opened at its mp_ address
    in its own frame, under its banner (the top-level page at /<ts>/<url>)."""
    deadline = asyncio.get_running_loop().time() + replayers.TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        for frame in page.frames:
            if "mp_/" in frame.url:
                return frame
        await asyncio.sleep(0.1)
    raise AssertionError(f"no replay frame in {[f.url for f in page.frames]}")


@asynccontextmanager
async def tab(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield await context.new_page()
    finally:
        await context.close()


#: the embed as large as the window (the screenshots are of the replayed page)
FULL_SIZE = """() => { const e = document.querySelector("replay-web-page");
  e.style.width = "100vw"; e.style.height = "100vh"; }"""
#: the embed replays another URL of the WACZ, as a reader following a link would
SHOW_URL = """(url) => document.querySelector("replay-web-page").setAttribute("url", url)"""


async def shown(page: Any, prefix: str, url: str) -> Any:
    """ReplayWeb.page's frame replaying `url` (its address: <prefix><ts>mp_/<url>)."""
    deadline = asyncio.get_running_loop().time() + replayers.TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        for frame in page.frames:
            if frame.url.startswith(prefix) and frame.url.endswith("/" + url):
                return frame
        await asyncio.sleep(0.1)
    raise AssertionError(f"ReplayWeb.page shows no {url}: {[f.url for f in page.frames]}")


async def test_pywb_replays_the_browser_captured_pages_with_their_content(
        spa: Captured, tmp_path: Path) -> None:
    site = spa.site
    async with pywb({"spa": spa.archive}, tmp_path / "pywb") as base, \
            replayers.chromium() as browser:
        for path in site.app_paths():
            async with tab(browser) as page:
                await page.goto(f"{base}spa/2999mp_/{spa.url(path)}",
                                timeout=replayers.TIMEOUT * 1000)
                await look(page, await replayed(page), site, path, tmp_path, "pywb")
    assert spa.replayed_nothing()


async def test_replaywebpage_replays_the_browser_captured_pages_with_their_content(
        spa: Captured, tmp_path: Path) -> None:
    site = spa.site
    wacz = tmp_path / "spa.wacz"
    assert main(["export", str(spa.folder / "site.toml"), "--wacz", str(wacz)]) == 0
    async with replayers.replaywebpage_server(wacz, spa.url("/app/0")) as base, \
            replayers.chromium() as browser:
        async with replayers.replaywebpage_context(browser, base) as loaded:
            page = loaded.frame.page
            await page.evaluate(FULL_SIZE)
            for path in site.app_paths():
                await page.evaluate(SHOW_URL, spa.url(path))
                frame = await shown(page, f"{loaded.prefix}", spa.url(path))
                await look(page, frame, site, path, tmp_path, "replayweb")
    assert spa.replayed_nothing()
