"""Schedules (issue 18): the pure parser and next run, checked against systemd's own calendar
(`systemd-analyze calendar`); the units checked by `systemd-analyze verify`; crontab lines
installed by the real `crontab`; `mirror schedule apply | list | remove`; the one waiter."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.archive.lock import ArchiveLock
from mirror.cli import main as mirror_cli
from mirror.run.wait import waiting
from mirror.schedule import crontab, systemd
from mirror.schedule.spec import Schedule, ScheduleError, next_run, parse_schedule, period
from mirror.schedule.timers import scheduled_argv

UTC = dt.UTC


def at(text: str, tz: dt.tzinfo | None = None) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=tz)


def runs(schedule: Schedule, after: dt.datetime, n: int) -> list[dt.datetime]:
    out = []
    for _ in range(n):
        found = next_run(schedule, after)
        assert found is not None
        out.append(found)
        after = found
    return out


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "canonical", "cron", "calendar"), [
    ("hourly", "hourly", "0 * * * *", ("*-*-* *:00:00",)),
    ("daily 03:15", "daily 03:15", "15 3 * * *", ("*-*-* 03:15:00",)),
    ("DAILY 7:05", "daily 07:05", "5 7 * * *", ("*-*-* 07:05:00",)),
    ("weekly sun 04:00", "weekly sun 04:00", "0 4 * * 0", ("Sun *-*-* 04:00:00",)),
    ("weekly Friday 23:59", "weekly fri 23:59", "59 23 * * 5", ("Fri *-*-* 23:59:00",)),
    ("30 2 * * mon-fri", "30 2 * * mon-fri", "30 2 * * mon-fri",
     ("Mon,Tue,Wed,Thu,Fri *-*-* 02:30:00",)),
    ("0 3 1 * sun", "0 3 1 * sun", "0 3 1 * sun",  # cron's OR of the two day fields
     ("*-*-01 03:00:00", "Sun *-*-* 03:00:00")),
    ("0 3 */10 * 7", "0 3 */10 * 7", "0 3 */10 * 7",  # "*..." is no restriction: AND
     ("Sun *-*-01,11,21,31 03:00:00",)),
    ("0 0 29 feb *", "0 0 29 feb *", "0 0 29 feb *", ("*-02-29 00:00:00",)),
    ("0,30 8-18/5 * jan,jul *", "0,30 8-18/5 * jan,jul *", "0,30 8-18/5 * jan,jul *",
     ("*-01,07-* 08,13,18:00,30:00",)),
])
def test_schedules_parse_into_cron_and_systemd_forms(
        text: str, canonical: str, cron: str, calendar: tuple[str, ...]) -> None:
    schedule = parse_schedule(text)
    assert (schedule.text, schedule.cron, schedule.on_calendar()) == (canonical, cron, calendar)
    assert str(schedule) == canonical
    assert parse_schedule(schedule.cron).on_calendar() == calendar  # the same runs


@pytest.mark.parametrize(("text", "message"), [
    ("", "found an empty schedule"),
    ("monthly", "found 'monthly'"),
    ("daily 3", "expected a time HH:MM such as 03:15, found '3'"),
    ("weekly 04:00", "expected 'weekly DAY HH:MM', such as 'weekly sun 04:00'"),
    ("hourly 5", "expected 'hourly', such as 'hourly'"),
    ("* * * *", "found '* * * *'; a cron expression has 5 fields"),
    ("0 24 * * *", "hour field '24': 24 is out of range 0-23"),
    ("0 0 0 * *", "day of month field '0': 0 is out of range 1-31"),
    ("0 0 * * 8", "day of week field '8': 8 is out of range 0-7"),
    ("0 0 * foo *", "month field 'foo': expected a number 1-12 or a name (jan, feb"),
    ("0 0 L * *", "day of month field 'L': expected a number 1-31, found 'L'"),
    ("0 0 * * 5-1", "day of week field '5-1': the range '5-1' runs backwards"),
    ("5/15 * * * *", "a step needs a range: write 5-59/15 or */15"),
    ("*/0 * * * *", "expected a step of 1 or more after '/', found '0'"),
    ("1,,2 * * * *", "minute field '1,,2': expected a number 0-59, found ''"),
    ("0 0 30 2 *", "it never runs"),
])
def test_bad_schedules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text)
    assert message in str(info.value)


# --- next run ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "after", "expected"), [
    ("daily 03:15", "2024-03-01 12:00", ["2024-03-02 03:15", "2024-03-03 03:15"]),
    ("daily 03:15", "2024-03-01 03:14:59", ["2024-03-01 03:15"]),
    ("daily 03:15", "2024-03-01 03:15:00", ["2024-03-02 03:15"]),  # strictly after
    ("daily 03:15", "2024-03-01 03:15:30", ["2024-03-02 03:15"]),
    ("hourly", "2024-12-31 23:30", ["2025-01-01 00:00", "2025-01-01 01:00"]),
    ("weekly sun 04:00", "2024-03-01 00:00", ["2024-03-03 04:00", "2024-03-10 04:00"]),
    ("weekly sun 04:00", "2024-03-03 04:00", ["2024-03-10 04:00"]),
    ("*/20 * * * *", "2024-03-01 10:41", ["2024-03-01 11:00", "2024-03-01 11:20"]),
    ("10-40/15 9 * * *", "2024-03-01 09:11", ["2024-03-01 09:25", "2024-03-01 09:40",
                                               "2024-03-02 09:10"]),
    ("0 12 * * 1-5", "2024-03-08 12:00", ["2024-03-11 12:00"]),  # Fri -> Mon
    ("0 12 * * 6,7", "2024-03-04 00:00", ["2024-03-09 12:00", "2024-03-10 12:00"]),
    # both day fields restricted: either matches (the 13th, or any Friday)
    ("0 0 13 * fri", "2024-09-01 00:00", ["2024-09-06 00:00", "2024-09-13 00:00",
                                          "2024-09-20 00:00", "2024-09-27 00:00",
                                          "2024-10-04 00:00", "2024-10-11 00:00",
                                          "2024-10-13 00:00"]),
    # a day field that begins with "*" does not restrict: both must match
    ("0 0 */2 * fri", "2024-09-01 00:00", ["2024-09-13 00:00", "2024-09-27 00:00",
                                           "2024-10-11 00:00"]),
    ("0 0 13 * *", "2024-09-01 00:00", ["2024-09-13 00:00", "2024-10-13 00:00"]),
    ("0 0 31 * *", "2024-01-31 00:00", ["2024-03-31 00:00", "2024-05-31 00:00"]),
    ("0 0 29 2 *", "2024-03-01 00:00", ["2028-02-29 00:00", "2032-02-29 00:00"]),
    ("0 0 29 2 mon", "2024-03-01 00:00", ["2025-02-03 00:00", "2025-02-10 00:00"]),  # OR,
    # in February only
    ("59 23 31 dec *", "2024-06-01 00:00", ["2024-12-31 23:59", "2025-12-31 23:59"]),
])
def test_next_run(text: str, after: str, expected: list[str]) -> None:
    schedule = parse_schedule(text)
    assert runs(schedule, at(after), len(expected)) == [at(e) for e in expected]


def test_next_run_keeps_the_clock_it_is_given() -> None:
    """Wall-clock arithmetic on `after`'s tzinfo: UTC stays UTC, a fixed offset stays."""
    daily = parse_schedule("daily 03:15")
    assert next_run(daily, at("2024-03-01 12:00", UTC)) == at("2024-03-02 03:15", UTC)
    plus2 = dt.timezone(dt.timedelta(hours=2))
    found = next_run(daily, at("2024-03-01 02:00", plus2))
    assert found == at("2024-03-01 03:15", plus2) and found.utcoffset() == dt.timedelta(hours=2)
    assert next_run(daily, at("2024-03-01 02:00")).tzinfo is None  # type: ignore[union-attr]


