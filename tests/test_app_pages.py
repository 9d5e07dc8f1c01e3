"""A page's history and compare as pages of `mirror ui` (app/pages.py), the way back from the
replay server, and the app's address, token and replay ports kept across a restart
(app/uistate.py): a real app process over a real archive of a local site."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from conftest import TestSite
from uiproc import UiProcess, crawl, site_file

from mirror.app.uistate import StateFile, UiState, parse_state, state_file

LINES = 40  # lines of text on the changing page; line CHANGED changes between the runs
CHANGED = 20


def story(word: str) -> str:
    lines = "".join(f"<p>line {i}{f' {word}' if i == CHANGED else ''}</p>\n"
                    for i in range(LINES))
    return f"<html><head><title>Story</title></head><body>{lines}</body></html>"


@pytest.fixture
async def two_runs(tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]
                   ) -> tuple[Path, TestSite]:
    """A library with one site crawled twice; /story.html's line 20 changed between."""
    library = tmp_path / "library"
    library.mkdir()
    site = await make_site()
    site.page("/", '<html><body><a href="/story.html">story</a></body></html>')
    site.page("/story.html", story("quick"))
    path = site_file(library, "tales", site.base)
    assert await crawl(path) == 0
    site.page("/story.html", story("slow"))
    assert await crawl(path) == 0
    return library, site


def text_of(page: str) -> str:
    return re.sub(r"<[^>]+>", "", page)


async def get(s: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str]:
    async with s.get(url, headers=headers, allow_redirects=False) as r:
        return r.status, await r.text()


@pytest.mark.slow
async def test_history_and_compare_are_app_pages_and_captures_open_on_the_replay_origin(
        two_runs: tuple[Path, TestSite]) -> None:
    library, site = two_runs
    url = site.base + "story.html"
    ui = UiProcess.start(library)
    try:
        async with ui.session() as s:
            status, history = await get(s, ui.base + "site/tales/history?"
                                        + urlencode({"url": url}))
            assert status == 200
            assert '<a class="brand" href="/">mirror</a>' in history  # the app's header
            assert '<a href="/site/tales">◀ tales</a>' in history  # the way back
            views = [v.replace("&amp;", "&")
                     for v in re.findall(r'<td><a href="(http://[^"]+)">', history)]
            # the replay server's own token once, and the capture's path
            assert len(views) == 2 and all(
                parse_qs(urlsplit(v).query)["to"][0].endswith("/" + url) for v in views)
            replay = urlsplit(views[0]).netloc
            assert replay != urlsplit(ui.base).netloc  # archived pages: another origin
            changed = re.search(r'<a href="(/site/tales/compare\?a=\d+&amp;b=\d+)">changed',
                                history)
            assert changed, history
            assert re.search(r'<form method="get" action="/site/tales/compare">', history)

            status, compare = await get(s, ui.base + changed[1].replace("&amp;", "&")[1:])
            assert status == 200 and '<a class="brand" href="/">mirror</a>' in compare
            assert "line 20 <del>quick</del><ins>slow</ins>\n" in compare
            folded = text_of(compare)
            assert "… 17 unchanged lines" in folded and "… 16 unchanged lines" in folded
            assert "line 16\n" not in folded and "line 17\nline 18\nline 19\n" in folded
            assert "<iframe" not in compare  # archived content is never framed by the app
            whole = re.search(r'<a class="button" href="([^"]+)">The whole text</a>', compare)
            assert whole, compare
            status, full = await get(s, ui.base + whole[1].replace("&amp;", "&")[1:])
            assert status == 200 and "unchanged line" not in full
            assert all(f"line {i}\n" in text_of(full) for i in range(LINES) if i != CHANGED)
            assert "Only the changed passages" in full

            for path, status in (("compare?a=x&b=1", 400), ("compare?a=1&b=999999", 404),
                                 ("history", 400), ("history?url=http://x.test/", 404)):
                got, page = await get(s, ui.base + "site/tales/" + path)
                assert (got, '<a href="/site/tales">◀ tales</a>' in page) == (status, True)

            # the capture opens on the replay origin, in a banner leading back to the app
            entry = views[0]
            capture = (entry.partition("?")[0].rstrip("/")
                       + parse_qs(urlsplit(entry).query)["to"][0])
            assert (await get(s, entry))[0] == 303  # its token: its cookie, then the page
            status, banner = await get(s, capture, **{"Sec-Fetch-Dest": "document"})
            assert status == 200
            # the way back is a redirect: the archived page never sees the app's name
            assert '<a id="mb-library" href="/_library"' in banner and ui.base not in banner
            async with aiohttp.ClientSession() as browser:  # without the token: nothing
                assert (await get(browser, capture))[0] == 403
                assert (await get(browser, entry))[0] == 303
                status, archived = await get(browser, capture)
                assert status == 200 and "line 20 slow" in archived
                # the replay server's own compare folds the same way
                ids = changed[1].split("?", 1)[1].replace("&amp;", "&")
                status, own = await get(browser, f"http://{replay}/_compare?{ids}")
                assert status == 200 and "… 17 unchanged lines" in own
            # the app serves no archived bytes: Browse is a way to the replay origin
            async with s.get(ui.base + "site/tales/browse?" + urlencode({"url": url}),
                             allow_redirects=False) as r:
                assert r.status == 303 and urlsplit(r.headers["Location"]).netloc == replay
    finally:
        ui.stop()


