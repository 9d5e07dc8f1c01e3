"""Every page mirror shows fits a phone (J3): Chromium (Playwright, the system binary) opens
each kind of page of `mirror ui` and of the replay server (`mirror serve`, and `--lan`),
and the exported folder's search page, as a 390x844 phone and a 1280x800 desktop, and
nothing scrolls sideways; a screenshot of each is kept (MIRROR_SCREENSHOTS=DIR, else tmp)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import TestSite
from replayers import chromium
from uiproc import UiProcess, crawl, site_file

from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.serve import Site, start_replay_server
from mirror.webapp import Access

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000  # ms
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
SLUG = "a-rather-long-article-name-about-growing-tomatoes-on-a-small-city-balcony"
ARTICLE = f"/articles/2024/{SLUG}.html"
GONE = f"/archive/2019/an-old-page-that-was-moved-away-long-ago-{SLUG}.html"

#: what overflows the window: the page's width and the elements that stick out on the right
#: (an element inside a box that scrolls on its own does not count)
OVERFLOW_JS = """() => {
  const width = window.innerWidth;
  const inScroller = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p).overflowX;
      if (s === "auto" || s === "scroll" || s === "hidden") return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 1 && !inScroller(el)) {
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
               (el.className && typeof el.className === "string" ? "." + el.className : "") +
               " right=" + Math.round(r.right));
    }
  }
  return {width, scroll: document.documentElement.scrollWidth, out: out.slice(0, 8)};
}"""

#: the banner above an archived page: every link, the time and the search box in sight
BANNER_JS = """() => {
  const banner = document.getElementById("mirror-banner").getBoundingClientRect();
  const hidden = [];
  for (const el of document.querySelectorAll("#mirror-banner > a, #mirror-banner time, "
                                             + "#mirror-banner input")) {
    const r = el.getBoundingClientRect();
    if (r.left < 0 || r.right > window.innerWidth + 1 || r.bottom > banner.bottom + 1
        || r.width === 0) hidden.push((el.id || el.tagName) + " " + Math.round(r.right));
  }
  const frame = document.getElementById("mirror-frame").getBoundingClientRect();
  return {right: banner.right, hidden, frameTop: frame.top, frameHeight: frame.height};
}"""


def garden(site: TestSite, version: int) -> TestSite:
    """A small site with a long article address that links to a long address that is gone
    (the report's broken links), and whose text changes between the two runs."""
    site.page("/", "<html><head><title>Balcony garden</title></head><body><h1>Balcony garden"
                   f'</h1><a href="{ARTICLE}">tomatoes</a> <a href="/herbs.html">herbs</a> '
                   '<a href="/missing.html">missing</a>'
                   "</body></html>")
    extra = " Water them in the evening, never at noon." if version == 2 else ""
    site.page(ARTICLE, "<html><head><title>Growing tomatoes on a balcony</title></head><body>"
                       "<p>Tomatoes want six hours of sun and a deep pot. Pinch out the side "
                       f"shoots every week.{extra}</p>\n<p>Feed them once the first truss "
                       f'has set.</p><a href="/herbs.html">herbs</a> <a href="{GONE}">notes</a>'
                       "</body></html>")
    site.page("/herbs.html", "<html><head><title>Herbs that survive the winter</title></head>"
                             "<body><p>Thyme, sage and rosemary ask for little; tomatoes "
                             "like basil beside them.</p></body></html>")
    return site


@dataclass
class Shots:
    """Opens pages at one size, checks that they fit, keeps a screenshot of each."""

    page: Any
    folder: Path
    size: str
    problems: list[str]

    async def check(self, name: str, url: str | None = None) -> Any:
        if url is not None:
            await self.page.goto(url)
        await self.page.wait_for_load_state()
        await self.page.screenshot(path=str(self.folder / f"{name}-{self.size}.png"),
                                   full_page=True)
        fit = await self.page.evaluate(OVERFLOW_JS)
        viewport = self.page.viewport_size["width"]
        if fit["width"] != viewport:  # no viewport meta: a phone lays it out at 980 px
            self.problems.append(f"{name} at {self.size}: laid out {fit['width']} px wide "
                                 f"in a {viewport} px window")
        if fit["scroll"] > fit["width"] or fit["out"]:
            self.problems.append(f"{name} at {self.size}: {fit['scroll']} px wide in "
                                 f"{fit['width']}; sticking out: {fit['out']}")
        return fit


async def context_for(browser: Any, size: dict[str, int]) -> Any:
    phone = size["width"] < 600
    return await browser.new_context(viewport=size, is_mobile=phone, has_touch=phone,
                                     device_scale_factor=2 if phone else 1)


async def test_every_page_fits_a_phone_and_a_desktop(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    library = tmp_path / "library"
    library.mkdir()
    shots = Path(SHOTS) if SHOTS else tmp_path / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    site = garden(await make_site(), 1)
    assert await crawl(site_file(library, "balcony-garden", site.base)) == 0
    garden(site, 2)
    assert await crawl(site_file(library, "balcony-garden", site.base)) == 0
    site_file(library, "someday", "http://127.0.0.1:9/")  # never run
    archive = library / "archive" / "balcony-garden"
    out = tmp_path / "export"
    export_folder(CaptureIndex.load(archive), out)
    replay_site = Site("balcony-garden", start_urls=(site.base,))
    replay, base = await start_replay_server(archive, replay_site)
    access = Access()
    lan, lan_base = await start_replay_server(archive, replay_site, access=access)
    ui = UiProcess.start(library)
    article = site.base.rstrip("/") + ARTICLE
    problems: list[str] = []
    try:
        async with chromium() as browser:
            for size, label in ((PHONE, "390"), (DESKTOP, "1280")):
                context = await context_for(browser, size)
                page = await context.new_page()
                page.set_default_timeout(TIMEOUT)
                s = Shots(page, shots, label, problems)
                app = ui.base
                await page.goto(f"{app}?token={ui.token}")
                await s.check("app-home")
                await s.check("app-add", app + "add")
                await s.check("app-site", app + "site/balcony-garden")
                await s.check("app-settings", app + "site/balcony-garden/settings")
                await s.check("app-report", app + "site/balcony-garden/runs/1")
                await s.check("app-report-2", app + "site/balcony-garden/runs/2")
                await s.check("app-explain",
                              app + "site/balcony-garden/explain?url=" + quote(article))
                await s.check("app-search", app + "search?q=tomato*")
                await s.check("app-history",
                              app + "site/balcony-garden/history?url=" + quote(article))
                await s.check("app-compare", app + "site/balcony-garden/compare?url="
                              + quote(article) + "&from_run=1&to_run=2")

                await s.check("replay-landing", base)
                await s.check("replay-banner", f"{base}{article}")
                banner = await page.evaluate(BANNER_JS)
                if banner["hidden"] or banner["right"] > size["width"] + 1:
                    problems.append(f"banner at {label}: {banner}")
                if banner["frameHeight"] < size["height"] / 2:
                    problems.append(f"banner at {label}: the page below it is only "
                                    f"{banner['frameHeight']} px high")
                await s.check("replay-history", f"{base}_history?url={quote(article)}")
                await s.check("replay-compare", f"{base}_compare?url={quote(article)}"
                              "&from_run=1&to_run=2")
                await s.check("replay-search", f"{base}_search?q=tomato*")
                await s.check("replay-missing", f"{base}2020/{site.base}nowhere.html")
                await s.check("lan-landing", f"{lan_base}?token={access.token}")
                await s.check("export-contents", (out / "index.html").as_uri())
                await s.check("export-search", (out / "search.html").as_uri() + "?q=tomatoes")
                await context.close()
    finally:
        ui.stop()
        await replay.cleanup()
        await lan.cleanup()
    assert not problems, "\n".join(problems)
    assert len(list(shots.glob("*-390.png"))) == len(list(shots.glob("*-1280.png"))) == 19
