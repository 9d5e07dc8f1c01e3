"""A real browser (headless Chromium over the DevTools protocol) on `mirror serve` and on an
export opened from file:// (O1, O3): styles and images load, redirects lead on, and neither
the archived site nor a second server it references receives a single request."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest

from mirror.browser import BrowserError
from mirror.browser.cdp import CDPConnection
from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.serve import Site, make_app
from mirror.webapp import start_app

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("MIRROR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-default-browser-check", "--no-proxy-server", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--mute-audio", "--window-size=1000,800",
         "--remote-debugging-port=0"]


class Browser:
    """Commands over mirror's DevTools protocol client (mirror/browser/cdp.py), flat sessions."""

    def __init__(self, conn: CDPConnection) -> None:
        self.conn = conn

    async def call(self, method: str, params: dict[str, Any] | None = None,
                   session: str | None = None) -> dict[str, Any]:
        return await self.conn.call(method, params, session, timeout=30)

    async def open(self, url: str) -> Tab:
        target = await self.call("Target.createTarget", {"url": "about:blank"})
        attached = await self.call("Target.attachToTarget",
                                   {"targetId": target["targetId"], "flatten": True})
        tab = Tab(self, attached["sessionId"])
        await tab.goto(url)
        return tab


class Tab:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    async def eval(self, expression: str) -> Any:
        result = await self.browser.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True},
            self.session)
        if "exceptionDetails" in result:
            raise AssertionError(result["exceptionDetails"])
        return result["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.browser.call("Page.navigate", {"url": url}, self.session)
        await self.wait_for("location.href !== 'about:blank' && document.readyState === 'complete'")

    async def wait_for(self, expression: str, timeout: float = 10) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not await self._settled_eval(f"!!({expression})"):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {expression} at "
                                     f"{await self.eval('location.href')}")
            await asyncio.sleep(0.05)

    async def _settled_eval(self, expression: str) -> Any:
        """eval, where a navigation that replaces the page under it (a clicked link) counts
        as "not yet" instead of an error."""
        try:
            return await self.eval(expression)
        except BrowserError as exc:
            if "navigated or closed" in str(exc) or "context was destroyed" in str(exc):
                return False
            raise

    async def screenshot(self, path: Path) -> None:
        shot = await self.browser.call("Page.captureScreenshot", {"format": "png"}, self.session)
        path.write_bytes(base64.b64decode(shot["data"]))


@asynccontextmanager
async def chromium(scale: int = 2) -> AsyncIterator[Browser]:
    """Chromium for the length of the block, its whole process group stopped at the end."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    profile = tempfile.mkdtemp(prefix="mirror-chromium-")
    log = open(os.path.join(profile, "stderr.log"), "wb")  # noqa: SIM115 - closed below
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM, *FLAGS, f"--force-device-scale-factor={scale}", f"--user-data-dir={profile}",
        "about:blank", stdout=asyncio.subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        port_file = Path(profile, "DevToolsActivePort")
        for _ in range(300):
            if port_file.exists() and len(port_file.read_text().split()) == 2:
                break
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().split()
        conn = await CDPConnection.connect(f"ws://127.0.0.1:{port}{path}")
        try:
            yield Browser(conn)
        finally:
            await conn.close()
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.returncode is None:
                os.killpg(proc.pid, sig)
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except TimeoutError:
                    continue
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


PAGE_STATE = """(async () => {
  await Promise.all([...document.images].map(i => i.complete ? null :
    new Promise(r => { i.onload = i.onerror = r; })));
  const image = el => el && [el.currentSrc.split('/').pop(), el.naturalWidth];
  const loads = url => new Promise(r => { const i = new Image();
    i.onload = () => r(i.naturalWidth); i.onerror = () => r(0); i.src = url; });
  const bg = sel => getComputedStyle(document.querySelector(sel)).backgroundImage
    .replace(/^url\\("?|"?\\)$/g, '');
  return {title: document.title, a: image(document.getElementById('a')),
    gone: image(document.getElementById('gone')),
    body: getComputedStyle(document.body).backgroundColor,
    h1: getComputedStyle(document.querySelector('h1')).color,
    backgrounds: [await loads(bg('body')), await loads(bg('.hero')),
                  await loads(bg('div[style]'))]};
})()"""


def assert_rendered(state: dict[str, Any]) -> None:
    assert state["title"] == "Home page"
    assert state["body"] == f"rgb{site_def.BODY_RGB}"  # main.css
    assert state["h1"] == f"rgb{site_def.H1_RGB}"  # type.css, through @import
    assert state["a"] == ["a2.png", 4]  # the srcset 2x candidate: 8 px at density 2
    assert state["backgrounds"] == [2, 8, 4]  # url() in a stylesheet, <style>, style=""
    assert state["gone"] is None or state["gone"][1] == 0  # not archived: never loaded


async def test_replay_and_export_render_in_a_browser_and_stay_offline(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    # crawled in "auto": the home page is loaded in Chromium, which fetches main.css through
    # mirror and, as the live page's integrity="sha256-AAAA" rejects it, never asks for its
    # @import (type.css) nor its url() (bg.png); the crawl still follows them from main.css
    site, other, done = await site_def.crawl_site(make_site, crawl, browser="auto")
    assert done.result.browser_loads == 1
    crawled = len(site.log)
    out = tmp_path / "export"
    export_folder(CaptureIndex.load(done.archive), out)
    home = next(out.glob("http_*")) / "index.html"
    # one origin: the archived page top-level, as on --lan (under `mirror serve`'s banner it
    # is a frame of another origin: test_frames.py)
    runner, base = await start_app(make_app(done.archive, Site("test", start_urls=(
        site.base,))), "127.0.0.1", 0)
    try:
        async with chromium() as browser:
            tab = await browser.open(base)
            await tab.screenshot(tmp_path / "landing.png")
            href = await tab.eval("document.querySelector('td a').getAttribute('href')")
            # the archived page itself: /<ts>/<url> is the frame page with the banner above it
            # (test_serve_history.py); its frame, /<ts>mp_/<url>, is the page
            await tab.goto(base.rstrip("/") + re.sub(r"^/(\d+)/", r"/\1mp_/", href))
            assert_rendered(await tab.eval(PAGE_STATE))
            await tab.goto(f"{base}2999mp_/{site.base}old")  # an archived 301
            await tab.wait_for("document.title === 'About us'")
            # the page shows its archived path as its address (static/fetch.js)
            assert await tab.eval("location.pathname") == "/about"
            await tab.eval("document.querySelector('a').click()")  # back home, by a link
            await tab.wait_for("document.title === 'Home page'")

            await tab.goto(home.as_uri())
            assert_rendered(await tab.eval(PAGE_STATE))
            await tab.goto((home.parent / "old=.html").as_uri())  # a redirect page
            await tab.wait_for("location.href.endsWith('about=.html')")
            await tab.wait_for("document.title === 'About us'")
            await tab.goto((out / "index.html").as_uri())
            assert "Home page" in await tab.eval("document.body.innerText")
    finally:
        await runner.cleanup()
    assert (tmp_path / "landing.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(site.log) == crawled  # replay never went to the live site ...
    assert other.log == []  # ... nor to the server its pages reference (links, CSS, fetch())
