"""`mirror ui` in a real browser (Playwright driving the system Chromium) over a library of
local sites: add one through the form, run, watch, stop, resume, read a report, browse, and
check that an archived page's script cannot act on the app; search every site's pages."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TestSite
from replayers import chromium
from uiproc import UiProcess, archive_runs, chain_site, crawl, site_file

from mirror.archive.lock import ArchiveLock

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: MIRROR_SCREENSHOTS=docs writes the README's screenshots; else they stay in tmp_path
SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000  # ms, for any one thing the page should show


def hostile_page(app: str) -> str:
    """An archived page whose script tries the app's API three ways (a read, a no-cors
    POST, a form posted into a frame; the URLs are built at run time, out of the reach of
    link rewriting) and writes what came of each into #result (the test reads it).

    The read and the POST use a pristine fetch() taken from a new blank frame: serve's
    static/fetch.js sends a page's own fetch() calls into the archive on replay's origin,
    and a hostile script gets around that wrapper this way, so the guard that must hold is
    the page's Content-Security-Policy (a blank frame inherits it)."""
    return f"""<html><head><title>Hostile</title></head><body><p id="result">pending</p>
<iframe name="sink"></iframe>
<script>
const app = ["{app[:7]}", "{app[7:]}"].join("");
const out = [];
const done = () => {{ document.getElementById("result").textContent = out.join(" "); }};
document.addEventListener("securitypolicyviolation", (e) => {{
  out.push("csp:" + e.violatedDirective); done(); }});
const blank = document.createElement("iframe");
document.body.appendChild(blank);
const pristine = blank.contentWindow.fetch.bind(blank.contentWindow);
blank.contentWindow.document.addEventListener("securitypolicyviolation", (e) => {{
  out.push("csp:" + e.violatedDirective); done(); }});
pristine(app, {{credentials: "include"}})
  .then(r => r.text()).then(t => {{ out.push("read:" + t.length); done(); }})
  .catch(() => {{ out.push("read:blocked"); done(); }});
pristine(app + "site/gamma/run", {{method: "POST", mode: "no-cors", credentials: "include",
  body: new URLSearchParams({{csrf: "guess"}})}})
  .then(() => {{ out.push("post:sent"); done(); }})
  .catch(() => {{ out.push("post:blocked"); done(); }});
const form = document.createElement("form");
form.method = "post"; form.target = "sink"; form.action = app + "site/gamma/run";
document.body.appendChild(form);
try {{ form.submit(); }} catch (e) {{ out.push("form:" + e); done(); }}
</script></body></html>"""


async def archived_page(page: Any) -> Any:
    """The archived page a replay address shows: in the frame below the replay server's
    banner (a browser's top-level page gets one), else the page itself."""
    await page.wait_for_load_state()
    frame = await page.query_selector("iframe#mirror-frame")
    if frame is None:
        return page.main_frame
    inner = await frame.content_frame()
    await inner.wait_for_load_state()
    return inner


