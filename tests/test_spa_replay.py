"""Pages built by scripts (tests/spasite.py), captured by a real `mode = "auto"` crawl in
Debian's chromium, then replayed and exported in a real Chromium: `mirror serve` answers the
pages' own fetch() calls, archived as the browser asked for them (`/api/1.json?_=<the
crawl's Date.now()>`), by the same path under today's cache buster, from the archive
(fuzzy.py, static/fetch.js), so the content shows; `mirror export --to` and `--zim` write
the rendered DOM with its scripts taken out, so the page shows its content from file:// and
in kiwix-serve (a ZIM that zimcheck passes). None sends a request to the site. Screenshots
at 1280 and 390 px are kept in the test's folder to be looked at."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import spasite
from aiohttp import ClientSession
from spacrawl import IMAGES_SHOWN, SCROLL_IMAGES, Captured, captured, settle, shots, stored_urls
from test_browser import chromium

from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex
from mirror.replay.export import plan_export
from mirror.replay.exportpath import export_path
from mirror.replay.serve import Site, make_app
from mirror.webapp import start_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def spa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    with captured(tmp_path_factory.mktemp("spa")) as done:
        yield done


def test_the_captured_requests_are_stored_as_the_browser_asked(spa: Captured) -> None:
    """Each JSON URL with the cache buster of the page load that fetched it (the record
    tells what was requested), once: a later load's other `?_=` was answered from it."""
    urls = stored_urls(spa)
    by_path: dict[str, list[str]] = {}
    for url in urls:
        by_path.setdefault(url.split("?")[0], []).append(url)
    for path in spa.site.app_paths():
        assert spa.url(path) in urls
        for need in spa.site.requisites(path):
            assert spa.url(need) in by_path, f"{need} (of {path}) not archived"
            [stored] = by_path[spa.url(need)]
            if need.startswith("/api/"):
                assert re.fullmatch(re.escape(spa.url(need)) + r"\?_=\d{13}", stored), stored
            else:
                assert stored == spa.url(need)


async def test_serve_answers_the_pages_fetch_calls_from_the_archive(
        spa: Captured, tmp_path: Path) -> None:
    site = spa.site
    runner, base = await start_app(make_app(spa.archive, Site("spa", start_urls=(
        site.base,))), "127.0.0.1", 0)
    try:
        async with ClientSession() as http:  # a cache buster of now, never archived
            async with http.get(f"{base}2999mp_/{spa.url('/api/0.json')}?_=1800000000000",
                                allow_redirects=False) as resp:
                assert resp.status == 200
                assert resp.headers["X-Archive-Fuzzy-Match"].startswith(
                    spa.url("/api/0.json?_="))
                assert "appword0" in await resp.text()
        async with chromium(scale=1) as browser:
            for path in site.app_paths():
                tab = await browser.open(f"{base}2999mp_/{spa.url(path)}")
                await settle(tab, site.words(path))
                await shots(browser, tab, tmp_path, "serve-" + path.strip("/").replace("/", "-"))
                if site.kind(int(path.split("/")[2])) == "lazy":
                    await tab.eval(SCROLL_IMAGES)
                    await tab.wait_for(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}")
            # a route the rendered DOM exposes: pushState keeps the address in the archive
            tab = await browser.open(f"{base}2999mp_/{spa.url('/app/1')}")
            await settle(tab, site.words("/app/1"))
            await tab.eval("document.querySelector('nav a').click()")
            await settle(tab, site.words("/app/1/view/0"))
            # the page shows its archived path, on the server's origin; loaded again, that
            # address leads back to the capture (the page's cookie says which site and time)
            here = await tab.eval("location.href")
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/app/1/view/0", here)
            await tab.goto(here)
            await settle(tab, site.words("/app/1/view/0"))
            # under the banner of a one-origin server, the frame showing /app/0 is asked
            # where it was loaded from: the page above it stays (no navigation to /app/0)
            tab = await browser.open(f"{base}2999/{spa.url('/app/0')}")
            top = await tab.eval("window.stayed = true; location.href")
            await tab.wait_for("document.getElementById('mb-url').title === "
                               f"{spa.url('/app/0')!r}")
            # (the banner may give the address the capture's own time: /2999/ -> /2026.../)
            assert await tab.eval("window.stayed") is True
            assert re.sub(r"/\d+/", "/T/", await tab.eval("location.href"), count=1) == \
                re.sub(r"/\d+/", "/T/", top, count=1)
            # its content comes by the page's fetch(), which may end after the frame's load
            await tab.wait_for("document.getElementById('mirror-frame').contentDocument"
                               ".body.innerText.includes('appword0')")
    finally:
        await runner.cleanup()
    assert spa.replayed_nothing()


async def test_the_export_writes_the_rendered_dom_which_shows_from_file(
        spa: Captured, tmp_path: Path) -> None:
    out = tmp_path / "export"
    assert main(["export", str(spa.folder / "site.toml"), "--to", str(out)]) == 0
    archive = CaptureIndex.load(spa.archive)
    plan = plan_export(archive)
    site = spa.site
    async with chromium(scale=1) as browser:
        for path in site.app_paths():
            page = out / plan[archive.key(spa.url(path))].path
            html = page.read_text()
            assert "<script" not in html.split("</head>", 1)[1]  # the page's scripts are gone
            assert "You need to enable JavaScript" not in html
            tab = await browser.open(page.as_uri())
            await settle(tab, site.words(path))
            await shots(browser, tab, tmp_path, "export-" + path.strip("/").replace("/", "-"))
            if site.kind(int(path.split("/")[2])) == "lazy":
                await tab.wait_for(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}")
    assert spa.replayed_nothing()  # nothing left the file:// pages


async def book_path(base: str, name: str) -> str:
    """Where kiwix-serve serves the book's entries: /content/<name>/, or /<name>/ (3.3)."""
    async with ClientSession() as http, http.get(f"{base}content/{name}/") as resp:
        return f"content/{name}/" if resp.status == 200 else f"{name}/"


async def test_the_zim_holds_the_rendered_dom_which_shows_in_kiwix_serve(
        spa: Captured, tmp_path: Path) -> None:
    pytest.importorskip("libzim", reason="pip install -e '.[zim]'")
    from test_zim import kiwix_serve

    zimcheck = shutil.which("zimcheck")
    if zimcheck is None:
        pytest.skip("zimcheck not installed (Debian zim-tools; .ci/run installs it)")
    out = tmp_path / "spa.zim"
    assert main(["export", str(spa.folder / "site.toml"), "--zim", str(out)]) == 0
    check = subprocess.run([zimcheck, "-A", str(out)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "[ERROR]" not in check.stdout
    site = spa.site
    async with kiwix_serve(out) as base, chromium(scale=1) as browser:
        book = await book_path(base, "spa")
        for path in site.app_paths():
            entry = export_path(spa.url(path), "text/html")
            tab = await browser.open(f"{base}{book}{entry}")
            await settle(tab, site.words(path))
            await shots(browser, tab, tmp_path, "zim-" + path.strip("/").replace("/", "-"))
            if site.kind(int(path.split("/")[2])) == "lazy":
                await tab.wait_for(f"{IMAGES_SHOWN}.length === {spasite.IMAGES}")
    assert spa.replayed_nothing()
