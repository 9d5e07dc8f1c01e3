"""`mirror ui` in a real browser (Playwright driving the system Chromium) over a library of
local sites: add one through the form, run, watch, stop, resume, read a report, browse, and
check that an archived page's script cannot act on the app."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import TestSite
from replayers import chromium
from uiproc import UiProcess, archive_runs, chain_site, site_file

from mirror.archive.lock import ArchiveLock

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: MIRROR_SCREENSHOTS=docs writes the README's screenshots; else they stay in tmp_path
SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000  # ms, for any one thing the page should show


def hostile_page(app: str) -> str:
    """An archived page whose script tries the app's API three ways (a read, a no-cors
    POST, a form posted into a frame; the URLs are built at run time, out of the reach of
    link rewriting) and writes what came of each into #result (the test reads it)."""
    return f"""<html><head><title>Hostile</title></head><body><p id="result">pending</p>
<iframe name="sink"></iframe>
<script>
const app = ["{app[:7]}", "{app[7:]}"].join("");
const out = [];
const done = () => {{ document.getElementById("result").textContent = out.join(" "); }};
document.addEventListener("securitypolicyviolation", (e) => {{
  out.push("csp:" + e.violatedDirective); done(); }});
fetch(app, {{credentials: "include"}})
  .then(r => r.text()).then(t => {{ out.push("read:" + t.length); done(); }})
  .catch(() => {{ out.push("read:blocked"); done(); }});
fetch(app + "site/gamma/run", {{method: "POST", mode: "no-cors", credentials: "include",
  body: new URLSearchParams({{csrf: "guess"}})}})
  .then(() => {{ out.push("post:sent"); done(); }})
  .catch(() => {{ out.push("post:blocked"); done(); }});
const form = document.createElement("form");
form.method = "post"; form.target = "sink"; form.action = app + "site/gamma/run";
document.body.appendChild(form);
try {{ form.submit(); }} catch (e) {{ out.push("form:" + e); done(); }}
</script></body></html>"""


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
            await page.fill("#f-crawl\\.workers", "lots")
            await page.click("button:has-text('Add')")
            invalid = page.locator(".field.invalid")
            assert await invalid.count() == 1
            assert "[crawl] workers: expected an integer >= 1, found 'lots'" in \
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
            await page.wait_for_function(
                "document.getElementById('result') && "
                "document.getElementById('result').textContent.split(' ').length >= 3")
            result = await page.inner_text("#result")
            assert "read:blocked" in result and "post:blocked" in result, result
            assert "csp:connect-src" in result and "csp:form-action" in result, result
            await page.wait_for_timeout(1000)  # give a request that got out time to land
            assert archive_runs(library / "archive" / "gamma") == []
            assert ArchiveLock.holder(library / "archive" / "gamma") is None
            await context.close()
    finally:
        ui.stop()