def test_period() -> None:
    assert period(parse_schedule("daily 03:15"), at("2024-03-01 00:00")) == dt.timedelta(days=1)
    assert period(parse_schedule("hourly"), at("2024-03-01 00:00")) == dt.timedelta(hours=1)
    assert period(parse_schedule("0 9 * * mon,fri"), at("2024-03-04 10:00")) == dt.timedelta(
        days=3)  # Fri 09:00 -> Mon 09:00


# --- against systemd's calendar -----------------------------------------------------------------

needs_systemd_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                           reason="systemd-analyze not installed (systemd)")


def systemd_runs(calendar: tuple[str, ...], base: dt.datetime, n: int) -> list[dt.datetime]:
    """The next n elapses of the OnCalendar= values together, as systemd computes them."""
    proc = subprocess.run(
        ["systemd-analyze", "calendar", f"--iterations={n}",
         f"--base-time={base:%Y-%m-%d %H:%M:%S} UTC", *calendar],
        capture_output=True, text=True, timeout=30, env={**os.environ, "TZ": "UTC"},
        check=True)
    found = re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+) UTC", proc.stdout)
    return sorted({at(f, UTC) for f in found})[:n]


EXPRESSIONS = ["hourly", "daily 03:15", "weekly sun 04:00", "weekly sat 00:00",
               "*/7 */5 * * *", "0 3 1 * sun", "15 6 */3 * mon-wed", "0 0 29 2 *",
               "0 12 13 * 5", "30 1 1,15 jan,jun *", "5-50/15 22-23 * * 0,6"]


