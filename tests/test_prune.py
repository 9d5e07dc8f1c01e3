"""`mirror prune` (A4) and its retention policy: borg's rules, table- and property-tested;
real archives pruned: verify and `warcio check` pass, every kept run replays the same bytes
through `mirror serve`, the bytes freed are what the folder lost, the search index agrees."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from crashsim import (
    PhasedSite,
    Scenario,
    copy_folder,
    replay_all,
    stored_per_run,
    text_index_problems,
    verify,
    warcio_check,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.archive.lock import ArchiveLock
from mirror.cli.main import main
from mirror.config import load_config
from mirror.model import Run
from mirror.upkeep.prune import PruneError, prune_site
from mirror.upkeep.pruneplan import FileChange, Member, PlanError, file_changes, layout
from mirror.upkeep.retention import Retention, runs_to_keep

DAY0 = datetime(2026, 3, 2, 3, 15, tzinfo=UTC)  # a Monday


def run(id_: int, when: datetime, state: str = "complete") -> Run:
    return Run(id_, when.strftime("%Y-%m-%dT%H:%M:%SZ"), None, state, "sha256:x", 0)


def daily(n: int, state: str = "complete") -> list[Run]:
    """n runs, one a day at 03:15 UTC, run 1 first."""
    return [run(i + 1, DAY0 + timedelta(days=i), state) for i in range(n)]


def kept(runs: Sequence[Run], **rules: int) -> dict[int, str]:
    return runs_to_keep(runs, **rules, tz=UTC)


# -- the policy: tables ----------------------------------------------------------------------
def test_keep_last_keeps_the_newest_runs() -> None:
    assert kept(daily(5), keep_last=2) == {5: "last #1", 4: "last #2"}


def test_keep_daily_keeps_the_last_run_of_each_day() -> None:
    runs = [run(i + 1, DAY0 + timedelta(hours=8 * i)) for i in range(9)]  # 3 a day
    assert kept(runs, keep_daily=2) == {9: "daily #1", 6: "daily #2"}


def test_a_rule_does_not_count_what_an_earlier_rule_kept() -> None:
    """borg: keep-last 1 and keep-daily 2 keep today's run and one of each of the two days
    before, not just today's and yesterday's."""
    assert kept(daily(5), keep_last=1, keep_daily=2) == {5: "last #1", 4: "daily #1",
                                                         3: "daily #2"}


def test_a_rule_short_of_periods_keeps_the_oldest_run() -> None:
    runs = [run(1, DAY0), run(2, DAY0 + timedelta(hours=1)), run(3, DAY0 + timedelta(days=1))]
    assert kept(runs, keep_daily=7) == {3: "daily #1", 2: "daily #2", 1: "daily[oldest] #3"}


def test_weeks_are_iso_weeks() -> None:
    """2026-12-31 (Thursday) and 2027-01-01 (Friday) are both in ISO week 2026-W53."""
    thu, fri = datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
    runs = [run(1, thu - timedelta(days=7)), run(2, thu), run(3, fri), run(4, fri + timedelta(3))]
    assert kept(runs, keep_weekly=3) == {4: "weekly #1", 3: "weekly #2", 1: "weekly #3"}


def test_keep_monthly_and_weekly_together() -> None:
    runs = daily(70)  # 2026-03-02 .. 2026-05-10
    assert kept(runs, keep_weekly=2, keep_monthly=3) == {
        70: "weekly #1", 63: "weekly #2",  # Sundays 05-10 and 05-03
        60: "monthly #1",  # 04-30: May's last run is kept already, so April's counts
        30: "monthly #2",  # 03-31
        1: "monthly[oldest] #3"}


def test_periods_are_local_time() -> None:
    late = [run(1, datetime(2026, 3, 2, 22, 30, tzinfo=UTC)),
            run(2, datetime(2026, 3, 2, 23, 30, tzinfo=UTC))]
    assert kept(late, keep_daily=5) == {2: "daily #1", 1: "daily[oldest] #2"}
    east = timezone(timedelta(hours=1))  # 23:30 UTC is the next day there
    assert runs_to_keep(late, keep_daily=5, tz=east) == {2: "daily #1", 1: "daily #2"}


def test_unfinished_runs_stay_and_do_not_count() -> None:
    runs = [*daily(3), run(4, DAY0 + timedelta(days=3), "interrupted")]
    assert kept(runs, keep_last=1) == {3: "last #1",
                                      4: "unfinished: the next `mirror run` resumes it"}


def test_abandoned_runs_do_not_count_and_go() -> None:
    runs = daily(4)
    runs[2] = run(3, DAY0 + timedelta(days=2), "abandoned")
    assert kept(runs, keep_last=2) == {4: "last #1", 2: "last #2"}


def test_limit_runs_count_as_finished() -> None:
    assert kept(daily(3, "limit"), keep_last=1) == {3: "last #1"}


def test_the_newest_run_always_stays() -> None:
    runs = [*daily(2), run(3, DAY0 + timedelta(days=2), "abandoned")]
    assert kept(runs, keep_last=1) == {2: "last #1", 3: "the newest run"}
    assert kept([], keep_last=1) == {}


def test_retention_reads_a_config_section() -> None:
    class Section:
        keep_daily, keep_weekly = 7, 4

    policy = Retention.of(Section())
    assert policy == Retention(0, 7, 4, 0) and policy.is_set()
    assert policy.describe() == "keep_daily 7, keep_weekly 4"
    assert not Retention().is_set()


# -- the policy: properties ------------------------------------------------------------------
STATES = st.sampled_from(["complete", "complete", "complete", "limit", "abandoned"])


@st.composite
def histories(draw: st.DrawFn) -> list[Run]:
    """Runs in id order, each started 0 to 9 days (and some hours) after the one before;
    the last may be unfinished."""
    n = draw(st.integers(0, 25))
    at, runs = DAY0, []
    for i in range(n):
        at += timedelta(days=draw(st.integers(0, 9)), hours=draw(st.integers(0, 23)))
        state = draw(STATES)
        if i == n - 1 and draw(st.booleans()):
            state = draw(st.sampled_from(["running", "interrupted"]))
        runs.append(run(i + 1, at, state))
    return runs


COUNTS = st.integers(0, 6)


@settings(max_examples=300, deadline=None)
@given(histories(), COUNTS, COUNTS, COUNTS, COUNTS)
def test_what_every_policy_keeps(runs: list[Run], last: int, day: int, week: int,
                                 month: int) -> None:
    keep = kept(runs, keep_last=last, keep_daily=day, keep_weekly=week, keep_monthly=month)
    assert set(keep) <= {r.id for r in runs}
    if runs:
        assert runs[-1].id in keep
    assert {r.id for r in runs if r.state in ("running", "interrupted")} <= set(keep)
    assert not {r.id for r in runs[:-1] if r.state == "abandoned"} & set(keep)
    finished = [r.id for r in runs if r.state in ("complete", "limit")]
    assert set(finished[len(finished) - last:] if last else []) <= set(keep)
    bigger = kept(runs, keep_last=last + 1, keep_daily=day + 1, keep_weekly=week,
                  keep_monthly=month)
    assert set(keep) <= set(bigger)  # more of a rule never drops a run kept with less


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 8))
def test_keep_daily_alone_is_the_newest_run_of_the_newest_days(runs: list[Run],
                                                               n: int) -> None:
    """A second, plain model of one rule: group the finished runs by day, newest first."""
    finished = [r for r in runs if r.state in ("complete", "limit")]
    days: dict[object, list[Run]] = {}
    for r in sorted(finished, key=lambda r: (r.started_at, r.id), reverse=True):
        days.setdefault(r.started_at[:10], []).append(r)
    want = {group[0].id for group in list(days.values())[:n]}
    if finished and len(days) < n:
        want.add(min(finished, key=lambda r: (r.started_at, r.id)).id)
    want |= {r.id for r in runs if r.state in ("running", "interrupted")}
    if runs:
        want.add(runs[-1].id)
    assert set(kept(runs, keep_daily=n)) == want


# -- the plan for a file (pure) ----------------------------------------------------------------
def test_a_rewritten_file_keeps_its_records_in_order_after_the_new_warcinfo() -> None:
    change = FileChange("s-20260302031500000-00001.warc.gz", "s-20260302031500000-00009.warc.gz",
                        (Member(7, 900, 300, 1200, 100), Member(3, 300, 200, 500, 100)), 2000)
    spans, moves, size = layout(change, 250)
    assert spans == [(300, 200), (500, 100), (900, 300), (1200, 100)]
    assert [(m.capture_id, m.offset, m.req_offset) for m in moves] == [(7, 550, 850),
                                                                       (3, 250, 450)]
    assert size == 250 + 700 and {m.filename for m in moves} == {change.new}


def test_a_record_that_does_not_fit_its_file_stops_the_plan() -> None:
    for members in ((Member(1, 100, 300, 350, 10),),  # overlaps its request
                    (Member(1, 100, 50, 1990, 20),)):  # past the end
        with pytest.raises(PlanError):
            FileChange("a.warc.gz", "b.warc.gz", members, 2000).ranges()


def test_files_keeping_something_get_the_next_serials_the_rest_go() -> None:
    kept_members = {"s-20260302031500000-00002.warc.gz": [],
                    "s-20260301031500000-00001.warc.gz": [Member(1, 10, 5, 15, 5)],
                    "s-20260303031500000-00004.warc.gz": [Member(2, 10, 5, 15, 5)]}
    sizes = dict.fromkeys(kept_members, 100)
    changes = file_changes(kept_members, sizes, first_serial=7)
    assert [(c.old[2:19], c.new) for c in changes] == [
        ("20260301031500000", "s-20260301031500000-00007.warc.gz"),
        ("20260302031500000", None),
        ("20260303031500000", "s-20260303031500000-00008.warc.gz")]


# -- real archives ----------------------------------------------------------------------------
async def three_runs(make_site, tmp_path: Path) -> tuple[Scenario, Path]:
    """crashsim's site with every kind of capture, run three times (each run on its own
    day of WARC dates, small WARC files: several a run)."""
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    folder = scenario.folder("site")
    for phase in (1, 2, 3):
        assert await scenario.run(folder, phase) == 0
    return scenario, folder


def db(archive: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3"))


def run_ids(archive: Path) -> list[int]:
    with db(archive) as con:
        return [i for (i,) in con.execute("SELECT id FROM runs ORDER BY id")]


def start_runs_on(archive: Path, starts: dict[int, str]) -> None:
    """Give runs the start times a test needs (a crawl takes its own from the clock)."""
    with db(archive) as con, con:
        con.executemany("UPDATE runs SET started_at=? WHERE id=?",
                        [(when, i) for i, when in starts.items()])


def warc_sizes(archive: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted((archive / "warc").glob("*.warc.gz"))}


def archive_bytes(archive: Path) -> int:
    """The WARC files, the index and the manifest (with its WAL)."""
    return sum(warc_sizes(archive).values()) + sum(
        p.stat().st_size for p in (archive / "index.cdxj", archive / "manifest.sqlite3",
                                   archive / "manifest.sqlite3-wal") if p.exists())


def files_of_run(archive: Path, run_id: int) -> dict[str, bytes]:
    """The WARC files a run wrote (its warcinfo names it), with their bytes."""
    out = {}
    for path in sorted((archive / "warc").glob("*.warc.gz")):
        data = path.read_bytes()
        if f"/run-{run_id}\r\n".encode() in _warcinfo(data):
            out[path.name] = data
    return out


def _warcinfo(data: bytes) -> bytes:
    import zlib

    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)


async def check_pruned(archive: Path, before: dict[Any, Any], kept_runs: set[int]) -> None:
    """Verify, `warcio check` and the search index pass; every capture left replays as it
    did before the prune, every capture of a kept run is left, each stored once."""
    assert verify(archive) == []
    assert warcio_check(archive) == ""
    assert text_index_problems(archive) == []
    after = await replay_all(archive)
    assert {k for k in after if k[0] in kept_runs} == {k for k in before if k[0] in kept_runs}
    assert {k: v for k, v in after.items() if v != before[k]} == {}
    assert set(stored_per_run(archive).values()) == {1}
    assert rows_of_runs(archive) <= kept_runs


#: tables with a run_id whose rows outlive their run: a capture a kept run's revisit refers
#: to is held, and a URL belongs to the run that last found it
OUTLIVE = {"captures", "urls"}


def rows_of_runs(archive: Path) -> set[int]:
    """The runs that any table with a run_id column (but OUTLIVE's) holds a row of."""
    with db(archive) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if any(c[1] == "run_id" for c in con.execute(f"PRAGMA table_info({t})"))]
        assert "robots_answers" in tables and "sessions" in tables, tables
        return {r for t in set(tables) - OUTLIVE
                for (r,) in con.execute(f"SELECT DISTINCT run_id FROM {t}")}


