"""Schedules in the app (issue 31): each site's timer as the OS has it (the real crontab in a
private spool; systemd user timers where a user manager runs), the next time the OS runs
it, the last scheduled run, and Apply / Remove through the real app and a real browser."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_schedule import crontab_lines, home, real_crontab  # noqa: F401 (fixtures)
from uiproc import UiProcess, csrf_of, post

from mirror.app.schedules import REFRESH, TimerCache, last_text, site_schedule
from mirror.app.status import RunSummary, SiteState, SiteStatus
from mirror.model import Run
from mirror.schedule import crontab, lastrun, osview, systemd
from mirror.schedule.lastrun import ScheduledStart
from mirror.schedule.osview import TimerState, cron_next, parse_show, timer_view
from mirror.schedule.spec import parse_schedule
from mirror.schedule.timers import Installed, Site, scheduled_argv

UTC = dt.UTC
NOW = dt.datetime(2024, 3, 6, 12, 0, tzinfo=UTC)  # a Wednesday
DAILY = parse_schedule("daily 03:15")
FILE = Path("/lib/a.toml")


def installed(cron_text: str | None, problem: str | None = None) -> osview.OsTimers:
    have = Installed({}, Path("/nonexistent"), {}, ["crontab"], cron_text, problem)
    return osview.OsTimers(have, manager=False)


def line_for(schedule_text: str) -> str:
    return crontab.line(parse_schedule(schedule_text), FILE, scheduled_argv(FILE))


# --- pure ------------------------------------------------------------------------------------


def test_the_timer_as_the_crontab_has_it() -> None:
    site = Site(FILE, "a", DAILY)
    missing = timer_view(site, installed("0 1 * * * backup.sh\n"), NOW)
    assert missing is not None and (missing.state, missing.text, missing.next) == (
        TimerState.MISSING, "not installed — Apply to install", None)
    ok = timer_view(site, installed(line_for("daily 03:15") + "\n"), NOW)
    assert ok is not None and (ok.state, ok.text) == (TimerState.INSTALLED, "crontab installed")
    assert ok.next == dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC)
    # the file says hourly now: the line is out of date, and the next time is the line's
    stale = timer_view(Site(FILE, "a", parse_schedule("hourly")),
                       installed(line_for("daily 03:15") + "\n"), NOW)
    assert stale is not None and stale.state == TimerState.STALE
    assert stale.text == "crontab out of date — Apply to update"
    assert stale.next == dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC)
    stray = timer_view(Site(FILE, "a", None), installed(line_for("daily 03:15") + "\n"), NOW)
    assert stray is not None and stray.state == TimerState.STRAY and "Remove" in stray.text
    assert timer_view(Site(FILE, "a", None), installed(""), NOW) is None
    unknown = timer_view(site, installed(None, "`crontab -l` failed: denied"), NOW)
    assert unknown is not None and unknown.text == ("cannot read the crontab: `crontab -l` "
                                                    "failed: denied")


def test_cron_next_reads_the_installed_lines_own_fields() -> None:
    assert cron_next("*/30 9-17 * * mon-fri /bin/x # mirror-schedule: /a", NOW) == \
        dt.datetime(2024, 3, 6, 12, 30, tzinfo=UTC)
    assert cron_next("@daily /bin/x", NOW) is None  # not a line of ours: no guess
    assert cron_next("", NOW) is None


def test_systemd_show_is_parsed_by_unit() -> None:
    text = ("Id=mirror-a.timer\nNextElapseUSecRealtime=@1709781300\nLastTriggerUSec=n/a\n"
            "ActiveState=active\n\nId=mirror-b\\x2dc.timer\nNextElapseUSecRealtime=\n"
            "LastTriggerUSec=@1709695000\nActiveState=inactive\n")
    found = parse_show(text)
    assert set(found) == {"mirror-a", "mirror-b\\x2dc"}
    a = found["mirror-a"]
    assert a.next == dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC) and a.last is None
    assert a.active == "active"
    assert found["mirror-b\\x2dc"].next is None and found["mirror-b\\x2dc"].active == "inactive"


def test_units_no_user_manager_loads_are_said() -> None:
    site = Site(FILE, "a", DAILY)
    units = systemd.Units(systemd.unit_name("a"),
                          systemd.service_text("a", FILE, scheduled_argv(FILE)),
                          systemd.timer_text("a", FILE, DAILY))
    have = Installed({}, Path("/units"), {FILE: units}, None, None, "no crontab command")
    view = timer_view(site, osview.OsTimers(have, manager=False), NOW)
    assert view is not None and view.state == TimerState.INSTALLED
    assert view.text == "systemd mirror-a.timer installed" and view.next is None
    assert "nothing starts these units" in view.note
    loaded = osview.OsTimers(have, True, {"mirror-a": osview.UnitTimes(
        dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC), None, "active")})
    view = timer_view(site, loaded, NOW)
    assert view is not None and view.note == ""
    assert view.next == dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC)


def test_no_missed_run_without_a_timer_but_with_one() -> None:
    status = SiteStatus(SiteState.IDLE, last=RunSummary(
        3, "complete", "2024-03-01T03:15:00Z", "2024-03-01T03:20:00Z", 0))
    site = Site(FILE, "a", DAILY)
    none = site_schedule(site, installed(""), status, None, NOW)
    assert none is not None and none.flags == ()
    have = site_schedule(site, installed(line_for("daily 03:15") + "\n"), status, None, NOW)
    assert have is not None and have.flags == ("missed the run due Sat 03:15",)


def test_the_last_scheduled_run_is_said() -> None:
    now = dt.datetime(2024, 3, 6, 3, 20, tzinfo=UTC).timestamp()
    start = ScheduledStart("2024-03-06T03:15:00Z", 42)
    assert last_text(None) == ""
    assert last_text(start, now) == "started 5 min ago, still going"
    done = ScheduledStart("2024-03-06T03:15:00Z", 42, "2024-03-06T03:16:00Z", 0, 5)
    assert last_text(done, now) == "run 5, 5 min ago, exit 0"
    skipped = ScheduledStart("2024-03-06T03:15:00Z", 42, "2024-03-06T03:15:00Z", 75, None,
                             "/x: a scheduled run (pid 7) is already waiting")
    assert last_text(skipped, now) == ("skipped 5 min ago: a scheduled run (pid 7) is "
                                       "already waiting")


def test_which_run_a_scheduled_start_worked_on() -> None:
    start = ScheduledStart("2024-03-06T03:15:00Z", 1)
    old = Run(4, "2024-03-05T03:15:00Z", "2024-03-05T03:20:00Z", "complete", "x", 0)
    new = Run(5, "2024-03-06T03:15:01Z", "2024-03-06T03:20:00Z", "complete", "x", 0)
    cut = Run(4, "2024-03-05T03:15:00Z", None, "interrupted", "x", 130)
    resumed = Run(4, "2024-03-05T03:15:00Z", "2024-03-06T03:18:00Z", "complete", "x", 0)
    assert lastrun.run_of(old, new, start) == 5 and lastrun.run_of(None, new, start) == 5
    assert lastrun.run_of(cut, resumed, start) == 4
    assert lastrun.run_of(old, old, start) is None and lastrun.run_of(None, None, start) is None


# --- the OS, read at most every few seconds ------------------------------------------------


def cron() -> str:
    """The test's crontab command (the fixture `real_crontab` set it: a private spool)."""
    return os.environ[crontab.CRONTAB_ENV]


@pytest.mark.usefixtures("real_crontab")
def test_the_cache_reads_the_os_once_per_refresh() -> None:
    cache = TimerCache(os.environ)
    began = time.monotonic()
    first = cache.stamp()
    for _ in range(2000):  # 2,000 rows x ticks
        assert cache.stamp() == first
    allowed = 1 + int((time.monotonic() - began) // REFRESH) + 1
    assert 1 <= cache.reads <= allowed
    subprocess.run([cron(), "-"], input=line_for("hourly") + "\n", text=True,
                   check=True, timeout=30)
    cache.refresh()
    assert cache.stamp() == first + 1  # a change is a new version
    cache.refresh()
    assert cache.stamp() == first + 1  # the same again is not


# --- the real app ----------------------------------------------------------------------------


def write_site(library: Path, name: str, every: str | None) -> Path:
    path = library / f"{name}.toml"
    text = (f'[site]\nname = "{name}"\nstart_urls = ["http://127.0.0.1:9/"]\n'
            f'output_dir = "archive/{name}"\n[scope]\nrobots = false\n')
    path.write_text(text + (f'[schedule]\nevery = "{every}"\n' if every else ""))
    return path


def schedule_cell(page: str, site: str) -> str:
    row = re.search(rf'<tr id="site-{site}".*?<td class="schedule">(.*?)</td>', page, re.DOTALL)
    assert row, page
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row[1])).strip()


async def get(ui: UiProcess, path: str) -> str:
    async with ui.session() as s, s.get(ui.base + path.lstrip("/")) as r:
        assert r.status == 200, await r.text()
        return await r.text()


def clock(moment: dt.datetime) -> str:
    from mirror.app.views import clock as app_clock

    return app_clock(moment)


@pytest.mark.usefixtures("real_crontab")
async def test_apply_and_remove_through_the_app(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    nightly = write_site(library, "nightly", "daily 03:15")
    write_site(library, "plain", None)
    subprocess.run([cron(), "-"], input='MAILTO=""\n0 1 * * * backup.sh\n', text=True,
                   check=True, timeout=30)
    ui = UiProcess.start(library)
    try:
        home = await get(ui, "/")
        assert schedule_cell(home, "nightly") == "daily 03:15 not installed — Apply to install"
        assert schedule_cell(home, "plain") == "not scheduled"
        page = await get(ui, "/site/nightly")
        assert 'action="/site/nightly/schedule/apply"' in page
        assert "/schedule/remove" not in page

        # Apply: the crontab holds the line, the page says so with cron's next time
        async with ui.session() as s:
            status, _ = await post(ui, s, "/site/nightly/schedule/apply", {})
            assert status == 303
            async with s.get(ui.base + "site/nightly") as r:
                page = await r.text()
        (line,) = [t for t in crontab_lines(cron()) if "mirror-schedule" in t]
        assert crontab_lines(cron())[:2] == ['MAILTO=""', "0 1 * * * backup.sh"]
        assert line.startswith("15 3 * * * ") and line.endswith(f"# mirror-schedule: {nightly}")
        expected = cron_next(line, dt.datetime.now().astimezone())
        assert expected is not None
        home = await get(ui, "/")
        assert schedule_cell(home, "nightly") == f"daily 03:15 crontab installed next " \
                                                 f"{clock(expected)}"
        page = await get(ui, "/site/nightly?message=x")
        assert 'data-timer="installed"' in page and "/schedule/apply" not in page
        assert f"the OS runs it next {clock(expected)}" in page

        # the file says something else now: out of date, until Apply again
        nightly.write_text(nightly.read_text().replace("daily 03:15", "weekly sun 04:00"))
        page = await get(ui, "/site/nightly")
        assert "crontab out of date — Apply to update" in page

        # Remove: the line is gone, everything else of the crontab stays
        async with ui.session() as s:
            status, _ = await post(ui, s, "/site/nightly/schedule/remove", {})
            assert status == 303
        assert crontab_lines(cron()) == ['MAILTO=""', "0 1 * * * backup.sh"]
        home = await get(ui, "/")
        assert schedule_cell(home, "nightly") == "weekly sun 04:00 not installed — Apply to " \
                                                 "install"
    finally:
        ui.stop()


@pytest.mark.usefixtures("real_crontab")
async def test_the_result_message_and_refusals(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    write_site(library, "nightly", "daily 03:15")
    write_site(library, "plain", None)
    ui = UiProcess.start(library)
    try:
        async with ui.session() as s:
            async with s.get(ui.base + "site/nightly") as r:
                token = csrf_of(await r.text())
            async with s.post(ui.base + "site/nightly/schedule/apply", data={"csrf": token},
                              headers={"Origin": ui.origin}) as r:  # follows the redirect
                page = await r.text()
            assert re.search(r'role="status">nightly: crontab line, daily 03:15, next run '
                             r"\w{3} \d{4}-\d\d-\d\d 03:15<", page), page
            status, page = await post(ui, s, "/site/plain/schedule/apply", {})
            assert status == 409 and "has no [schedule] every: say when in Settings" in page
            # the guard: no CSRF token, no change
            async with s.post(ui.base + "site/nightly/schedule/remove", data={},
                              headers={"Origin": ui.origin}, allow_redirects=False) as r:
                assert r.status == 403
        assert any("mirror-schedule" in t for t in crontab_lines(cron()))
    finally:
        ui.stop()


@pytest.mark.usefixtures("real_crontab")
async def test_the_last_scheduled_run_in_the_app(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    site = write_site(library, "nightly", "daily 03:15")
    proc = subprocess.run([sys.executable, "-m", "mirror", "run", "--quiet", "--scheduled",
                           str(site)], capture_output=True, text=True, timeout=120)
    record = lastrun.read(library / "archive" / "nightly")
    assert record is not None and record.pid != os.getpid()
    assert (record.run, record.exit_code, record.skipped) == (1, proc.returncode, None)
    ui = UiProcess.start(library)
    try:
        cell = schedule_cell(await get(ui, "/"), "nightly")
        assert re.search(rf"last scheduled: run 1, \d+ s ago, exit {proc.returncode} ",
                         cell), cell
        # the site's address answers nothing: the run stored no page, a failure to say
        assert proc.returncode == 3 and cell.endswith("the last run failed (exit 3)"), cell
    finally:
        ui.stop()


def test_systemd_user_timers_through_the_app(tmp_path: Path) -> None:
    """Where a user manager runs: Apply writes and starts a user timer, the app's next time
    is systemd's own, Remove stops and deletes it. The units go where that manager reads
    them (the real ~/.config/systemd/user), under a name no one else uses, removed after."""
    if not systemd.user_manager(os.environ):
        probe = subprocess.run(["systemctl", "--user", "show-environment"],
                               capture_output=True, text=True, timeout=30, check=False)
        pytest.skip("no systemd user manager answers here (`systemctl --user "
                    f"show-environment`: {(probe.stderr or probe.stdout).strip()})")
    from mirror.app.schedules import change_timer

    name = f"test-{os.getpid()}-{time.monotonic_ns()}"
    site = Site(write_site(tmp_path, name, "daily 03:15"), name, DAILY)
    try:
        said = change_timer(site, os.environ, install=True)
        assert said.startswith(f"{name}: systemd timer {systemd.unit_name(name)}.timer")
        view = timer_view(site, osview.read(os.environ), dt.datetime.now().astimezone())
        assert view is not None and view.state == TimerState.INSTALLED and view.note == ""
        assert view.next == cron_next("15 3 * * *", dt.datetime.now().astimezone())
    finally:
        change_timer(Site(site.file, name, None, ""), os.environ, install=False)
    assert timer_view(site, osview.read(os.environ), NOW).state == (  # type: ignore[union-attr]
        TimerState.MISSING)


@pytest.mark.browser
@pytest.mark.usefixtures("real_crontab")
async def test_apply_in_a_browser(tmp_path: Path) -> None:
    from replayers import chromium

    library = tmp_path / "library"
    library.mkdir()
    write_site(library, "nightly", "weekly sun 04:00")
    ui = UiProcess.start(library)
    try:
        async with chromium() as browser:
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(30_000)
            page.on("dialog", lambda dialog: dialog.accept())
            await page.goto(f"{ui.base}site/nightly?token={ui.token}")
            section = page.locator("section#schedule")
            assert "not installed — Apply to install" in await section.inner_text()
            await section.locator("button:has-text('Apply')").click()
            await page.wait_for_selector("section#schedule [data-timer='installed']")
            assert "nightly: crontab line, weekly sun 04:00, next run Sun " in \
                await page.locator(".message").inner_text()
            (line,) = [t for t in crontab_lines(cron()) if "mirror-schedule" in t]
            expected = cron_next(line, dt.datetime.now().astimezone())
            assert expected is not None
            text = await section.inner_text()
            assert f"the OS runs it next {clock(expected)}" in text, text
            assert await page.locator("#site-nightly td.schedule .next").inner_text() == \
                f"next {clock(expected)}"
            await page.screenshot(path=str(tmp_path / "schedule-applied.png"))
            await section.locator("button:has-text('Remove')").click()
            await page.wait_for_selector("section#schedule [data-timer='not installed']")
        assert not [t for t in crontab_lines(cron()) if "mirror-schedule" in t]
    finally:
        ui.stop()