async def test_the_library_app_in_a_browser(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    library = tmp_path / "library"
    library.mkdir()
    shots = Path(SHOTS) if SHOTS else tmp_path
    slow = chain_site(await make_site(), 60)
    slow.latency = 0.2
    small = chain_site(await make_site(), 4)
    hostile = await make_site()
    site_file(library, "alpha", slow.base, per_host=1, workers=1)
    beta = site_file(library, "beta", small.base)
    site_file(library, "gamma", "http://127.0.0.1:9/")  # never run
    proc = await asyncio.create_subprocess_exec(  # the test site runs on this loop
        sys.executable, "-m", "mirror", "run", "-q", str(beta),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    ui = UiProcess.start(library)
    try:
        hostile.page("/", hostile_page(ui.base))
        async with chromium() as browser:
            context = await browser.new_context(viewport={"width": 1360, "height": 720})
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT)
            page.on("dialog", lambda dialog: dialog.accept())
            await page.goto(f"{ui.base}?token={ui.token}")
            assert await page.title() == "Library · mirror"
            assert await page.locator("tr.site").count() == 3

            # add a site through the form: a bad value is shown at its field
            await page.click("text=Add a site")
            await page.fill("#f-site\\.start_urls", hostile.base)
            await page.fill("#f-site\\.name", "hostile")
            await page.fill("#f-crawl\\.workers", "0")  # a number input: no text in it
            await page.click("button:has-text('Add')")
            invalid = page.locator(".field.invalid")
            assert await invalid.count() == 1
            assert "[crawl] workers: expected an integer from 1 to 1,000, found 0 (an integer)" in \
                await invalid.inner_text()
            await page.fill("#f-crawl\\.workers", "2")
            await page.click("button:has-text('Add')")
            await page.wait_for_url(re.compile(r"/site/hostile"))
            assert (library / "hostile.toml").exists()

            # run alpha and watch its numbers move without reloading
            await page.goto(ui.base)
            row = page.locator("#site-alpha")
            await row.locator("button:has-text('Run now')").click()
            await page.wait_for_selector("#site-alpha .done")
            seen: list[int] = []
            while len(set(seen)) < 4:
                text = await page.locator("#site-alpha .done").inner_text(timeout=TIMEOUT)
                seen.append(int(text))
                await page.wait_for_timeout(300)
            assert seen == sorted(seen)
            await page.screenshot(path=str(shots / "app-home.png"))

            # stop it (graceful), then resume it to the end
            await page.locator("#site-alpha button:has-text('Stop')").click()
            await page.wait_for_selector("#site-alpha .badge:has-text('interrupted')",
                                         timeout=TIMEOUT)
            assert [(r.state, r.exit_code) for r in archive_runs(library / "archive" / "alpha")] \
                == [("interrupted", 130)]
            await page.locator("#site-alpha button:has-text('Resume')").click()
            await page.wait_for_selector("#site-alpha .badge:has-text('idle')", timeout=60_000)
            runs = archive_runs(library / "archive" / "alpha")
            assert [(r.id, r.state, r.exit_code) for r in runs] == [(1, "complete", 0)]

            # the run's report
            await page.locator("#site-alpha a:has-text('run 1')").click()
            await page.wait_for_selector("h2#broken")
            body = await page.inner_text("main")
            assert "Broken links (3)" in body and "New (64)" in body
            await page.screenshot(path=str(shots / "app-report.png"))

            # browse a page: it replays from another origin
            await page.locator("#new + ul a", has_text="p7.html").click()
            await page.wait_for_load_state()
            assert not page.url.startswith(ui.base) and "/p7.html" in page.url
            assert await page.title() == "Page 7"

            # the hostile site: archive it, browse it, and its script gets nowhere
            await page.goto(ui.base + "site/hostile")
            await page.locator("#site-hostile button:has-text('Run now')").click()
            await page.wait_for_selector("#site-hostile .badge:has-text('idle')", timeout=60_000)
            await page.goto(ui.base + "site/hostile/browse?url=" + hostile.base)
            frame = await archived_page(page)
            await frame.wait_for_function(
                "document.getElementById('result') && "
                "document.getElementById('result').textContent.split(' ').length >= 3")
            result = await frame.inner_text("#result")
            assert "read:blocked" in result and "post:blocked" in result, result
            assert "csp:connect-src" in result and "csp:form-action" in result, result
            await page.wait_for_timeout(1000)  # give a request that got out time to land
            assert archive_runs(library / "archive" / "gamma") == []
            assert ArchiveLock.holder(library / "archive" / "gamma") is None
            await context.close()
    finally:
        ui.stop()


GARDEN = {
    "/tomatoes.html": ("Growing tomatoes on a balcony",
                       "Tomatoes want six hours of sun and a deep pot. Pinch out the side "
                       "shoots of cordon tomatoes every week, and feed them once the first "
                       "truss has set."),
    "/compost.html": ("Compost in small spaces",
                      "A bokashi bin takes kitchen scraps, tomato stems included, and turns "
                      "them into something your pots will thank you for."),
    "/herbs.html": ("Herbs that survive the winter", "Thyme, sage and rosemary ask for little."),
}
KITCHEN = {
    "/recipes/tomato-soup.html": ("Roasted tomato soup",
                                  "Roast the tomatoes with garlic and thyme until their skins "
                                  "split, then blend with stock."),
    "/recipes/salsa.html": ("Fresh salsa",
                            "Dice four ripe tomatoes, half an onion and a chilli; coriander "
                            "and lime at the end."),
    "/recipes/bread.html": ("A weekday loaf", "Flour, water, salt and a little yeast."),
}


def pages_site(site: TestSite, pages: dict[str, tuple[str, str]]) -> TestSite:
    links = "".join(f'<li><a href="{p}">article {i}</a></li>' for i, p in enumerate(pages))
    site.page("/", f"<html><head><title>Index</title></head><body><ul>{links}</ul></body></html>")
    for path, (title, text) in pages.items():
        site.page(path, f"<html><head><title>{title}</title></head><body><p>{text}</p>"
                        "</body></html>")
    return site


async def test_searching_the_library_in_a_browser(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    library = tmp_path / "library"
    library.mkdir()
    shots = Path(SHOTS) if SHOTS else tmp_path
    for name, pages in (("garden-notes", GARDEN), ("kitchen", KITCHEN)):
        site = pages_site(await make_site(), pages)
        assert await crawl(site_file(library, name, site.base)) == 0
    site_file(library, "someday", "http://127.0.0.1:9/")  # never run: not searched
    ui = UiProcess.start(library)
    try:
        async with chromium() as browser:
            context = await browser.new_context(viewport={"width": 1360, "height": 720})
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT)
            await page.goto(f"{ui.base}?token={ui.token}")
            await page.fill("form.search input[name=q]", "tomato*")
            await page.press("form.search input[name=q]", "Enter")
            await page.wait_for_selector("ol.hits")
            assert await page.title() == "tomato* · Search · mirror"
            hits = page.locator("li.hit")
            assert await hits.count() == 4
            # a title match first; both sites; the words marked
            assert await hits.nth(0).locator(".hit-title mark").count() == 1
            tags = {await t.inner_text() for t in await page.locator(".site-tag").all()}
            assert tags == {"garden-notes", "kitchen"}
            marks = {(await m.inner_text()).lower()
                     for m in await page.locator("li.hit mark").all()}
            assert marks == {"tomato", "tomatoes"}
            await page.screenshot(path=str(shots / "app-search.png"), full_page=True)

            # a result opens the capture in its site's replay server
            soup = page.locator("li.hit a.open", has_text="Roasted tomato soup")
            await soup.click()
            await page.wait_for_load_state()
            assert not page.url.startswith(ui.base) and page.url.endswith(
                "/recipes/tomato-soup.html")
            assert await page.title() == "Roasted tomato soup"
            archived = await archived_page(page)
            assert "until their skins split" in await archived.inner_text("body")
            await context.close()
    finally:
        ui.stop()