@needs_systemd_analyze
@pytest.mark.parametrize("text", EXPRESSIONS)
def test_next_runs_are_systemds(text: str) -> None:
    schedule = parse_schedule(text)
    base = at("2024-02-27 11:37:20", UTC)
    assert runs(schedule, base, 6) == systemd_runs(schedule.on_calendar(), base, 6)


def field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    single = number.map(str)
    span = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*"]) | span, st.integers(1, high)).map(
        lambda p: f"{p[0]}/{p[1]}")
    item = single | span | stepped
    return st.just("*") | st.lists(item, min_size=1, max_size=3).map(",".join)


cron_expressions = st.tuples(field(0, 59), field(0, 23), field(1, 28), field(1, 12),
                             field(0, 7)).map(" ".join)


@needs_systemd_analyze
@settings(max_examples=40, deadline=None)
@given(cron_expressions, st.integers(0, 366 * 24 * 60))
def test_any_cron_expression_runs_when_systemd_would(text: str, minutes: int) -> None:
    """The OnCalendar= form of a cron expression and our next runs agree with systemd, OR
    of the day fields included."""
    schedule = parse_schedule(text)
    base = at("2024-01-01 00:00", UTC) + dt.timedelta(minutes=minutes, seconds=17)
    assert runs(schedule, base, 4) == systemd_runs(schedule.on_calendar(), base, 4), text


# --- systemd units -------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("systemd-escape") is None, reason="systemd-escape missing")
@pytest.mark.parametrize("name", ["site", "my-site", "a_b.c", ".hidden", "x/y", "dé j à",
                                  "tab\there", "a\\x2d"])
