"""`mirror ui` over HTTP: its doors (token, Host, CSRF, Origin), runs it starts and runs it
only watches, site files it writes, reports, jobs, and replay from another origin."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import pytest
from conftest import TestSite
from uiproc import UiProcess, archive_runs, chain_site, csrf_of, post, site_file, until

from mirror.archive.lock import ArchiveLock
from mirror.config import load_config

pytestmark = pytest.mark.slow


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder


@pytest.fixture
async def slow_site(make_site: Callable[[], Awaitable[TestSite]]) -> TestSite:
    site = chain_site(await make_site(), 40)
    site.latency = 0.15
    return site


def runs_of(library: Path, name: str) -> list[Any]:
    return archive_runs(library / "archive" / name)


async def row_text(session: aiohttp.ClientSession, ui: UiProcess, name: str) -> str:
    async with session.get(ui.base) as r:
        page = await r.text()
    found = re.search(rf'<tr id="site-{name}".*?</tr>', page, re.S)
    assert found, page
    return re.sub(r"<[^>]+>", " ", found[0])


# -- the doors ---------------------------------------------------------------------------------


async def test_the_token_opens_the_app_once_and_a_cookie_keeps_it_open(ui: UiProcess) -> None:
    # a jar that keeps cookies of IP hosts, as browsers do
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as anonymous:
        async with anonymous.get(ui.base) as r:
            assert r.status == 403
            assert "access token" in await r.text()
        async with anonymous.get(ui.base + "?token=wrong") as r:
            assert r.status == 403
        async with anonymous.get(ui.base + f"?token={ui.token}", allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/"
            cookie = r.cookies["mirror_ui"]
            # Lax: the way back from a replay server (another site) is a link
            assert cookie["httponly"] and cookie["samesite"] == "Lax"
            assert cookie.value == ui.cookie != ui.token  # the token itself is no cookie
        async with anonymous.get(ui.base) as r:  # the cookie jar has it now
            assert r.status == 200
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    # a name of its own under localhost (host-only cookie), made from the token
    assert re.fullmatch(r"http://m[0-9a-f]{24}\.localhost:\d+/", ui.base)


async def test_an_address_on_127_0_0_1_leads_to_the_apps_name_and_drops_an_old_cookie(
        ui: UiProcess) -> None:
    port = ui.base.rsplit(":", 1)[1].rstrip("/")
    old = f"http://127.0.0.1:{port}/"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        async with browser.get(old + f"site/x?token={ui.token}", allow_redirects=False) as r:
            assert r.status == 303
            assert r.headers["Location"] == f"{ui.origin}/site/x?token={ui.token}"
            assert "Set-Cookie" not in r.headers  # nothing for 127.0.0.1
        # a cookie an earlier version set on 127.0.0.1 (the token: it went to every port)
        async with browser.get(old, headers={"Cookie": f"mirror_ui={ui.token}"}) as r:
            assert r.status == 421 and "the address that `mirror ui` printed" in await r.text()
            assert r.cookies["mirror_ui"]["max-age"] == "0"
        async with browser.get(old + "?token=wrong", allow_redirects=False) as r:
            assert r.status == 421 and "Location" not in r.headers


async def test_a_foreign_host_header_is_refused_even_with_the_cookie(
        ui: UiProcess, session: aiohttp.ClientSession) -> None:
    port = ui.base.rsplit(":", 1)[1].rstrip("/")
    for host in (f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}", "127.0.0.1:1",
                 f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        async with session.get(ui.base, headers={"Host": host}) as r:
            assert r.status == 421, host
    async with session.get(ui.base) as r:  # its own name
        assert r.status == 200


async def test_state_changes_need_the_csrf_token_and_the_apps_own_origin(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        slow_site: TestSite) -> None:
    site_file(library, "one", slow_site.base)
    async with session.get(ui.base) as home:
        token = csrf_of(await home.text())
    attempts = [
        ({"csrf": token}, {"Origin": "http://attacker.example"}),  # another site's form
        ({"csrf": token}, {"Origin": "http://127.0.0.1:1"}),  # another port: a replay origin
        ({}, {"Origin": ui.origin}),  # no token
        ({"csrf": "stale"}, {"Origin": ui.origin}),
        ({"csrf": token}, {}),  # neither Origin nor Referer
    ]
    for data, headers in attempts:
        async with session.post(ui.base + "site/one/run", data=data, headers=headers,
                                allow_redirects=False) as r:
            assert r.status == 403, (data, headers)
    assert runs_of(library, "one") == []
    assert not (library / "archive" / "one").exists()
    # the header form (the page's script) and a same-origin Referer pass
    async with session.post(ui.base + "site/one/stop", headers={
            "X-CSRF-Token": token, "Referer": ui.base + "site/one"},
            allow_redirects=False) as r:
        assert r.status == 409 and "no run is going on" in await r.text()


# -- site files ----------------------------------------------------------------------------------


async def test_adding_a_site_shows_a_config_error_at_its_field_then_writes_the_file(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    status, page = await post(ui, session, "/add", {
        "site.start_urls": "https://example.org/", "crawl.workers": "many"})
    assert status == 400
    field = re.search(r'<div class="field invalid">(.*?)</div>\s*<div class="help">', page, re.S)
    assert field and 'name="crawl.workers"' in field[1]
    assert "[crawl] workers: expected an integer from 1 to 1,000, found &#39;many&#39;" in field[1]
    assert list(library.glob("*.toml")) == []
    status, _ = await post(ui, session, "/add", {
        "site.start_urls": "https://example.org/", "crawl.workers": "3",
        "scope.exclude": "/private/\n\\?print="})
    assert status == 303
    cfg = load_config(library / "example-org.toml")
    assert cfg.crawl.workers == 3 and cfg.scope.exclude == ("/private/", r"\?print=")
    assert cfg.site.output_dir == library / "archive" / "example-org"
    status, page = await post(ui, session, "/add", {"site.start_urls": "https://example.org/"})
    assert status == 409 and "the site &#39;example-org&#39; (" in page
    assert "covers this URL already" in page
    status, page = await post(ui, session, "/add", {"site.start_urls": "https://example.net/",
                                                    "site.name": "example-org"})
    assert status == 409 and "a site named &#39;example-org&#39; is in the library" in page
    assert "e.g. example-org-2" in page


async def test_adding_a_wiki_writes_the_rules_made_for_it(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    wiki = await make_site()
    wiki.page("/", '<html><head><meta name="generator" content="MediaWiki 1.39.4"></head>'
                   '<body><a href="/wiki/Special:RecentChanges">Recent</a></body></html>')
    status, _ = await post(ui, session, "/add", {"site.start_urls": wiki.base,
                                                 "site.name": "wiki"})
    assert status == 303
    text = (library / "wiki.toml").read_text(encoding="utf-8")
    assert "# The start page looks like MediaWiki: " in text
    assert re.search(r"^#   trap:mediawiki-special +MediaWiki", text, re.MULTILINE) is None
    assert re.search(r"^#   trap:mediawiki-special +Special: pages", text, re.MULTILINE)
    assert load_config(library / "wiki.toml").scope.traps[:4] == (
        "replytocom", "login", "share", "print")


async def test_settings_rewrite_only_the_changed_keys_and_keep_comments(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    path = library / "kept.toml"
    path.write_text('# my notes\n[site]\nname = "kept"  # short\nstart_urls = ["http://a.test/"]\n'
                    '\n[crawl]\n# be gentle\nper_host = 2\n', encoding="utf-8")
    status, page = await post(ui, session, "/site/kept/settings", {"crawl.delay": "-1"})
    assert status == 400 and "[crawl] delay: expected a number from 0 to 3600" in page
    assert "per_host = 2" in path.read_text()
    status, _ = await post(ui, session, "/site/kept/settings", {"crawl.delay": "0.5"})
    assert status == 303
    text = path.read_text()
    assert text.startswith('# my notes\n[site]\nname = "kept"  # short\n')
    assert "# be gentle\nper_host = 2\ndelay = 0.5\n" in text
    assert load_config(path).crawl.delay == 0.5


async def test_a_broken_site_file_is_a_row_with_its_error(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    (library / "bad.toml").write_text('[site]\nname = "bad"\nstart_urls = "x"\n')
    text = await row_text(session, ui, "bad")
    assert "broken" in text and "[site] start_urls: expected a non-empty array" in text


# -- runs -----------------------------------------------------------------------------------------


async def sse_rows(session: aiohttp.ClientSession, ui: UiProcess, site: str,
                   enough: Callable[[list[str]], bool], timeout: float) -> list[str]:
    """The `row` events of /events?site= until `enough` of them came."""
    rows: list[str] = []
    async with session.get(ui.base + f"events?site={site}",
                           timeout=aiohttp.ClientTimeout(total=timeout)) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        event = ""
        async for raw in r.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "row":
                rows.append(json.loads(line[6:])["html"])
                if enough(rows):
                    return rows
    raise AssertionError(f"the stream ended after {len(rows)} rows")


def done_counts(rows: list[str]) -> list[int]:
    return [int(m[1]) for html in rows if (m := re.search(r'<b class="done">(\d+)</b>', html))]


async def test_run_watch_stop_resume_and_report(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        slow_site: TestSite) -> None:
    site_file(library, "slow", slow_site.base, per_host=1, workers=1)
    status, _ = await post(ui, session, "/site/slow/run", {})
    assert status == 303
    rows = await sse_rows(session, ui, "slow", lambda rows: len(set(done_counts(rows))) >= 3,
                          timeout=30)
    counts = done_counts(rows)
    assert len(set(counts)) >= 3 and counts == sorted(counts), counts  # the counts move
    holder = ArchiveLock.holder(library / "archive" / "slow")
    assert holder is not None
    status, _ = await post(ui, session, "/site/slow/stop", {})
    assert status == 303
    await until(lambda: ArchiveLock.holder(library / "archive" / "slow") is None, 20,
                "the run to stop")
    runs = runs_of(library, "slow")
    assert [(r.state, r.exit_code) for r in runs] == [("interrupted", 130)]
    assert "interrupted" in await row_text(session, ui, "slow")
    # resume: the same run goes on to the end
    status, _ = await post(ui, session, "/site/slow/run", {})
    assert status == 303
    await until(lambda: (r := runs_of(library, "slow")) and r[-1].state == "complete", 60,
                "the resumed run to complete")
    runs = runs_of(library, "slow")
    assert [r.id for r in runs] == [1] and runs[0].exit_code == 0
    text = await until(lambda: _idle_row(session, ui), 10, "the row to show the ended run")
    assert "run 1" in text and "44 new" in text and "exit 0 (complete)" in text
    async with session.get(ui.base + "site/slow/runs/1") as r:
        report = await r.text()
    assert r.status == 200
    assert "Broken links (3)" in report and "missing0.html" in report
    assert "4xx: 3" in report and "2xx: 41" in report
    assert report.count('href="/site/slow/browse?url=') >= 41 + 3


async def _idle_row(session: aiohttp.ClientSession, ui: UiProcess) -> str | None:
    text = await row_text(session, ui, "slow")
    return text if " idle " in text else None


async def test_a_run_started_in_a_terminal_shows_and_blocks_a_second_run(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        slow_site: TestSite) -> None:
    path = site_file(library, "cli", slow_site.base, per_host=1, workers=1)
    proc = subprocess.Popen([sys.executable, "-m", "mirror", "run", "-q", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        text = await until(lambda: _running_row(session, ui), 20, "the terminal's run")
        assert "done" in text and "queued" in text
        status, page = await post(ui, session, "/site/cli/run", {})
        assert status == 409 and f"(pid {proc.pid}) is already using this archive" in page
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(30)
    assert proc.returncode == 130
    assert [r.id for r in runs_of(library, "cli")] == [1]


async def _running_row(session: aiohttp.ClientSession, ui: UiProcess) -> str | None:
    text = await row_text(session, ui, "cli")
    return text if " running " in text and " done " in text else None


async def test_closing_the_app_kills_no_run_and_a_new_app_shows_it(
        library: Path, slow_site: TestSite) -> None:
    site_file(library, "lasting", slow_site.base, per_host=1, workers=1)
    first = UiProcess.start(library)
    try:
        async with first.session() as s:
            status, _ = await post(first, s, "/site/lasting/run", {})
            assert status == 303
        await until(lambda: ArchiveLock.holder(library / "archive" / "lasting"), 20,
                    "the run to take its lock")
    finally:
        assert first.stop() == 0
    holder = ArchiveLock.holder(library / "archive" / "lasting")
    assert holder is not None  # the run outlived the app
    second = UiProcess.start(library)
    try:
        async with second.session() as s:
            text = await row_text(s, second, "lasting")
            assert " running " in text
            await until(lambda: (r := runs_of(library, "lasting")) and r[-1].state == "complete",
                        60, "the run to complete")
    finally:
        second.stop()


# -- browse, jobs, explain ---------------------------------------------------------------------


async def finished_site(ui: UiProcess, session: aiohttp.ClientSession, library: Path,
                        site: TestSite, name: str) -> None:
    site_file(library, name, site.base)
    status, _ = await post(ui, session, f"/site/{name}/run", {})
    assert status == 303
    await until(lambda: (r := runs_of(library, name)) and r[-1].state == "complete", 60,
                "the run to complete")
    await until(lambda: ArchiveLock.holder(library / "archive" / name) is None, 10,
                "the lock to be released")


async def test_browse_replays_from_another_origin_without_archived_cookies(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = chain_site(await make_site(), 3)
    await finished_site(ui, session, library, site, "quick")
    async with session.get(ui.base + "site/quick/browse?url=" + site.base + "p1.html",
                           allow_redirects=False) as r:
        assert r.status == 303
        target = r.headers["Location"]
    # its own name under localhost, its own token (not the app's) once in the address
    replay, _, query = target.partition("?")
    assert re.fullmatch(r"http://m[0-9a-f]{24}\.localhost:\d+/", replay)
    assert replay != ui.base and ui.token not in target
    to = parse_qs(query)["to"][0]
    assert to == f"/99991231235959/{site.base}p1.html"
    async with aiohttp.ClientSession() as stranger:  # any local user: nothing to read
        async with stranger.get(replay.rstrip("/") + to) as page:
            assert page.status == 403 and "text 1" not in await page.text()
        async with stranger.get(replay) as page:
            assert page.status == 403
    async with aiohttp.ClientSession() as browser:
        async with browser.get(target) as page:  # the 303 sets its cookie, then the page
            assert page.status == 200 and "text 1" in await page.text()
            assert str(page.url) == replay.rstrip("/") + to  # the token left the address
            assert "Set-Cookie" not in page.headers
            assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")
            cookie = page.history[0].cookies[f"mirror_replay_{page.url.port}"]
            assert cookie["httponly"] and cookie.value not in (ui.token, ui.cookie)
        replay_port = replay.split(":")[2].rstrip("/")
        for host in (f"evil.test:{replay_port}", f"127.0.0.1:{replay_port}"):
            async with browser.get(replay, headers={"Host": host}) as page:
                assert page.status == 421
        async with browser.get(replay + "_library", allow_redirects=False) as back:
            # the banner's way back: the app's name only in a redirect, never in a page
            assert back.status == 303 and back.headers["Location"] == ui.base + "site/quick"


async def test_export_and_verify_jobs_report_their_end(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]], tmp_path: Path) -> None:
    site = chain_site(await make_site(), 5)
    await finished_site(ui, session, library, site, "jobs")
    wacz = tmp_path / "out" / "jobs.wacz"
    status, _ = await post(ui, session, "/site/jobs/export", {"kind": "wacz", "to": str(wacz)})
    assert status == 303
    status, _ = await post(ui, session, "/site/jobs/export", {"kind": "folder"})
    assert status in (303, 409)  # one job per site at a time
    page = await until(lambda: _jobs_page(session, ui, "jobs"), 30, "the export to end")
    assert "<b>export WACZ</b> · done" in page and f"wrote {wacz}" in page
    assert wacz.stat().st_size > 0
    status, _ = await post(ui, session, "/site/jobs/verify", {})
    assert status == 303
    page = await until(lambda: _jobs_page(session, ui, "jobs", "verify"), 30, "verify to end")
    assert "<b>verify</b> · done" in page and re.search(r"verified 1 file, \d+ records: OK", page)


async def _jobs_page(session: aiohttp.ClientSession, ui: UiProcess, name: str,
                     kind: str = "export") -> str | None:
    async with session.get(ui.base + f"site/{name}") as r:
        page = await r.text()
    jobs = page.split('<div id="jobs">', 1)[1]
    return page if f"<b>{kind}" in jobs and "· running" not in jobs else None


async def test_explain_answers_for_a_url_from_the_archive(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = chain_site(await make_site(), 2)
    site_file(library, "why", site.base)
    async with session.get(ui.base + "site/why/explain",
                           params={"url": site.base + "p1.html?utm_source=x"}) as r:
        page = await r.text()
    assert f"canonical  {site.base}p1.html" in page
    async with session.get(ui.base + "site/why/explain",
                           params={"url": "https://elsewhere.test/"}) as r:
        assert "rule host" in await r.text()


async def test_another_loopback_address_is_its_own_host(library: Path) -> None:
    ui = UiProcess.start(library, "--host", "127.0.0.2")
    try:
        assert ui.base.startswith("http://127.0.0.2:")
        async with ui.session() as s, s.get(ui.base) as r:
            assert r.status == 200
    finally:
        ui.stop()


async def test_bound_beyond_loopback_the_replay_asks_for_the_token_too(
        library: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = chain_site(await make_site(), 2)
    ui = UiProcess.start(library, "--host", "0.0.0.0")
    try:
        assert any("whoever can reach port" in line for line in ui.lines)
        port = ui.base.rsplit(":", 1)[1].rstrip("/")
        local = UiProcess(library, ui.proc, f"http://127.0.0.1:{port}/", ui.token)
        async with local.session() as s:
            await finished_site(local, s, library, site, "open")
            async with s.get(local.base + "site/open/browse", allow_redirects=False) as r:
                entry = r.headers["Location"]
            replay_port = entry.rsplit(":", 1)[1].split("/")[0]
            replay = f"http://127.0.0.1:{replay_port}/"
            async with s.get(replay + "?" + entry.partition("?")[2]) as r:
                assert r.status == 200 and "archived pages" in await r.text()
        async with aiohttp.ClientSession() as stranger, stranger.get(replay) as r:
            assert r.status == 403
    finally:
        ui.stop()
