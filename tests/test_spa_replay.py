"""Pages built by scripts (tests/spasite.py), replayed and exported in a real Chromium:
`mirror serve` answers the pages' own fetch() calls, whose cache-busting `?_=<Date.now()>`
never matches the stored one, from the archive (fuzzy.py, static/fetch.js), so the content
shows; the export writes the rendered DOM with its scripts taken out, so the page shows its
content from file://. Neither sends a request to the site. Screenshots at 1280 and 390 px
are kept in the test's folder (tmp_path) to be looked at."""

from __future__ import annotations

import asyncio
import gzip
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import spasite
from test_browser import Browser, Tab, chromium

from mirror.replay.captures import CaptureIndex
from mirror.replay.export import FolderWriter, plan_export
from mirror.replay.renders import DomRef, RenderedPages
from mirror.replay.serve import Site, make_app
from mirror.webapp import start_app

pytestmark = pytest.mark.browser

#: the time the test crawl's scripts asked for their JSON (a cache-busting value of then)
THEN = "1700000000000"
WIDTHS = {"wide": (1280, 900, False), "phone": (390, 844, True)}


def requisites(site: spasite.SpaSite) -> list[str]:
    """What a browser capture stores for the app pages: the pages, and each request their
    scripts made, with the cache-busting value it had then."""
    out = []
    for path in site.app_paths():
        out.append(site.base.rstrip("/") + path)
        for req in site.requisites(path):
            query = f"?_={THEN}" if req.startswith("/api/") else ""
            out.append(site.base.rstrip("/") + req + query)
    return sorted(set(out))


async def settle(tab: Tab, words: list[str]) -> None:
    """Scroll to the end (the feed loads as its bottom shows) until every word is shown."""
    for _ in range(40):
        text = await tab.eval("document.body.innerText")
        if all(w in text for w in words):
            return
        await tab.eval("window.scrollTo(0, document.body.scrollHeight)")
        await asyncio.sleep(0.25)  # a page load's worth of turns (not a timing assertion)
    missing = [w for w in words if w not in await tab.eval("document.body.innerText")]
    raise AssertionError(f"{await tab.eval('location.href')}: not shown: {missing}")


async def shots(browser: Browser, tab: Tab, folder: Path, name: str) -> None:
    for label, (width, height, mobile) in WIDTHS.items():
        await browser.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            tab.session)
        await tab.eval("window.scrollTo(0, 0)")
        await tab.screenshot(folder / f"{name}-{label}.png")
    await browser.call("Emulation.clearDeviceMetricsOverride", {}, tab.session)


IMAGES_SHOWN = ("[...document.images].filter(i => i.complete && i.naturalWidth > 0)"
                ".map(i => i.getAttribute('src'))")
#: each image scrolled into view in turn, as a reader would (the lazy ones load then)
SCROLL_IMAGES = """(async () => { for (const i of document.images) { i.scrollIntoView();
  await new Promise(r => setTimeout(r, 150)); } })()"""


@pytest.fixture
def spa() -> Iterator[spasite.SpaSite]:
    with spasite.serve(plain=1, apps=5) as site:
        yield site


async def test_serve_answers_the_pages_fetch_calls_from_the_archive(
        spa: spasite.SpaSite, crawl: Any, tmp_path: Path) -> None:
    done = await crawl([spa.base, *requisites(spa)],
                       crawl={"workers": 2, "parse_processes": 0})
    crawled = len(spa.hits)
    runner, base = await start_app(make_app(done.archive, Site("spa", start_urls=(
        spa.base,))), "127.0.0.1", 0)
    try:
        async with chromium(scale=1) as browser:
            for path in spa.app_paths():
                tab = await browser.open(f"{base}2999mp_/{spa.base.rstrip('/')}{path}")
                await settle(tab, spa.words(path))
                name = path.strip("/").replace("/", "-")
                await shots(browser, tab, tmp_path, f"serve-{name}")
                if spa.kind(int(path.split("/")[2])) == "lazy":
                    await tab.eval(SCROLL_IMAGES)
                    await tab.wait_for(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}")
            # a route the rendered DOM exposes: pushState keeps the address in the archive
            tab = await browser.open(f"{base}2999mp_/{spa.base}app/1")
            await settle(tab, spa.words("/app/1"))
            await tab.eval("document.querySelector('nav a').click()")
            await settle(tab, spa.words("/app/1/view/0"))
            # the page shows its archived path, on the server's origin; loaded again, that
            # address leads back to the capture (the page's cookie says which site and time)
            here = await tab.eval("location.href")
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/app/1/view/0", here)
            await tab.goto(here)
            await settle(tab, spa.words("/app/1/view/0"))
    finally:
        await runner.cleanup()
    assert len(spa.hits) == crawled  # the replay never asked the site for anything


def write_dom(warc: Path, url: str, dom: str) -> DomRef:
    """A conversion record holding a rendered DOM, as the browser capture stores it (until
    the crawl writes them: issue 35's CaptureStore.store(rendered=))."""
    block = dom.encode()
    head = ("WARC/1.1\r\nWARC-Type: conversion\r\n"
            f"WARC-Record-ID: <urn:uuid:{uuid.uuid4()}>\r\nWARC-Target-URI: {url}\r\n"
            "WARC-Date: 2026-01-01T00:00:00Z\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(block)}\r\n\r\n").encode()
    member = gzip.compress(head + block + b"\r\n\r\n")
    with open(warc, "ab") as f:
        offset = f.tell()
        f.write(member)
    return DomRef(warc.name, offset, len(member))


async def test_the_export_writes_the_rendered_dom_which_shows_from_file(
        spa: spasite.SpaSite, crawl: Any, tmp_path: Path) -> None:
    async with chromium(scale=1) as browser:  # the DOMs, as the browser capture reads them
        doms = {}
        for path in spa.linked_app_paths():
            tab = await browser.open(spa.base.rstrip("/") + path)
            await settle(tab, spa.words(path))
            doms[path] = await tab.eval(
                "'<!doctype html>' + document.documentElement.outerHTML")
    done = await crawl([spa.base, *requisites(spa)],
                       crawl={"workers": 2, "parse_processes": 0})
    crawled = len(spa.hits)
    archive = CaptureIndex.load(done.archive)
    refs = {}
    for path, dom in doms.items():
        cap = archive.captures_of(spa.base.rstrip("/") + path)[-1]
        refs[(cap.filename, cap.offset)] = write_dom(done.archive / "warc" / "dom.warc.gz",
                                                     cap.url, dom)
    out = tmp_path / "export"
    out.mkdir()
    plan = plan_export(archive)
    writer = FolderWriter(archive, plan, out)
    writer.rendered = RenderedPages(refs)
    writer.run()
    async with chromium(scale=1) as browser:
        for path in spa.linked_app_paths():
            page = out / plan[archive.key(spa.base.rstrip("/") + path)].path
            html = page.read_text()
            assert "<script" not in html.split("</head>", 1)[1]  # the page's scripts are gone
            assert "You need to enable JavaScript" not in html
            tab = await browser.open(page.as_uri())
            await settle(tab, spa.words(path))
            await shots(browser, tab, tmp_path, "export-" + path.strip("/").replace("/", "-"))
            if spa.kind(int(path.split("/")[2])) == "lazy":
                await tab.wait_for(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}")
    assert len(spa.hits) == crawled  # nothing left the file:// pages