async def test_prune_drops_old_runs_and_every_kept_run_replays_the_same(make_site, tmp_path):
    _, folder = await three_runs(make_site, tmp_path)
    archive = folder / "archive"
    before, sizes, folder_bytes = await replay_all(archive), warc_sizes(archive), \
        archive_bytes(archive)
    run3 = files_of_run(archive, 3)
    with db(archive) as con, con:  # what a shared run's workers leave: robots.txt answers
        con.executemany("INSERT INTO robots_answers VALUES (?, 'http://a.test/robots.txt', "
                        "200, '[]', '', 0)", [(1,), (2,), (3,)])
    result = prune_site(load_config(folder / "site.toml"), retention=Retention(keep_last=1))
    assert result.dropped_runs == (1, 2) and run_ids(archive) == [3]
    await check_pruned(archive, before, {3})
    assert files_of_run(archive, 3) == run3  # a kept run's files are not touched
    assert result.warc_freed == sum(sizes.values()) - sum(warc_sizes(archive).values()) > 0
    assert result.freed_bytes == folder_bytes - archive_bytes(archive) > result.warc_freed
    held = {run for run, _ in await replay_all(archive)} - {3}
    assert held and result.held > 0  # run 3's revisits still replay payloads of runs 1, 2
    assert sorted(p.name for p in (archive / "reports").iterdir()) == ["3.json"]
    assert not list((archive / "warc").glob(".*"))  # no temporary file left
    again = prune_site(load_config(folder / "site.toml"), retention=Retention(keep_last=1))
    assert again.dropped_runs == () and again.freed_bytes == 0


