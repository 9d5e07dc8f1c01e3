"""Settings in `mirror ui`, through the real app process: every problem of a site file at
once (beside its field), the file's problems when the page opens, the editor of the whole
file, [schedule] and [retention], number inputs, and the banner after a Save; then the
same form in Chromium."""

from __future__ import annotations

import html
import re
from pathlib import Path

import aiohttp
import pytest
from replayers import chromium
from uiproc import UiProcess, post

from mirror.config import load_config

pytestmark = pytest.mark.slow

TIMEOUT = 30_000  # ms, for anything the browser should show
KEPT = """\
# my notes, kept
[site]
name = "kept"  # short
start_urls = ["http://a.test/"]

[crawl]
# be gentle
per_host = 2
"""


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "kept.toml").write_text(KEPT, encoding="utf-8")
    return folder


async def get(session: aiohttp.ClientSession, ui: UiProcess, path: str) -> tuple[int, str]:
    async with session.get(ui.base + path.lstrip("/"), allow_redirects=False) as r:
        return r.status, await r.text()


def invalid_fields(page: str) -> dict[str, list[str]]:
    """The messages shown beside each field the page marks invalid, by field name."""
    shown = {}
    for block in re.findall(r'<div class="field invalid">(.*?)<div class="help">', page, re.S):
        name = re.search(r'name="([^"]+)"', block)
        assert name, block
        shown[name[1]] = [html.unescape(m) for m in re.findall(r'<div class="err"[^>]*>(.*?)</div>',
                                                              block, re.S)]
    return shown


