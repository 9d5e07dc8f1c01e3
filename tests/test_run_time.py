"""A run's time and report over all the processes that worked on it (killed, then resumed)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import crawl_to_end, write_config
from crashsim import copy_folder

from mirror import crashpoints
from mirror.config import load_config
from mirror.run.report import summary_line

LATENCY = 0.25
PAGES = 8


async def crawl(folder: Path, hook=None) -> None:  # noqa: ANN001 - a crash-point hook
    crashpoints.hook = hook
    try:
        await crawl_to_end(load_config(folder / "site.toml"))
    finally:
        crashpoints.hook = None


def slow_site(site) -> None:  # noqa: ANN001 - conftest.TestSite
    site.latency = LATENCY
    site.page("/", "".join(f'<a href="/p{i}">p</a>' for i in range(PAGES)))
    for i in range(PAGES):
        site.page(f"/p{i}", f"page {i}")


async def test_resumed_run_reports_the_time_of_all_its_processes(make_site, tmp_path):
    site = await make_site()
    slow_site(site)
    first = tmp_path / "first"
    first.mkdir()
    write_config(first, [site.base], crawl={"workers": 1, "parse_processes": 0})
    killed = tmp_path / "killed"

    def kill_after_last_page(step: str, kind: str) -> None:  # the disk as a kill leaves it
        if step == "commit:after" and site.count(f"/p{PAGES - 1}") and not killed.exists():
            copy_folder(first, killed)

    await crawl(first, kill_after_last_page)
    await crawl(killed)  # resumes: only the end of the run is left
    report = json.loads((killed / "archive" / "reports" / "1.json").read_text())
    # the first process fetched 9 pages at 0.25 s each before it was killed: its time is
    # known to within the second between two records of it
    assert report["resumed"] is True
    assert report["duration"] >= PAGES * LATENCY - 1.0
    assert report["pages_per_second"] == round(report["captures"] / report["duration"], 2)


async def test_a_report_lost_in_a_crash_is_written_by_the_next_run(make_site, tmp_path):
    site = await make_site()
    site.page("/", "home")
    write_config(tmp_path, [site.base])
    crashed = tmp_path / "crashed"

    def kill_writing_report(step: str, kind: str) -> None:
        if step == "file:before-rename" and kind == "1.json":
            copy_folder(tmp_path / "archive", crashed / "archive")

    await crawl(tmp_path, kill_writing_report)
    write_config(crashed, [site.base])
    assert not (crashed / "archive" / "reports" / "1.json").exists()
    await crawl(crashed)  # run 2 starts by writing run 1's report
    reports = {p.name: json.loads(p.read_text())
               for p in (crashed / "archive" / "reports").glob("*.json")}
    assert set(reports) == {"1.json", "2.json"}
    assert reports["1.json"]["state"] == "complete" and reports["1.json"]["exit_code"] == 0
    assert reports["1.json"]["captures"] == 1
    assert not list((crashed / "archive" / "reports").glob(".*.tmp"))


def test_summary_line_uses_the_run_time() -> None:
    from mirror.run.changes import Changes
    from mirror.run.report import RunData

    data = RunData("s", 1, "complete", 0, True, "", "", 20.0, 100, {}, {}, {}, 2_000_000, 0,
                   {}, [], [], [], [], "a", Changes())
    assert summary_line(data).endswith("2.0 MB in 20.0s (5.0 pages/s)")


def test_the_run_time_of_overlapping_sessions_is_their_union() -> None:
    """A run shared by workers has sessions at once: counted once, not summed; a resumed
    run's sessions follow each other and add up."""
    from mirror.manifest.runs import union_length

    assert union_length([(0, 10), (2, 5), (8, 12), (20, 21)]) == 13
    assert union_length([(0, 4), (4, 6), (10, 11)]) == 7
    assert union_length([]) == 0