def test_unit_names_are_escaped_as_systemd_escape_does(name: str) -> None:
    real = subprocess.run(["systemd-escape", "--", name], capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()
    assert systemd.escape(name) == real


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary HOME with no systemd user manager and no crontab of the real user's:
    a crontab command that is real crontab, writing into a spool of this test (see
    `crontab_command`)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv(crontab.CRONTAB_ENV, crontab_command(tmp_path))
    return home


def crontab_command(tmp_path: Path) -> str:
    """Debian's real crontab, in a private mount namespace where the test's own spool
    folder is mounted over /var/spool/cron/crontabs: crontab parses, checks and stores the
    lines as always, and the machine's crontabs are never touched. Needs root (as in CI)
    and unshare; the tests that install lines skip without them."""
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    spool.chmod(0o1730)
    shutil.chown(spool, group="crontab") if _has_group("crontab") else None
    script = tmp_path / "crontab.sh"
    script.write_text("#!/bin/sh\nexec unshare --mount sh -c 'mount --bind \"$0\" "
                      "/var/spool/cron/crontabs && exec crontab \"$@\"' "
                      f"'{spool}' \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def _has_group(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def real_crontab(home: Path) -> str:
    command = os.environ[crontab.CRONTAB_ENV]
    if shutil.which("crontab") is None or not Path("/var/spool/cron/crontabs").is_dir():
        pytest.skip("no crontab here (Debian: apt install cron)")
    probe = subprocess.run([command, "-l"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0 and "no crontab for" not in probe.stderr:
        pytest.skip(f"cannot give crontab a private spool here: {probe.stderr.strip()}")
    return command


def crontab_lines(command: str) -> list[str]:
    proc = subprocess.run([command, "-l"], capture_output=True, text=True, timeout=30)
    return proc.stdout.splitlines()


Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Cli:
    """`code, out, err = cli("schedule", "apply", ...)`: in this process, from tmp_path,
    with the test's HOME and crontab."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        return (mirror_cli.main(list(args)), *capsys.readouterr())

    return run


def site_file(folder: Path, name: str, every: str | None, file: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file or f"{name}.toml")
    text = (f'[site]\nname = "{name}"\nstart_urls = ["http://127.0.0.1:9/"]\n'
            f'output_dir = "archive/{name}"\n[scope]\nrobots = false\n')
    if every is not None:
        text += f'[schedule]\nevery = "{every}"\n'
    path.write_text(text, encoding="utf-8")
    return path


@needs_systemd_analyze
def test_apply_writes_units_that_systemd_accepts(cli: Cli, home: Path, tmp_path: Path) -> None:
    library = tmp_path / "my library %Z $HOME"  # specifiers and variables stay literal
    a = site_file(library, "my-site", "0 3 1 * sun")
    site_file(library, "plain", None)
    code, out, err = cli("schedule", "apply", str(library), "--timer", "systemd")
    assert code == 0, err
    units = home / ".config" / "systemd" / "user"
    name = "mirror-my\\x2dsite"
    assert sorted(p.name for p in units.iterdir()) == [f"{name}.service", f"{name}.timer"]
    assert f"my-site: systemd timer {name}.timer, 0 3 1 * sun, next run " in out
    assert "plain: not scheduled" in out
    assert "systemctl --user does not answer here" in out and f"'{name}.timer'" in out
    timer = (units / f"{name}.timer").read_text()
    assert "OnCalendar=*-*-01 03:00:00\nOnCalendar=Sun *-*-* 03:00:00\n" in timer
    assert "Persistent=true" in timer and timer.startswith(f"{systemd.TAG}{a}\n")
    service = (units / f"{name}.service").read_text()
    assert "%%Z $$HOME" in service
    assert f"ExecStart={' '.join(systemd.exec_quote(w) for w in scheduled_argv(a))}" in service
    verify = subprocess.run(["systemd-analyze", "verify", str(units / f"{name}.timer"),
                             str(units / f"{name}.service")],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr == ""


@needs_systemd_analyze
def test_systemd_analyze_refuses_what_would_be_wrong(tmp_path: Path) -> None:
    """Control for the test above: verify does read the units (an unescaped specifier or
    a bad calendar fails)."""
    service = systemd.service_text("x", tmp_path / "x.toml", [sys.executable, "%Z"])
    (tmp_path / "mirror-x.service").write_text(service.replace("%%Z", "%Z"))
    timer = systemd.timer_text("x", tmp_path / "x.toml", parse_schedule("daily 03:15"))
    (tmp_path / "mirror-x.timer").write_text(timer.replace("03:15:00", "25:15:00"))
    for unit in ("mirror-x.service", "mirror-x.timer"):
        verify = subprocess.run(["systemd-analyze", "verify", str(tmp_path / unit)],
                                capture_output=True, text=True, timeout=60)
        assert verify.returncode != 0, unit


def test_apply_is_idempotent_and_converges(cli: Cli, home: Path, tmp_path: Path) -> None:
    units = home / ".config" / "systemd" / "user"
    a = site_file(tmp_path / "lib", "a", "daily 03:15")
    b = site_file(tmp_path / "lib", "b", "hourly")
    assert cli("schedule", "apply", "lib", "--timer", "systemd")[0] == 0
    before = {p.name: p.read_text() for p in units.iterdir()}
    code, out, _ = cli("schedule", "apply", "lib", "--timer", "systemd")
    assert code == 0 and "a: systemd timer mirror-a.timer (unchanged), daily 03:15" in out
    assert {p.name: p.read_text() for p in units.iterdir()} == before
    site_file(tmp_path / "lib", "a", "weekly mon 01:00")  # the schedule changed
    site_file(tmp_path / "lib", "b", None)  # b is no longer scheduled
    code, out, _ = cli("schedule", "apply", "lib", "--timer", "systemd")
    assert "b: removed its systemd mirror-b.timer (no [schedule] every)" in out
    assert sorted(p.name for p in units.iterdir()) == ["mirror-a.service", "mirror-a.timer"]
    assert "OnCalendar=Mon *-*-* 01:00:00" in (units / "mirror-a.timer").read_text()
    code, out, _ = cli("schedule", "list", "lib")
    assert code == 0 and "every  weekly mon 01:00\n  timer  systemd mirror-a.timer\n" in out
    assert "last   none yet" in out and str(b) not in out
    a.unlink()  # a site file removed from the library: its timer goes at the next apply
    code, out, _ = cli("schedule", "apply", "lib", "--timer", "systemd")
    assert "a: removed its systemd mirror-a.timer (its site file is gone)" in out
    assert not list(units.iterdir())


def test_two_sites_of_one_name_cannot_share_a_unit(cli: Cli, home: Path,
                                                   tmp_path: Path) -> None:
    site_file(tmp_path / "one", "same", "hourly")
    site_file(tmp_path / "two", "same", "hourly")
    assert cli("schedule", "apply", "one", "--timer", "systemd")[0] == 0
    code, _, err = cli("schedule", "apply", "two", "--timer", "systemd")
    assert code == 2
    assert (f"the unit mirror-same.timer belongs to {tmp_path / 'one' / 'same.toml'} (a site "
            "of the same name)") in err


def test_a_broken_site_file_keeps_its_timer(cli: Cli, home: Path, tmp_path: Path) -> None:
    path = site_file(tmp_path / "lib", "a", "hourly")
    cli("schedule", "apply", "lib", "--timer", "systemd")
    path.write_text(path.read_text().replace("hourly", "hourly at 5"))
    code, out, err = cli("schedule", "apply", "lib", "--timer", "systemd")
    assert code == 2 and "[schedule] every: invalid schedule 'hourly at 5'" in err
    assert "left as it is" in err
    assert (home / ".config/systemd/user/mirror-a.timer").exists()
    code, out, err = cli("schedule", "remove", "lib")
    assert code == 0 and "a: removed its systemd mirror-a.timer\n" in out
    assert not (home / ".config/systemd/user/mirror-a.timer").exists()


def test_errors_of_the_schedule_command(cli: Cli, home: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = cli("schedule", "apply", "nowhere")
    assert code == 2 and "nowhere: no such site file or library folder" in err
    monkeypatch.setenv(crontab.CRONTAB_ENV, str(tmp_path / "no-crontab-here"))
    site_file(tmp_path / "lib", "a", "hourly")
    code, _, err = cli("schedule", "apply", "lib", "--timer", "cron")
    assert code == 2 and "cannot use the crontab:" in err and "no-crontab-here" in err


# --- crontab ---------------------------------------------------------------------------------


def test_crontab_lines_are_found_again_and_edited_in_place() -> None:
    daily = parse_schedule("daily 03:15")
    site = Path("/srv/sites/50% off.toml")
    line = crontab.line(daily, site, ["/usr/bin/python3", "-m", "mirror", str(site)])
    assert line == ("15 3 * * * /usr/bin/python3 -m mirror '/srv/sites/50\\% off.toml' "
                    "# mirror-schedule: /srv/sites/50\\% off.toml")
    mine = "MAILTO=me\n# a comment\n0 1 * * * backup.sh\n"
    added = crontab.with_line(mine, site, line)
    assert added == mine + line + "\n" and crontab.entries(added) == {site: line}
    other = crontab.line(daily, Path("/b.toml"), ["x"])
    both = crontab.with_line(added, Path("/b.toml"), other)
    changed = crontab.with_line(both, site, line.replace("15 3", "0 4"))
    assert changed.splitlines() == [*mine.splitlines(), line.replace("15 3", "0 4"), other]
    assert crontab.with_line(changed, site, None) == mine + other + "\n"
    assert crontab.entries("# 0 1 * * * x # mirror-schedule: /a.toml\n") == {}  # commented out


def test_cron_applies_through_the_real_crontab(cli: Cli, real_crontab: str,
                                               tmp_path: Path) -> None:
    subprocess.run([real_crontab, "-"], input="MAILTO=\"\"\n0 1 * * * backup.sh\n", text=True,
                   check=True, timeout=30)
    a = site_file(tmp_path / "lib 100%", "a", "*/30 9-17 * * mon-fri")
    site_file(tmp_path / "lib 100%", "b", None)
    code, out, err = cli("schedule", "apply", "lib 100%", "--timer", "cron")
    assert code == 0, err
    assert "a: crontab line, */30 9-17 * * mon-fri, next run " in out
    expected = crontab.line(parse_schedule("*/30 9-17 * * mon-fri"), a, scheduled_argv(a))
    assert crontab_lines(real_crontab) == ['MAILTO=""', "0 1 * * * backup.sh", expected]
    code, out, _ = cli("schedule", "apply", "lib 100%", "--timer", "cron")  # idempotent
    assert "a: crontab line (unchanged)" in out
    assert crontab_lines(real_crontab) == ['MAILTO=""', "0 1 * * * backup.sh", expected]
    code, out, _ = cli("schedule", "list", "lib 100%")
    assert "timer  crontab\n" in out and "every  */30 9-17 * * mon-fri" in out
    # moving to a systemd timer takes the crontab line away: never two timers for a site
    cli("schedule", "apply", "lib 100%", "--timer", "systemd")
    assert crontab_lines(real_crontab) == ['MAILTO=""', "0 1 * * * backup.sh"]
    cli("schedule", "apply", "lib 100%", "--timer", "cron")
    code, out, _ = cli("schedule", "remove", str(a))
    assert code == 0 and "a: removed its crontab\n" in out
    assert crontab_lines(real_crontab) == ['MAILTO=""', "0 1 * * * backup.sh"]


def test_the_cron_line_runs_a_scheduled_run(real_crontab: str, cli: Cli, tmp_path: Path) -> None:
    """What cron would run (the command field, its \\% undone) run by /bin/sh: a scheduled
    run of the site, with its hook."""
    path = site_file(tmp_path / "lib", "a", "hourly")
    with path.open("a") as f:
        f.write('[hooks]\non_failure = "echo ran $MIRROR_RUN_ID:$MIRROR_EXIT_CODE > hook.txt"\n')
    cli("schedule", "apply", "lib", "--timer", "cron")
    (line,) = [t for t in crontab_lines(real_crontab) if "mirror-schedule" in t]
    command = line.split(" ", 5)[5].replace("\\%", "%")
    proc = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # the start URL is refused: a failed run
    assert "a: run 1 FAILED: stored no page (connection refused" in proc.stdout
    assert (tmp_path / "lib" / "hook.txt").read_text() == "ran 1:3\n"


# --- one waiter at most --------------------------------------------------------------------------


def test_a_scheduled_run_waits_for_the_run_going_and_one_waiter_is_enough(
        tmp_path: Path) -> None:
    path = site_file(tmp_path, "a", "hourly")
    archive = tmp_path / "archive" / "a"
    argv = [sys.executable, "-m", "mirror", "run", "--quiet", "--scheduled", str(path)]
    with ArchiveLock(archive):  # a run still going
        first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            deadline = time.monotonic() + 30
            while waiting(archive) is None:
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.05)
            assert waiting(archive) == str(first.pid)
            second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert second.returncode == 75
            assert (f"a scheduled run (pid {first.pid}) is already waiting for the run "
                    "still going; this one is skipped") in second.stderr
            assert first.poll() is None  # still waiting
        except BaseException:
            first.kill()
            raise
    out, err = first.communicate(timeout=60)
    assert first.returncode == 3, err
    assert f"a run is still going (pid {os.getpid()}); this scheduled run waits" in err
    assert "has finished; this scheduled run starts" in err
    assert "a: run 1 FAILED: stored no page" in out  # its start URL is refused
    log = (archive / "mirror.log").read_text()
    assert "this scheduled run waits for it to finish" in log and "is skipped" in log
    assert waiting(archive) is None
