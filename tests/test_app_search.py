"""`mirror ui`'s search across the library, and its report's links to compare a changed page
between runs: a real app process over real archives of local sites."""

from __future__ import annotations

import asyncio
import html
import re
import signal
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp import web
from conftest import TestSite
from uiproc import UiProcess, archive_runs, chain_site, crawl, site_file, until

from mirror.layout import ArchiveLayout

pytestmark = pytest.mark.slow

HOSTILE_TITLE = "<script>alert(1)</script> Zebrafinch & <b>co</b>"


def page(title: str, body: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<a href="{u}">{u}</a> ' for u in links)
    return f"<html><head><title>{title}</title></head><body>{body}{anchors}</body></html>"


def north_site(site: TestSite) -> TestSite:
    """A title match (a.html), a body-only match (b.html) of one word, and a hostile title."""
    site.page("/", page("North home", "<p>The north index.</p>", ("a.html", "b.html", "h.html")))
    site.page("/a.html", page("Walrus facts", "<p>The walrus lives in the cold sea.</p>"))
    site.page("/b.html", page("Sea notes", "<p>A walrus was seen near the old pier.</p>"))
    site.page("/h.html", page(html.escape(HOSTILE_TITLE, quote=False),
                              "<p>The zebrafinch sings at dawn.</p>"))
    return site


def south_site(site: TestSite) -> TestSite:
    site.page("/", page("South home", "<p>The south index.</p>", ("c.html",)))
    site.page("/c.html", page("Marsupials", "<p>The quokka smiles at visitors.</p>"))
    return site


@pytest.fixture
async def library(tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> Path:
    """Two archived sites, one never run, one broken site file."""
    folder = tmp_path / "library"
    folder.mkdir()
    for name, build in (("north", north_site), ("south", south_site)):
        assert await crawl(site_file(folder, name, build(await make_site()).base)) == 0
    site_file(folder, "never", "http://127.0.0.1:9/")
    (folder / "broken.toml").write_text('[site]\nname = "broken"\nstart_urls = "x"\n')
    return folder


async def search(session: aiohttp.ClientSession, ui: UiProcess, query: str,
                 **params: str) -> tuple[int, str]:
    async with session.get(ui.base + "search", params={"q": query, **params}) as r:
        return r.status, await r.text()


def hits(page: str) -> list[str]:
    return re.findall(r'<li class="hit">(.*?)</li>', page, re.S)


def opened(hit: str) -> str:
    """The app link of a hit's title (the capture, through its site's replay server)."""
    found = re.search(r'<a class="open" href="([^"]+)"', hit)
    assert found, hit
    return html.unescape(found[1])


async def test_search_finds_the_page_of_the_right_site_with_its_words_marked(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    status, result = await search(session, ui, "quokka")
    assert status == 200
    [hit] = hits(result)
    assert 'class="site-tag" href="/site/south"' in hit and "/c.html</div>" in hit
    assert "The <mark>quokka</mark> smiles at visitors." in hit
    assert 'href="/site/south/history?url=http' in hit
    assert "1 page in 1 site," in result  # never run and broken: not searched, no error
    # the home screen and a site's page have the box, with the syntax in a few words
    async with session.get(ui.base) as r:
        home = await r.text()
    assert '<form method="get" action="/search"' in home and "<code>prefix*</code>" in home
    async with session.get(ui.base + "site/north") as r:
        assert '<input type="hidden" name="site" value="north">' in await r.text()


async def test_a_title_match_ranks_above_a_match_in_the_text_only(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    _, result = await search(session, ui, "walrus")
    first, second = hits(result)
    assert "/a.html</div>" in first and "<mark>Walrus</mark> facts" in first
    assert "/b.html</div>" in second and "Sea notes" in second
    assert "A <mark>walrus</mark> was seen" in second
    # across sites: both homes, one per site
    _, result = await search(session, ui, "home")
    assert sorted(re.findall(r'href="/site/(\w+)" title="site', result)) == ["north", "south"]
    _, result = await search(session, ui, "home", site="south")
    assert re.findall(r'href="/site/(\w+)" title="site', result) == ["south"]


async def test_a_hostile_title_is_shown_as_text(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    _, result = await search(session, ui, "zebrafinch")
    [hit] = hits(result)
    assert "<script>" not in result.split("<main>", 1)[1]
    assert ("&lt;script&gt;alert(1)&lt;/script&gt; <mark>Zebrafinch</mark> &amp; "
            "&lt;b&gt;co&lt;/b&gt;") in hit


async def test_a_malformed_query_says_why_and_an_empty_one_shows_the_box(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    status, result = await search(session, ui, '"unbalanced')
    assert status == 400
    alert = re.search(r'<p class="err" role="alert">(.*?)</p>', result, re.S)
    assert alert and html.unescape(alert[1]).startswith("cannot search for '\"unbalanced'")
    assert 'value="&#34;unbalanced"' in result  # the box keeps the query to fix it
    status, result = await search(session, ui, "")
    assert status == 200 and 'name="q" value=""' in result
    assert not hits(result) and "Nothing matches" not in result and "result" not in result
    _, result = await search(session, ui, "nowhereword")
    assert "Nothing matches <b>nowhereword</b>" in result


async def test_search_keeps_the_apps_doors(ui: UiProcess) -> None:
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(ui.base + "search?q=quokka") as r:
            assert r.status == 403 and "quokka" not in await r.text()
    port = ui.base.rsplit(":", 1)[1].rstrip("/")
    async with ui.session() as s, s.get(ui.base + "search?q=quokka",
                                        headers={"Host": f"evil.test:{port}"}) as r:
        assert r.status == 421


async def test_a_result_opens_the_capture_in_its_sites_replay_server(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    _, result = await search(session, ui, "quokka")
    link = opened(hits(result)[0])
    assert re.fullmatch(r"/site/south/browse\?url=http[^&]+/c\.html&ts=\d{14}", link), link
    async with session.get(ui.base + link.lstrip("/"), allow_redirects=False) as r:
        assert r.status == 303
        target = r.headers["Location"]
    assert target.startswith("http://m") and not target.startswith(ui.base)
    async with aiohttp.ClientSession() as browser, browser.get(target) as archived:
        assert archived.status == 200
        assert "The quokka smiles at visitors." in await archived.text()


async def test_pages_captured_before_the_index_are_counted_with_the_command_to_index_them(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    forget_text(ArchiveLayout(library / "archive" / "south").manifest, "c.html")
    _, result = await search(session, ui, "quokka")
    assert not hits(result) and "Nothing matches" in result
    note = re.search(r'<p class="warn-note">(.*?)</p>', result, re.S)
    assert note, result
    text = re.sub(r"<[^>]+>", "", note[1])
    assert "south has 1 page captured before the search index existed" in text
    assert f"mirror index --search {library / 'south.toml'}" in text


async def test_results_come_by_pages_with_a_link_to_the_next(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    site = chain_site(await make_site(), 45)  # p0..p44 each say "text i"
    assert await crawl(site_file(folder, "many", site.base)) == 0
    ui = UiProcess.start(folder)
    try:
        async with ui.session() as s:
            seen: list[str] = []
            for number, shown, more in ((1, 20, True), (2, 20, True), (3, 5, False)):
                params = {"page": str(number)} if number > 1 else {}
                _, result = await search(s, ui, "text", **params)
                urls = re.findall(r'<div class="url">([^<]+)</div>', result)
                assert len(urls) == shown and f'<ol class="hits" start="{number * 20 - 19}"' \
                    in result
                seen += urls
                assert ('rel="next"' in result) == more and ('rel="prev"' in result) == \
                    (number > 1)
                if more:
                    assert f"/search?q=text&amp;page={number + 1}" in result
            assert len(set(seen)) == 45
    finally:
        ui.stop()


def forget_text(manifest: Path, path: str) -> None:
    """Make a page look captured before the text index existed."""
    db = sqlite3.connect(manifest)
    try:
        with db:
            ids = [i for (i,) in db.execute("SELECT id FROM captures WHERE url LIKE ?",
                                            (f"%/{path}",))]
            db.executemany("UPDATE captures SET text_id=NULL WHERE id=?", [(i,) for i in ids])
            db.executemany("DELETE FROM latest_texts WHERE capture_id=?", [(i,) for i in ids])
    finally:
        db.close()


# -- the report's changed pages ------------------------------------------------------------


async def test_a_changed_page_links_to_its_compare_with_the_run_before_it(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    """Run 1 complete, run 2 killed and abandoned by run 3: run 3's changes, and its compare
    links, are measured against run 1."""
    folder = tmp_path / "library"
    folder.mkdir()
    site = await make_site()
    words = {"c": "first words"}
    hold = asyncio.Event()

    async def changing(request: web.Request) -> web.Response:
        return web.Response(text=page("Changing", f"<p>{words['c']}</p>"),
                            content_type="text/html")

    async def held(request: web.Request) -> web.Response:
        await hold.wait()
        return web.Response(text=page("Held", "<p>held</p>"), content_type="text/html")

    site.page("/", page("Home", "", ("c.html", "s.html", "slow.html")))
    site.page("/s.html", page("Same", "<p>same</p>"))
    site.handler("/c.html", changing)
    site.handler("/slow.html", held)
    path = site_file(folder, "moving", site.base)
    hold.set()
    assert await crawl(path) == 0
    words["c"] = "second words"
    hold.clear()
    await kill_while_held(path, site)
    hold.set()
    assert await crawl(path, "--new-run") == 0
    runs = archive_runs(folder / "archive" / "moving")
    assert [(r.id, r.state) for r in runs] == [(1, "complete"), (2, "abandoned"),
                                               (3, "complete")]
    ui = UiProcess.start(folder)
    try:
        async with ui.session() as s:
            async with s.get(ui.base + "site/moving/runs/3") as r:
                report = await r.text()
            changed = report.split('<h2 id="changed">', 1)[1].split("<h2", 1)[0]
            assert "Changed (1)" in changed
            link = re.search(r'<a class="tool" href="([^"]+)"[^>]*>compare</a>', changed)
            assert link, changed
            compare = html.unescape(link[1])
            assert compare == ("/site/moving/compare?url=" + quote(site.base + "c.html")
                               + "&from_run=1&to_run=3")
            assert re.search(r'href="/site/moving/history\?url=[^"]+c\.html"[^>]*>history</a>',
                             changed)
            async with s.get(ui.base + compare.lstrip("/")) as r:  # an app page (app/pages.py)
                shown = await r.text()
            assert r.status == 200 and "<del>first</del><ins>second</ins> words" in shown
            assert "(run 1) to" in shown and "(run 3)." in shown
            async with s.get(ui.base + "site/moving/history?url="
                             + quote(site.base + "c.html?a=1&b=2", safe="")) as r:
                assert r.status == 404 and "not in the archive" in await r.text()
            async with s.get(ui.base + "site/moving/compare?url=x&from_run=a&to_run=3") as r:
                assert r.status == 400
    finally:
        ui.stop()


async def kill_while_held(path: Path, site: TestSite) -> None:
    """A run killed (-9) while a page holds its answer: left `running`, to be abandoned."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "-q", str(path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        await until(lambda: site.count("/slow.html") >= 2, 30, "run 2 to ask for slow.html")
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

