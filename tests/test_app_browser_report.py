"""The app's report page tells of pages built by scripts: the pages loaded in a browser and
the failed renders, and for pages left as fetched how to have them loaded in one (a run in
`auto` on a system without a browser). Seen in a real browser at 1280 and 390 px wide."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import spasite
from conftest import crawl_to_end
from replayers import chromium
from uiproc import UiProcess, site_file

from mirror.browser import find
from mirror.browserconfig import install_command, this_system
from mirror.config import load_config

pytestmark = [pytest.mark.slow, pytest.mark.browser]
CHROMIUM = find.find_browser()
if CHROMIUM is None:
    pytestmark.append(pytest.mark.skip(reason="no Chromium-family browser installed"))
SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000


def with_browser(path: Path, **keys: object) -> Path:
    """The site file's [browser] section (uiproc.site_file writes mode = "off") replaced."""
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in keys.items()]
    text = path.read_text().replace('[browser]\nmode = "off"\n', "")
    path.write_text(text + "\n[browser]\n" + "\n".join(lines) + "\n")
    return path


async def test_the_report_page_tells_of_pages_built_by_scripts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "library"
    library.mkdir()
    shots = Path(SHOTS) if SHOTS else tmp_path
    with spasite.serve(plain=2, apps=3) as site:
        slow = with_browser(site_file(library, "spa", site.base, workers=2, parse_processes=0),
                            mode="auto", executable=str(CHROMIUM), page_timeout=30)
        await crawl_to_end(load_config(slow), timeout=240)
        bare = with_browser(site_file(library, "bare", site.base, workers=2,
                                      parse_processes=0), mode="auto")
        with monkeypatch.context() as patch:  # a system with no browser
            empty = tmp_path / "bin"
            empty.mkdir()
            patch.setenv("PATH", str(empty))
            patch.setattr(find, "PLACES", ())
            await crawl_to_end(load_config(bare), timeout=120)
    ui = UiProcess.start(library)
    try:
        async with chromium() as browser:
            for width in (1280, 390):
                context = await browser.new_context(viewport={"width": width, "height": 900})
                page = await context.new_page()
                page.set_default_timeout(TIMEOUT)
                await page.goto(f"{ui.base}?token={ui.token}")

                await page.goto(f"{ui.base}site/spa/runs/1")
                await page.wait_for_selector("h2#browser")
                assert await page.inner_text(".browser-loaded") == \
                    f"{len(site.app_paths())} pages loaded in a browser"
                assert await page.locator(".browser-needing").count() == 0
                await page.screenshot(path=str(shots / f"app-report-browser-{width}.png"),
                                      full_page=True)

                await page.goto(f"{ui.base}site/bare/runs/1")
                await page.wait_for_selector("h2#browser")
                note = await page.inner_text(".browser-needing")
                assert note.startswith("3 pages need a browser (scripts build them) and none "
                                       "was found: install a Chromium-family browser "
                                       f"({install_command(*this_system())}) or set [browser] "
                                       "executable"), note
                rows = page.locator("table.browser-needs td.url")
                assert sorted([await r.inner_text() for r in await rows.all()]) == \
                    [site.base.rstrip("/") + p for p in site.linked_app_paths()]
                # nothing runs off the page at a phone's width
                assert await page.evaluate(
                    "document.documentElement.scrollWidth <= window.innerWidth + 1")
                await page.screenshot(path=str(shots / f"app-report-nobrowser-{width}.png"),
                                      full_page=True)
                await context.close()
    finally:
        ui.stop()