def problems_box(page: str) -> str:
    found = re.search(r'<div class="problems"[^>]*>(.*?)</div>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", found[1])) if found else ""


async def test_one_save_shows_every_bad_field_beside_it_and_writes_nothing(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    status, page = await post(ui, session, "/site/kept/settings", {
        "site.start_urls": "a.test", "crawl.workers": "0", "scope.include": "(",
        "schedule.every": "sometimes", "retention.keep_daily": "7"})
    assert status == 400
    shown = invalid_fields(page)
    assert shown == {
        "site.start_urls": ["[site] start_urls[0]: expected an absolute http(s) URL such as "
                            "'https://example.com/', found 'a.test' (a string)"],
        "scope.include": ["[scope] include[0]: invalid regular expression: missing ), "
                          "unterminated subpattern at position 0"],
        "crawl.workers": ["[crawl] workers: expected an integer from 1 to 1,000,"
                          " found 0 (an integer)"],
        "schedule.every": [shown["schedule.every"][0]],
    }
    assert shown["schedule.every"][0].startswith('[schedule] every: expected "hourly"')
    assert "Not saved: 4 problems, each shown beside its field." in problems_box(page)
    assert 'value="sometimes"' in page and 'value="7"' in page  # what was typed stays
    assert (library / "kept.toml").read_text() == KEPT


async def test_settings_open_with_the_files_problems_shown(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    (library / "kept.toml").write_text(KEPT + 'worker = 3\nper_host = "two"\n'
                                       '[schedule]\nevery = "daily 25:00"\n')
    # per_host twice is invalid TOML: first the file editor alone can open it
    status, page = await get(session, ui, "/site/kept/settings")
    assert status == 200 and "invalid TOML" in problems_box(page)
    assert 'id="site-file"' in page and 'name="crawl.workers"' not in page
    (library / "kept.toml").write_text(KEPT.replace("per_host = 2", 'per_host = "two"')
                                       + 'worker = 3\n[schedule]\nevery = "daily 25:00"\n')
    status, page = await get(session, ui, "/site/kept/settings")
    assert status == 200
    assert invalid_fields(page) == {
        "crawl.per_host": ["[crawl] per_host: expected an integer from 1 to 100,"
                           " found 'two' (a string)"],
        "schedule.every": ["[schedule] every: invalid schedule 'daily 25:00': the hour must be "
                           "0-23, found 25"]}
    assert re.search(r'name="crawl.per_host" value="two" inputmode', page)  # not dropped
    box = problems_box(page)
    assert "This file has 3 problems, each shown beside its field; mirror run refuses" in box
    assert "Not a field of this form (mend it in the file editor):" in box
    assert "[crawl] worker: unknown key; did you mean 'workers'?" in box
    assert 'href="/site/kept/settings/file"' in page


async def test_a_save_writes_schedule_and_retention_and_the_banner_says_saved(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    status, page = await get(session, ui, "/site/kept/settings")
    assert status == 200 and problems_box(page) == ""
    assert re.search(r'name="crawl.workers" value="16" type="number" min="1" max="1000" '
                     r'step="1"', page)
    assert re.search(r'name="crawl.delay" value="0.0" type="number" min="0" max="3600" '
                     r'step="any"', page)
    assert re.search(r'name="retention.keep_last" value="0" type="number" min="0"', page)
    async with session.get(ui.base) as home:
        token = re.search(r'<meta name="csrf" content="([^"]+)"', await home.text())
    assert token
    async with session.post(ui.base + "site/kept/settings", allow_redirects=False, data={
            "csrf": token[1], "schedule.every": "weekly sun 04:00",
            "retention.keep_last": "3", "retention.keep_monthly": "6", "crawl.workers": "16"},
            headers={"Origin": ui.origin}) as r:
        assert r.status == 303
        assert r.headers["Location"] == "/site/kept/settings?message=saved"
    status, page = await get(session, ui, "/site/kept/settings?message=saved")
    assert '<p class="message" role="status">saved</p>' in page
    text = (library / "kept.toml").read_text()
    assert text == KEPT + ('\n[schedule]\nevery = "weekly sun 04:00"\n'
                           "\n[retention]\nkeep_last = 3\nkeep_monthly = 6\n")
    config = load_config(library / "kept.toml")
    assert config.retention.keep_last == 3 and config.schedule.every is not None


def editor_state(page: str) -> tuple[str, str]:
    """The file editor's text and the digest it remembers."""
    text = re.search(r'<textarea id="site-file"[^>]*>\n(.*?)</textarea>', page, re.S)
    seen = re.search(r'name="seen" value="([0-9a-f]+)"', page)
    assert text and seen, page
    return html.unescape(text[1]), seen[1]


async def test_the_file_editor_fixes_what_the_form_cannot(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path) -> None:
    broken = KEPT + "worker = 3\n"
    (library / "kept.toml").write_text(broken)
    status, page = await get(session, ui, "/site/kept/settings/file")
    assert status == 200
    text, seen = editor_state(page)
    assert text == broken
    assert "This file has 1 problem:[crawl] worker: unknown key; did you mean 'workers'?" \
        in problems_box(page).replace("\n", "")
    # a text with new problems is shown back with all of them, and nothing is written
    worse = broken.replace("per_host = 2", "per_host = 0\ndelay = 'soon'")
    status, page = await post(ui, session, "/site/kept/settings/file",
                              {"text": worse, "seen": seen})
    assert status == 400
    assert editor_state(page) == (worse, seen)
    box = problems_box(page)
    assert "Not saved: 3 problems:" in box
    for message in ("[crawl] worker: unknown key; did you mean 'workers'?",
                    "[crawl] per_host: expected an integer from 1 to 100, found 0 (an integer)",
                    "[crawl] delay: expected a number from 0 to 3600, found 'soon' (a string)"):
        assert message in box
    assert (library / "kept.toml").read_text() == broken
    # the fix is written as typed: comments, blank lines, spacing
    fixed = broken.replace("worker = 3", "workers   =   3  # fixed in the app\n\n")
    status, _ = await post(ui, session, "/site/kept/settings/file", {"text": fixed,
                                                                   "seen": seen})
    assert status == 303
    assert (library / "kept.toml").read_text() == fixed
    assert load_config(library / "kept.toml").crawl.workers == 3
    # the page it was opened from is stale now: refused, the typed text shown back
    status, page = await post(ui, session, "/site/kept/settings/file",
                              {"text": broken, "seen": seen})
    assert status == 409 and "changed on disk" in problems_box(page)
    assert editor_state(page)[0] == broken and editor_state(page)[1] != seen
    assert (library / "kept.toml").read_text() == fixed
    # without the CSRF token nothing is written either
    async with session.post(ui.base + "site/kept/settings/file", data={"text": broken},
                            headers={"Origin": ui.origin}, allow_redirects=False) as r:
        assert r.status == 403
    assert (library / "kept.toml").read_text() == fixed


@pytest.mark.browser
async def test_four_bad_fields_in_one_save_in_a_browser(ui: UiProcess, library: Path,
                                                        tmp_path: Path) -> None:
    shots = tmp_path  # the pages as a person sees them, to look at when the test fails
    async with chromium() as browser:
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        page = await context.new_page()
        page.set_default_timeout(TIMEOUT)
        await page.goto(f"{ui.base}?token={ui.token}")
        await page.goto(ui.base + "site/kept/settings")
        assert await page.locator("#f-crawl\\.workers").get_attribute("type") == "number"
        await page.fill("#f-site\\.start_urls", "a.test")
        await page.fill("#f-crawl\\.workers", "0")
        await page.fill("#f-scope\\.exclude", "[")
        await page.fill("#f-schedule\\.every", "daily 25:00")
        await page.click("button:has-text('Save')")
        await page.wait_for_selector("#problems")
        invalid = page.locator(".field.invalid")
        assert await invalid.count() == 4
        beside = {await f.locator("textarea, input").first.get_attribute("name"):
                  await f.locator(".err").inner_text() for f in await invalid.all()}
        assert beside == {
            "site.start_urls": "[site] start_urls[0]: expected an absolute http(s) URL such "
                               "as 'https://example.com/', found 'a.test' (a string)",
            "scope.exclude": "[scope] exclude[0]: invalid regular expression: unterminated "
                             "character set at position 0",
            "crawl.workers": "[crawl] workers: expected an integer from 1 to 1,000,"
                             " found 0 (an integer)",
            "schedule.every": "[schedule] every: invalid schedule 'daily 25:00': the hour "
                              "must be 0-23, found 25"}
        assert (library / "kept.toml").read_text() == KEPT
        await page.screenshot(path=str(shots / "app-settings-errors.png"), full_page=True)

        # the file editor: the browser sends CRLF, the file keeps its LF
        await page.click("text=Edit the whole file")
        text = await page.input_value("#site-file")
        assert text == KEPT
        await page.fill("#site-file", text.replace("per_host = 2", "per_host = 3\nworkr = 1"))
        await page.click("button:has-text('Save the file')")
        assert "[crawl] workr: unknown key; did you mean 'workers'?" in \
            await page.inner_text("#problems")
        await page.screenshot(path=str(shots / "app-settings-file.png"), full_page=True)
        await page.fill("#site-file", text.replace("per_host = 2", "per_host = 3  # kept"))
        await page.click("button:has-text('Save the file')")
        await page.wait_for_url(re.compile(r"/site/kept/settings\?message=saved$"))
        assert await page.inner_text("p.message") == "saved"
        assert (library / "kept.toml").read_bytes() == \
            KEPT.replace("per_host = 2", "per_host = 3  # kept").encode()
        assert await page.input_value("#f-crawl\\.per_host") == "3"
        await context.close()