async def test_prune_drops_a_run_between_two_kept_ones(make_site, tmp_path):
    """keep_daily 2 over runs on days 1, 2, 2: run 2 goes; run 3's revisits of run 2's
    responses keep those records; runs 1 and 3 replay as before; a run after the prune
    and another prune still verify."""
    scenario, folder = await three_runs(make_site, tmp_path)
    archive = folder / "archive"
    start_runs_on(archive, {1: "2020-01-01T03:00:00Z", 2: "2020-01-02T03:00:00Z",
                            3: "2020-01-02T04:00:00Z"})
    before = await replay_all(archive)
    result = prune_site(load_config(folder / "site.toml"), retention=Retention(keep_daily=2),
                        tz=UTC)
    assert result.dropped_runs == (2,)
    assert dict((r.id, why) for r, why in result.kept) == {3: "daily #1", 1: "daily #2"}
    await check_pruned(archive, before, {1, 3})
    assert await scenario.run(folder, 3) == 0  # run 4: the site as in run 3
    assert run_ids(archive) == [1, 3, 4]
    assert verify(archive) == [] and text_index_problems(archive) == []
    before = await replay_all(archive)
    prune_site(load_config(folder / "site.toml"), retention=Retention(keep_last=1))
    await check_pruned(archive, before, {4})


