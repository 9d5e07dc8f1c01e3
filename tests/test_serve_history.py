"""`mirror serve` over two runs of a site whose one page changed: the newest capture by
default, the frame page and its banner, the mp_ page, history, compare and search."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup
from conftest import TestSite, crawl_twice
from warcio.timeutils import timestamp_to_iso_date

from mirror.manifest.reader import ManifestReader
from mirror.replay.captures import CaptureIndex
from mirror.replay.pages import FRAME_CSP, parse_target, shown_time
from mirror.replay.serve import REPLAY_CSP, Site, make_app, start_replay_server

DOCUMENT = {"Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate"}
STORY = ("<!doctype html><title>Fox page</title><h1>A story</h1>"
         "<p>Once upon a time the {speed} brown fox jumped over a zebra.</p>"
         '<p>Read <a href="/about">about us</a> or go <a href="/">home</a>.</p>')


def build(site: TestSite, speed: str) -> None:
    site.page("/", '<!doctype html><title>Home page</title><h1>Home</h1><a href="/fox">Fox'
                   '</a> <a href="/old">old</a> <img src="/dot.png">')
    site.page("/fox", STORY.format(speed=speed))
    site.page("/about", '<!doctype html><title>About us</title><p>We write stories.</p>'
                        '<a href="/">home</a>')
    site.redirect("/old", "/about")
    site.page("/dot.png", b"\x89PNG\r\n\x1a\nnot really", content_type="image/png")


def shots(tmp_path: Path) -> Path:
    """Where screenshots go: docs/ with MIRROR_SCREENSHOTS=docs (the README's), else tmp."""
    if os.environ.get("MIRROR_SCREENSHOTS") == "docs":
        return Path(__file__).resolve().parent.parent / "docs"
    return tmp_path


@dataclass
class Archive:
    site: TestSite
    folder: Path

    def stamps(self, path: str) -> list[str]:
        """The 14-digit timestamps of a URL's captures, oldest first."""
        caps = CaptureIndex.load(self.folder).captures_of(self.site.base + path.lstrip("/"))
        return [c.timestamp for c in caps]

    def capture_ids(self, path: str) -> list[int]:
        manifest = ManifestReader(self.folder / "manifest.sqlite3")
        try:
            return [c.capture_id for c in manifest.texts.page_history(self.site.base + path[1:])]
        finally:
            manifest.close()


@pytest.fixture
async def archive(make_site: Any, crawl: Any) -> Archive:
    site = await make_site()
    first, _ = await crawl_twice(crawl, site.base, lambda: build(site, "quick"),
                                 lambda: build(site, "slow"))
    return Archive(site, first.archive)


@pytest.fixture
async def client(archive: Archive, aiohttp_client: Any) -> Any:
    return await aiohttp_client(make_app(archive.folder, Site("test", start_urls=(
        archive.site.base,))))


@pytest.mark.parametrize("path, expected", [
    ("/2024mp_/http://a.test/x?y=1", ("2024", "page", "http://a.test/x?y=1")),
    ("/2024/http://a.test/", ("2024", "replay", "http://a.test/")),
    ("/https://a.test/x?y=1", ("99991231235959", "latest", "https://a.test/x?y=1")),
    ("/HTTP:/a.test/", ("99991231235959", "latest", "http://a.test/")),
    ("/img/a.png", None), ("/a.test/", None), ("/ftp://a.test/", None),
])
def test_replay_addresses(path: str, expected: tuple[str, str, str] | None) -> None:
    target = parse_target(path)
    assert (target and (target.timestamp, target.mode, target.url)) == expected


def soup_of(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser", multi_valued_attributes=None)


async def test_an_address_without_a_timestamp_is_the_newest_capture(archive: Archive,
                                                                   client: Any) -> None:
    fox = archive.site.base + "fox"
    first, second = archive.stamps("/fox")
    resp = await client.get(f"/{fox}", allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (302, f"/{second}/{fox}")
    assert "slow brown fox" in await (await client.get(f"/{fox}")).text()
    squeezed = await client.get("/" + fox.replace("http://", "http:/"), allow_redirects=False)
    assert squeezed.headers["Location"] == f"/{second}/{fox}"
    missing = await client.get(f"/{archive.site.base}never")
    assert missing.status == 404 and "Not in this archive" in await missing.text()
    assert "quick brown fox" in await (await client.get(f"/{first}/{fox}")).text()


async def test_a_browser_opening_a_page_gets_the_banner_and_the_page_in_a_frame(
        archive: Archive, client: Any) -> None:
    fox = archive.site.base + "fox"
    first, second = archive.stamps("/fox")
    resp = await client.get(f"/{first}/{fox}", headers=DOCUMENT)
    assert resp.status == 200 and resp.headers["Content-Security-Policy"] == FRAME_CSP
    soup = soup_of(await resp.text())
    assert soup.title.string == "Fox page"
    assert soup.find("iframe")["src"] == f"/{first}mp_/{fox}"
    assert soup.find(id="mb-time").string == shown_time(first)
    assert soup.find(id="mb-run").string == "run 1"
    assert soup.find(id="mb-prev").get("href") is None  # the first capture
    assert soup.find(id="mb-next")["href"] == f"/{second}/{fox}"
    assert soup.find(id="mb-history")["href"] == "/_history?" + urlencode({"url": fox})
    assert soup.find("a", class_="home")["href"] == "/"
    assert soup.find("script")["src"] == "/_mirror/banner.js"
    assert "quick" not in str(soup)  # not a word of the page itself
    later = soup_of(await (await client.get(f"/{second}/{fox}", headers=DOCUMENT)).text())
    assert later.find(id="mb-run").string == "run 2"
    assert later.find(id="mb-prev")["href"] == f"/{first}/{fox}"
    script = await client.get("/_mirror/banner.js")
    assert script.content_type == "text/javascript" and "replaceState" in await script.text()


async def test_everything_else_gets_the_capture_itself(archive: Archive, client: Any) -> None:
    base, fox = archive.site.base, archive.site.base + "fox"
    first = archive.stamps("/fox")[0]
    for headers in ({}, {"Sec-Fetch-Dest": "iframe"}, {"Sec-Fetch-Dest": "empty"}):
        resp = await client.get(f"/{first}/{fox}", headers=headers)
        assert resp.headers["Content-Security-Policy"] == REPLAY_CSP, headers
        assert "quick brown fox" in await resp.text()
    image = await client.get(f"/{first}/{base}dot.png", headers=DOCUMENT)  # not HTML
    assert (image.status, image.content_type) == (200, "image/png")
    moved = await client.get(f"/{first}/{base}old", headers=DOCUMENT, allow_redirects=False)
    assert re.fullmatch(rf"/\d{{14}}/{base}about", moved.headers["Location"])
    refused = await client.get(f"/{first}/{fox}", headers={**DOCUMENT, "Service-Worker":
                                                           "script"})
    assert refused.status == 403


async def test_the_mp_page_is_the_archived_page_and_stays_mp(archive: Archive,
                                                           client: Any) -> None:
    base, fox = archive.site.base, archive.site.base + "fox"
    first = archive.stamps("/fox")[0]
    resp = await client.get(f"/{first}mp_/{fox}", headers={"Sec-Fetch-Dest": "iframe"})
    assert resp.headers["Content-Security-Policy"] == REPLAY_CSP
    text = await resp.text()
    assert "quick brown fox" in text and "mirror-banner" not in text
    links = [a["href"] for a in soup_of(text).find_all("a")]
    assert links == [f"/{first}mp_/{base}about", f"/{first}mp_/{base}"]
    home = archive.stamps("/")[0]
    page = soup_of(await (await client.get(f"/{home}mp_/{base}")).text())
    assert page.find("img")["src"] == f"/{home}mp_/{base}dot.png"
    moved = await client.get(f"/{home}mp_/{base}old", allow_redirects=False)
    assert moved.headers["Location"] == f"/{home}mp_/{base}about"
    framed = f"{client.make_url('/')}{first}mp_/{fox}"
    asked = await client.get("/dot.png", headers={"Referer": framed}, allow_redirects=False)
    assert asked.headers["Location"] == f"/{first}mp_/{base}dot.png"
    raw = await client.get(f"/{first}id_/{fox}")
    assert await raw.read() == STORY.format(speed="quick").encode()


async def test_the_banner_asks_what_a_frame_shows(archive: Archive, client: Any) -> None:
    about = archive.site.base + "about"
    first, second = archive.stamps("/about")
    home_first = archive.stamps("/")[0]  # a link followed from the first run's home page
    resp = await client.get("/_mirror/capture", params={"path": f"/{home_first}mp_/{about}"})
    info = await resp.json()
    assert info == {
        "url": about, "shown": about.split("://")[1], "timestamp": first,
        "time": shown_time(first), "iso": timestamp_to_iso_date(first), "run": "run 1",
        "status": 200, "top": f"/{first}/{about}",
        "frame": f"/{first}mp_/{about}", "previous": None, "next": f"/{second}/{about}",
        "history": "/_history?" + urlencode({"url": about}),
        "captures": "history (2 captures)", "title": "About us"}
    gone = await client.get("/_mirror/capture", params={"path": f"/{first}mp_/http://x.test/"})
    assert gone.status == 404


async def test_history_lists_every_capture_with_what_changed(archive: Archive,
                                                            client: Any) -> None:
    fox, about = archive.site.base + "fox", archive.site.base + "about"
    first, second = archive.stamps("/fox")
    old_id, new_id = archive.capture_ids("/fox")
    resp = await client.get(f"/*/{fox}")  # the old list of captures leads here
    assert resp.url.path == "/_history" and resp.url.query["url"] == fox
    rows = soup_of(await resp.text()).find_all("tr")[1:]
    cells = [[td.get_text(" ", strip=True) for td in row.find_all("td")] for row in rows]
    assert [c[3:4] + c[7:] for c in cells] == [["2", "changed"], ["1", "first"]]
    links = [row.find("a")["href"] for row in rows]
    assert links == [f"/{second}/{fox}", f"/{first}/{fox}"]
    changed = rows[0].find_all("a")[-1]["href"]
    assert changed == f"/_compare?a={old_id}&b={new_id}"
    picks = [(i["name"], i["value"], i.has_attr("checked")) for i in
             soup_of(await resp.text()).find_all("input", type="radio")]
    assert picks == [("a", str(new_id), False), ("b", str(new_id), True),
                     ("a", str(old_id), True), ("b", str(old_id), False)]
    same = soup_of(await (await client.get("/_history", params={"url": about})).text())
    assert [r.find_all("td")[-1].get_text() for r in same.find_all("tr")[1:]] == [
        "same as before", "first"]
    assert (await client.get("/_history", params={"url": "http://x.test/"})).status == 404


def diff_of(page: str) -> tuple[list[str], list[str]]:
    soup = soup_of(page)
    return [t.get_text() for t in soup.find_all("ins")], [t.get_text() for t in
                                                         soup.find_all("del")]


async def test_compare_shows_exactly_the_changed_words(archive: Archive, client: Any) -> None:
    fox = archive.site.base + "fox"
    first, second = archive.stamps("/fox")
    old_id, new_id = archive.capture_ids("/fox")
    resp = await client.get("/_compare", params={"a": str(new_id), "b": str(old_id)})
    assert resp.status == 200 and "frame-src 'self'" in resp.headers["Content-Security-Policy"]
    page = await resp.text()
    assert diff_of(page) == (["slow"], ["quick"])
    assert "the <del>quick</del><ins>slow</ins> brown fox" in page
    assert "1 word added, 1 removed" in page
    frames = [f["src"] for f in soup_of(page).find_all("iframe")]
    assert frames == [f"/{first}mp_/{fox}", f"/{second}mp_/{fox}"]
    by_run = await client.get("/_compare", params={"url": fox, "from_run": "1", "to_run": "2"})
    assert diff_of(await by_run.text()) == (["slow"], ["quick"])
    same = await client.get("/_compare", params={"url": archive.site.base + "about",
                                                 "from_run": "1", "to_run": "2"})
    assert "The text is the same." in await same.text() and diff_of(await same.text()) == ([], [])
    for params, status in (({"a": "x", "b": "1"}, 400), ({"a": "1"}, 400),
                           ({"a": "1", "b": "999999"}, 404),
                           ({"url": fox, "from_run": "0", "to_run": "2"}, 404),
                           ({"a": "²", "b": "1"}, 400)):
        assert (await client.get("/_compare", params=params)).status == status, params
    dot = archive.capture_ids("/dot.png")
    no_text = await client.get("/_compare", params={"a": str(dot[0]), "b": str(old_id)})
    assert "mirror index --search SITE.toml" in await no_text.text()


async def test_search_finds_words_and_says_what_it_cannot_read(archive: Archive,
                                                              client: Any) -> None:
    fox = archive.site.base + "fox"
    first, second = archive.stamps("/fox")
    resp = await client.get("/_search", params={"q": "zebra"})
    assert resp.status == 200 and resp.headers["Content-Security-Policy"].startswith(
        "default-src 'none'")
    hits = soup_of(await resp.text()).select("ol.hits li")
    assert len(hits) == 1
    assert hits[0].find("a")["href"] == f"/{second}/{fox}"
    assert hits[0].find("a").get_text() == "Fox page"
    assert [m.get_text() for m in hits[0].find_all("mark")] == ["zebra"]
    assert "the slow brown fox" in hits[0].p.get_text()
    quick = soup_of(await (await client.get("/_search", params={"q": "quick"})).text())
    assert quick.select("ol.hits li") == [] and "No page matches" in quick.get_text()
    in_run = soup_of(await (await client.get("/_search", params={"q": "quick", "run": "1"}))
                     .text())
    assert [a["href"] for a in in_run.select("ol.hits li > a")] == [f"/{first}/{fox}"]
    every = soup_of(await (await client.get("/_search", params={"q": "quick", "all": "1"}))
                    .text())
    assert [a["href"] for a in every.select("ol.hits li > a")] == [f"/{first}/{fox}"]
    bad = await client.get("/_search", params={"q": '"unbalanced'})
    assert bad.status == 400
    assert "cannot search for '\"unbalanced'" in soup_of(await bad.text()).find(
        class_="error").get_text()
    odd = await client.get("/_search", params={"q": "zebra", "run": "²", "page": "٣"})
    assert odd.status == 200 and "Fox page" in await odd.text()
    assert (await client.get("/", params={"page": "²"})).status == 200
    landing = soup_of(await (await client.get("/")).text())
    assert landing.find("form", action="/_search").find("input")["name"] == "q"


async def test_the_banner_follows_a_click_in_the_frame(archive: Archive,
                                                       tmp_path: Path) -> None:
    """Headless Chromium: open a frame page, follow a link inside the archived page; the
    banner and the address bar move to the capture the frame shows."""
    from playwright.async_api import expect
    from replayers import chromium

    base, fox = archive.site.base, archive.site.base + "fox"
    home_ts, fox_ts = archive.stamps("/")[1], archive.stamps("/fox")
    asked = len(archive.site.log)
    runner, server = await start_replay_server(archive.folder, Site("test", start_urls=(base,)))
    try:
        async with chromium() as browser:
            page = await browser.new_page(viewport={"width": 1000, "height": 600})
            await page.goto(f"{server}{home_ts}/{base}")
            assert await page.title() == "Home page"
            await page.frame_locator("#mirror-frame").locator("a", has_text="Fox").click()
            # (not page.wait_for_function: the frame page's CSP forbids its eval)
            await expect(page.locator("#mb-url")).to_have_text(re.compile(r"/fox$"))
            await page.wait_for_url(f"{server}{fox_ts[1]}/{fox}")
            assert await page.title() == "Fox page"
            assert await page.inner_text("#mb-run") == "run 2"
            assert await page.get_attribute("#mb-prev", "href") == f"/{fox_ts[0]}/{fox}"
            assert await page.get_attribute("#mb-next", "href") is None
            assert "slow brown fox" in await page.frame_locator("#mirror-frame").locator(
                "p").first.inner_text()
            await page.screenshot(path=str(shots(tmp_path) / "serve-banner.png"))
            banner = await page.locator("#mirror-banner").bounding_box()
            assert banner is not None and banner["height"] <= 40
            # the page's history, then the compare view of its two captures
            await page.click("#mb-history")
            await expect(page.locator("h1")).to_contain_text("History of")
            await page.screenshot(path=str(shots(tmp_path) / "serve-history.png"))
            await page.goto(f"{server}_compare?" + urlencode(
                {"url": fox, "from_run": 1, "to_run": 2}))
            assert await page.inner_text("del") == "quick"
            assert await page.inner_text("ins") == "slow"
            # both pages side by side, each a sandboxed frame of the archived pages' origin
            sides = page.frame_locator(".frames iframe")
            assert "slow brown fox" in await sides.nth(1).locator("p").first.inner_text()
            assert "quick brown fox" in await sides.nth(0).locator("p").first.inner_text()
            assert await page.get_attribute(".frames iframe >> nth=0", "sandbox")
            await page.screenshot(path=str(shots(tmp_path) / "serve-compare.png"),
                                  full_page=True)
    finally:
        await runner.cleanup()
    assert (shots(tmp_path) / "serve-banner.png").read_bytes()[:4] == b"\x89PNG"
    assert len(archive.site.log) == asked  # nothing went to the live site


async def test_search_results_come_in_pages(client: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("mirror.replay.searchpage.RESULTS_PER_PAGE", 1)
    seen, pagers = [], []
    for page in ("1", "2", "3"):
        soup = soup_of(await (await client.get("/_search", params={"q": "home", "page": page}))
                       .text())
        [hit] = soup.select("ol.hits li")
        seen.append(hit.a.get_text())
        pagers.append([a.get_text() for a in soup.find_all("a") if a.get_text() in
                       ("previous", "next")])
    assert sorted(seen) == ["About us", "Fox page", "Home page"]
    assert pagers == [["next"], ["previous", "next"], ["previous"]]
