"""Issue 32, findings 1 and 17: the app's token reaches no other server of the machine.

Cookies ignore ports: a cookie set for 127.0.0.1 goes to every server on 127.0.0.1. The
attack: open the app with its token in Chromium, then reach another loopback listener (a
server of another local user) by navigation, by a cross-site <img> and by the favicon
request that follows a cross-site link; that listener must receive no cookie, no token.
And a replay server of the app lets in no one without its own token, on loopback too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from conftest import TestSite
from replayers import chromium
from uiproc import UiProcess, chain_site, crawl, site_file

from mirror.webapp import start_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]
TIMEOUT = 30_000  # ms


class Listener:
    """Another local user's server on a loopback address: it records every request's
    headers; / serves a cross-site page that points at `target`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.target = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.headers)))
        if request.path == "/cross":
            return web.Response(content_type="text/html", text=(
                f'<html><body><img src="{self.target}img.png">'
                f'<a id="go" href="{self.target}link">go</a></body></html>'))
        return web.Response(content_type="text/html", text="<html><body>hi</body></html>")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app


@pytest.fixture
async def listeners() -> AsyncIterator[tuple[Listener, str, str]]:
    """The recording listener on 127.0.0.1 (any free port) and a cross-site page on
    127.0.0.2 that loads an image from it and links to it; their base URLs."""
    listener = Listener()
    near, base = await start_app(listener.app(), "127.0.0.1", 0)
    far, cross = await start_app(listener.app(), "127.0.0.2", 0)
    listener.target = base
    try:
        yield listener, base, cross
    finally:
        await near.cleanup()
        await far.cleanup()


def leaked(seen: list[tuple[str, dict[str, str]]], *secrets: str) -> list[str]:
    """The requests that carried a cookie or any of `secrets` in a header."""
    return [f"{path}: {headers}" for path, headers in seen
            if "Cookie" in headers or any(s in v for s in secrets for v in headers.values())]


async def test_the_apps_cookie_reaches_no_other_loopback_server(
        library: Path, make_site: Callable[[], Awaitable[TestSite]],
        listeners: tuple[Listener, str, str]) -> None:
    listener, other, cross = listeners
    site = chain_site(await make_site(), 2)
    assert await crawl(site_file(library, "kept", site.base)) == 0
    ui = UiProcess.start(library)
    try:
        async with chromium() as browser:
            context = await browser.new_context()
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT)
            await page.goto(f"{ui.base}?token={ui.token}")
            assert await page.title() == "Library · mirror"
            # browse the archive: its replay server's cookie is in the browser too
            await page.goto(f"{ui.base}site/kept/browse?url={site.base}p1.html")
            assert "text 1" in await page.frame_locator("iframe").locator("body").inner_text()
            cookies = {c["name"]: c for c in await context.cookies()}
            app_cookie = cookies["mirror_ui"]
            assert app_cookie["domain"] == ui.base.split("//")[1].split(":")[0]  # host-only
            # serve's fetch.js sets mirror_at on the archived page's origin (which site and
            # time the page's root-relative requests belong to): no secret, and no other
            # server may receive it either (the check below counts any Cookie header)
            assert "mirror_at" in cookies
            secrets = [ui.token, *(c["value"] for n, c in cookies.items() if n != "mirror_at")]
            assert len(secrets) == 3  # the app's and the replay server's, nothing else

            # the way back from the archive (another site) keeps the app open
            await page.click("#mb-library")
            await page.wait_for_url(f"{ui.base}site/kept")

            # the attack: another loopback server, by navigation and from a cross-site page
            for address in (other, other.replace("127.0.0.1", "localhost"),
                            f"{other}favicon.ico"):
                await page.goto(address)
            await page.goto(f"{cross}cross")
            await page.wait_for_function("document.images[0].complete")
            await page.click("#go")
            await page.wait_for_url(f"{other}link")
            await page.wait_for_timeout(500)  # the favicon request that follows a link
            assert {p for p, _ in listener.seen} >= {"/", "/favicon.ico", "/img.png", "/link"}
            assert leaked(listener.seen, *secrets) == []
    finally:
        ui.stop()


async def test_a_replay_server_of_the_app_asks_for_its_token_on_loopback_too(
        library: Path, make_site: Callable[[], Awaitable[TestSite]], ui: UiProcess,
        session: aiohttp.ClientSession) -> None:
    site = chain_site(await make_site(), 2)
    assert await crawl(site_file(library, "kept", site.base)) == 0
    async with session.get(ui.base + "site/kept/browse", allow_redirects=False) as r:
        entry = r.headers["Location"]
    replay = entry.partition("?")[0]
    async with aiohttp.ClientSession() as other_user:  # on the same machine, no cookie
        for path in ("", "99991231235959/" + site.base, "_search?q=text", "_library"):
            async with other_user.get(replay + path, allow_redirects=False) as r:
                assert r.status == 403, path
        # the app's own cookie does not open it either: each server has its own token
        async with other_user.get(replay, headers={"Cookie": f"mirror_ui={ui.cookie}"}) as r:
            assert r.status == 403
        async with other_user.get(entry) as r:
            assert r.status == 200 and "archived pages" in await r.text()



@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder
