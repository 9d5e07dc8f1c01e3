"""The library's schedule column (issue 18): next run, and the flags for a missed run, a
failed one, one still going when the next was due, and a scheduled run waiting for it."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from test_schedule import home, real_crontab  # noqa: F401 (fixtures)

from mirror.app.guard import Secrets
from mirror.app.server import LibraryApp
from mirror.app.status import RunSummary, SiteState, SiteStatus, schedule_view
from mirror.archive.lock import ArchiveLock
from mirror.manifest.writer import Manifest
from mirror.run.progressfile import LiveProgress
from mirror.run.wait import wait_folder
from mirror.schedule.spec import parse_schedule
from mirror.schedule.timers import Site

UTC = dt.UTC
NOW = dt.datetime(2024, 3, 6, 12, 0, tzinfo=UTC)  # a Wednesday
DAILY = parse_schedule("daily 03:15")


def last(started: str, finished: str | None, code: int | None = 0,
         state: str = "complete") -> RunSummary:
    return RunSummary(7, state, started, finished, code)


def idle(summary: RunSummary, state: SiteState = SiteState.IDLE) -> SiteStatus:
    return SiteStatus(state, last=summary)


def live(started: dt.datetime) -> LiveProgress:
    return LiveProgress(pid=42, run_id=8, updated=NOW.timestamp(), started=started.timestamp(),
                        done=1, queued=1, failed=0, retried=0, bytes=0, held_back=0, rate=0.0,
                        eta=None)


def test_an_unscheduled_site_has_no_view() -> None:
    assert schedule_view(None, SiteStatus(SiteState.IDLE), NOW) is None


def test_next_run_on_the_clock_of_now() -> None:
    view = schedule_view(DAILY, idle(last("2024-03-06T03:15:00Z", "2024-03-06T03:20:00Z")),
                         NOW)
    assert view is not None
    assert (view.every, view.next_run, view.flags) == (
        "daily 03:15", dt.datetime(2024, 3, 7, 3, 15, tzinfo=UTC), ())
    plus1 = dt.timezone(dt.timedelta(hours=1))  # the same moment, an hour ahead: 13:00
    view = schedule_view(DAILY, idle(last("2024-03-06T02:15:00Z", None)), NOW.astimezone(plus1))
    assert view is not None and view.next_run == dt.datetime(2024, 3, 7, 3, 15, tzinfo=plus1)


@pytest.mark.parametrize(("finished", "now", "flag"), [
    ("2024-03-05T03:40:00Z", "2024-03-06T04:14:00", None),  # today's run: within the grace
    ("2024-03-05T03:40:00Z", "2024-03-06T04:15:00", "missed the run due today 03:15"),
    ("2024-03-01T03:40:00Z", "2024-03-06T12:00:00", "missed the run due Sat 03:15"),
    ("2024-02-01T03:40:00Z", "2024-03-06T12:00:00", "missed the run due 2024-02-02 03:15"),
    ("2024-03-06T11:00:00Z", "2024-03-06T12:00:00", None),  # a run by hand counts too
])
def test_a_missed_run_is_flagged_after_one_period_and_a_grace(
        finished: str, now: str, flag: str | None) -> None:
    view = schedule_view(DAILY, idle(last("2024-01-01T00:00:00Z", finished)),
                         dt.datetime.fromisoformat(now).replace(tzinfo=UTC))
    assert view is not None and view.flags == ((flag,) if flag else ())


def test_the_grace_is_half_a_period_for_frequent_schedules() -> None:
    hourly = parse_schedule("hourly")
    status = idle(last("2024-03-06T10:00:00Z", "2024-03-06T10:05:00Z"))
    at = dt.datetime(2024, 3, 6, 11, 29, tzinfo=UTC)
    assert schedule_view(hourly, status, at).flags == ()  # type: ignore[union-attr]
    flagged = schedule_view(hourly, status, at + dt.timedelta(minutes=1))
    assert flagged is not None and flagged.flags == ("missed the run due today 11:00",)


def test_a_failed_or_interrupted_last_run_is_flagged() -> None:
    failed = idle(last("2024-03-06T03:15:00Z", "2024-03-06T03:16:00Z", 1), SiteState.FAILED)
    assert schedule_view(DAILY, failed, NOW).flags == (  # type: ignore[union-attr]
        "the last run failed (exit 1)",)
    cut = idle(last("2024-03-06T03:15:00Z", None, None, "interrupted"), SiteState.INTERRUPTED)
    assert schedule_view(DAILY, cut, NOW).flags == (  # type: ignore[union-attr]
        "the last run was interrupted",)


def test_a_run_still_going_when_the_next_is_due() -> None:
    going = SiteStatus(SiteState.RUNNING, holder="42",
                       live=live(dt.datetime(2024, 3, 6, 3, 15, tzinfo=UTC)))
    assert schedule_view(DAILY, going, NOW).flags == ()  # type: ignore[union-attr]
    tomorrow = dt.datetime(2024, 3, 7, 3, 20, tzinfo=UTC)
    view = schedule_view(DAILY, going, tomorrow)
    assert view is not None and view.flags == (
        "still running when the next run was due (today 03:15); that one waits for it",)
    waited = SiteStatus(SiteState.RUNNING, holder="42", live=going.live, waiting="99")
    view = schedule_view(DAILY, waited, tomorrow)
    assert view is not None and view.flags[-1] == "a scheduled run (pid 99) waits for the lock"


# --- in the library's rows -----------------------------------------------------------------------


def write_site(library: Path, name: str, every: str | None) -> Path:
    path = library / f"{name}.toml"
    text = f'[site]\nname = "{name}"\nstart_urls = ["http://127.0.0.1:9/"]\n'
    path.write_text(text + (f'[schedule]\nevery = "{every}"\n' if every else ""))
    return path


def cells(html: str) -> str:
    found = re.search(r'<td class="schedule">(.*?)</td>', html, re.DOTALL)
    assert found, html
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found[1])).strip()


@pytest.mark.usefixtures("real_crontab")
def test_the_rows_show_schedule_next_run_and_flags(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    write_site(library, "plain", None)
    write_site(library, "nightly", "daily 03:15")
    manifest = Manifest(library / "archive" / "nightly" / "manifest.sqlite3")
    run = manifest.runs.start("2024-01-01T03:15:00Z", "sha256:x")
    manifest.runs.finish(run, "2024-01-01T03:20:00Z", "complete", 1)
    manifest.close()
    app = LibraryApp(library, keys=Secrets(), hosts=lambda: frozenset())
    rows = {entry.id: app.row(entry) for entry in app.library.sites()}
    assert cells(app.render_row(rows["plain"])) == "not scheduled"
    text = cells(app.render_row(rows["nightly"]))  # no timer: no missed run, and Apply
    assert text == "daily 03:15 not installed — Apply to install the last run failed (exit 1)"
    nightly = library / "nightly.toml"
    app.schedules.change(Site(nightly, "nightly", DAILY), install=True)
    text = cells(app.render_row(app.row(app.library.get("nightly"))))  # type: ignore[arg-type]
    assert re.fullmatch(r"daily 03:15 crontab installed next (today|\w{3}) 03:15 missed the "
                        r"run due 2024-01-02 03:15 the last run failed \(exit 1\)", text), text
    # a run going, and a scheduled run waiting for it
    archive = library / "archive" / "nightly"
    with ArchiveLock(wait_folder(archive)), ArchiveLock(archive):
        entry = app.library.get("nightly")
        assert entry is not None
        text = cells(app.render_row(app.row(entry)))
    assert text.endswith(f"a scheduled run (pid {os.getpid()}) waits for the lock"), text


@pytest.mark.usefixtures("real_crontab")
def test_a_row_built_from_an_entry_read_before_a_save_does_not_stand_for_the_saved_file(
        tmp_path: Path) -> None:
    """A look at the rows (the live events, the home page) reads the site's entry, the
    Settings page saves the file, and the look builds its row: the row of the old entry,
    after the save. The site's page, reading the saved file, shows the saved schedule, not
    that row (in CI the page showed no schedule: its row came from that cache)."""
    library = tmp_path / "library"
    library.mkdir()
    write_site(library, "site", None)
    app = LibraryApp(library, keys=Secrets(), hosts=lambda: frozenset())
    before = app.library.get("site")
    assert before is not None and before.config is not None
    write_site(library, "site", "daily 03:15")  # the Settings page's save
    assert app.row(before).entry is before  # the racing look, finishing after the save
    after = app.library.get("site")
    assert after is not None and after.config is not None
    assert after.config.schedule.every is not None
    row = app.row(after)
    assert row.entry is after
    assert cells(app.render_row(row)).startswith("daily 03:15"), cells(app.render_row(row))