@pytest.mark.slow
async def test_after_a_restart_the_same_address_token_and_replay_port_still_work(
        two_runs: tuple[Path, TestSite]) -> None:
    library, site = two_runs
    first = UiProcess.start(library, port=None)
    try:
        async with first.session() as s:
            async with s.get(first.base + "site/tales/browse", allow_redirects=False) as r:
                replay = r.headers["Location"]
    finally:
        first.stop()
    saved = state_file(library, Path(os.environ["XDG_STATE_HOME"]) / "mirror" / "ui")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert first.token in saved.read_text()

    second = UiProcess.start(library, port=None)
    try:
        assert (second.base, second.token) == (first.base, first.token)
        # a bookmark and the cookie the first start set: still open
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as browser:
            async with browser.get(first.base + f"?token={first.token}") as r:
                assert r.status == 200
            cookie = next(c for c in jar if c.key == "mirror_ui")
            assert int(cookie["max-age"]) > 30 * 24 * 3600  # outlives the browser too
            status, page = await get(browser, first.base + "site/tales")
            assert status == 200 and "tales" in page
            async with browser.get(first.base + "site/tales/browse",
                                   allow_redirects=False) as r:
                assert r.headers["Location"] == replay  # the replay address too
    finally:
        second.stop()


def test_a_state_file_others_could_read_or_not_written_by_mirror_gives_a_new_token(
        tmp_path: Path) -> None:
    library = tmp_path / "lib"
    path = state_file(library, tmp_path / "state")
    kept = StateFile(path, library)
    kept.state.port = 8123
    kept.save()
    again = StateFile(path, library).state
    assert (again.token, again.port) == (kept.state.token, 8123)
    path.chmod(0o644)
    assert StateFile(path, library).state.token != kept.state.token
    for text in ("", "{", '{"token": "short"}', '["x"]', '{"token": 5}'):
        assert parse_state(text) is None, text
    token = UiState().token
    assert parse_state(f'{{"version": 2, "token": "{token}", "port": 70000, "replay_ports": '
                       f'{{"a": 9000, "b": "x"}}}}') == UiState(token, None, {"a": 9000})
    # a file from before the app had a name of its own: its cookie was the token, sent to
    # every port of 127.0.0.1; a new token, the same ports
    old = parse_state(f'{{"token": "{token}", "port": 8123}}')
    assert old is not None and old.token != token and old.port == 8123