async def test_a_dry_run_changes_nothing(make_site, tmp_path, capsys):
    _, folder = await three_runs(make_site, tmp_path)
    archive = folder / "archive"
    copy_folder(archive, tmp_path / "copy")
    assert main(["prune", str(folder / "site.toml"), "--dry-run", "--keep-last", "2"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing is changed" in out and "would free about" in out
    runs = [line.split()[1::3] for line in out.splitlines() if line.startswith("run ")]
    assert runs == [["1", "would"], ["2", "keep"], ["3", "keep"]]
    assert "complete    keep (last #1)" in out and "would rewrite " in out
    for path in sorted(p for p in archive.rglob("*") if p.is_file() and p.name != ".lock"
                       and not p.name.endswith(("-shm", "-wal"))):  # a reader opens a WAL
        assert path.read_bytes() == (tmp_path / "copy" / path.relative_to(archive)).read_bytes()
    assert run_ids(archive) == [1, 2, 3]


async def test_the_cli_prints_what_it_dropped_and_freed(make_site, tmp_path, capsys):
    _, folder = await three_runs(make_site, tmp_path)
    site = folder / "site.toml"
    site.write_text(site.read_text() + "[retention]\nkeep_last = 2\n")
    assert main(["prune", str(site), "--keep-last", "1"]) == 0  # the flag wins
    out = capsys.readouterr().out
    assert "retention: keep_last 1\n" in out
    runs = [line.split()[1::3] for line in out.splitlines() if line.startswith("run ")]
    assert runs == [["1", "drop"], ["2", "drop"], ["3", "keep"]]
    assert "dropped 2 runs, " in out and " of WARC files; " in out and " bytes (" in out
    assert run_ids(folder / "archive") == [3]


def test_prune_without_a_rule_names_the_keys(tmp_path, capsys):
    (tmp_path / "site.toml").write_text('[site]\nname = "t"\nstart_urls = ["http://a.test/"]\n'
                                        'output_dir = "archive"\n')
    assert main(["prune", str(tmp_path / "site.toml")]) == 2
    err = capsys.readouterr().err
    assert all(key in err for key in ("keep_last", "keep_daily", "keep_weekly",
                                      "keep_monthly", "[retention]"))
    with pytest.raises(PruneError, match="no retention rule"):
        prune_site(load_config(tmp_path / "site.toml"))


async def test_prune_takes_the_archive_lock(make_site, tmp_path, capsys):
    _, folder = await three_runs(make_site, tmp_path)
    with ArchiveLock(folder / "archive"):
        assert main(["prune", str(folder / "site.toml"), "--keep-last", "1"]) == 75
    assert "another mirror process" in capsys.readouterr().err
    assert run_ids(folder / "archive") == [1, 2, 3]


async def test_an_unfinished_run_is_kept_and_resumes_after_the_prune(make_site, tmp_path):
    """A run killed in the middle (its .open file not yet repaired) is the newest: prune
    keeps it and the last finished run, leaves its open file alone and indexes only closed
    files; the next `mirror run` finishes it and the archive verifies."""
    from mirror import crashpoints

    scenario, folder = await three_runs(make_site, tmp_path)
    killed = tmp_path / "killed"
    taken = []

    def snapshot(step: str, kind: str) -> None:
        if step == "commit:after" and not taken:  # run 4's first capture is committed
            copy_folder(folder, killed)
            taken.append(step)

    crashpoints.hook = snapshot
    try:
        assert await scenario.run(folder, 3) == 0
    finally:
        crashpoints.hook = None
    archive = killed / "archive"
    assert list((archive / "warc").glob("*.open"))
    left_open = sorted(p.check for p in _problems(archive))  # what any killed run shows
    assert left_open == ["manifest-missing-file", "open-file"]
    result = prune_site(load_config(killed / "site.toml"), retention=Retention(keep_last=1))
    assert result.dropped_runs == (1, 2) and run_ids(archive) == [3, 4]
    assert dict((r.id, why) for r, why in result.kept)[4].startswith("unfinished")
    assert sorted(p.check for p in _problems(archive)) == left_open
    assert await scenario.run(killed, 3) == 0
    assert run_ids(archive) == [3, 4] and verify(archive) == []


def _problems(archive: Path) -> list[Any]:
    from mirror.manifest.reader import ManifestReader
    from mirror.verify import check_archive

    manifest = ManifestReader(archive / "manifest.sqlite3")
    try:
        return list(check_archive(archive, manifest).problems)
    finally:
        manifest.close()


async def test_the_manifest_is_compacted_when_a_prune_frees_much_of_it(make_site, tmp_path):
    """A run reuses the pages a prune frees, so only a large prune rewrites the file."""
    from mirror.manifest.writer import Manifest

    _, folder = await three_runs(make_site, tmp_path)
    path = folder / "archive" / "manifest.sqlite3"
    manifest = Manifest(path)
    try:
        assert manifest.prune.compact() is False  # hardly a free page
        manifest.db.executemany("INSERT INTO errors VALUES (9, 9, ?)",
                                [("x" * 4000,) for _ in range(100)])
        manifest.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = path.stat().st_size
        manifest.db.execute("DELETE FROM errors WHERE run_id=9")
        assert manifest.prune.compact() is True
        assert manifest.db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        manifest.close()
    assert path.stat().st_size < size


def test_a_scheduled_run_prunes_by_itself_when_retention_is_set(site_in_thread, tmp_path,
                                                                 capsys) -> None:
    """`mirror run --scheduled` with [retention]: after each run that made a snapshot, the
    runs no keep_* rule keeps are gone; a plain `mirror run` keeps every run."""
    from conftest import write_config

    site = site_in_thread()
    site.page("/", '<a href="/a">a</a>')
    site.page("/a", "<p>a page</p>")
    toml = write_config(tmp_path, [site.base], retention={"keep_last": 1})
    manifest = tmp_path / "archive" / "manifest.sqlite3"

    def runs() -> list[int]:
        with contextlib.closing(sqlite3.connect(manifest)) as db:
            return [i for (i,) in db.execute("SELECT id FROM runs ORDER BY id")]

    assert main(["run", str(toml), "--quiet"]) == 0
    assert main(["run", str(toml), "--quiet"]) == 0
    assert runs() == [1, 2]  # not scheduled: retention waits for `mirror prune`
    assert main(["run", str(toml), "--quiet", "--scheduled"]) == 0
    assert runs() == [3]  # keep_last 1: runs 1 and 2 dropped by the scheduled run
    capsys.readouterr()
    assert main(["verify", str(toml)]) == 0
    assert "retention: dropped runs 1, 2" in (tmp_path / "archive" / "mirror.log").read_text()
