"""A run that stored nothing, or mostly failed, is a failed run with its top reason (issue 31,
J2): runhealth's verdict, `mirror run`'s first line, the app's home row and site page."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import TestSite
from uiproc import UiProcess, mirror_cmd, site_file

from mirror.run.changes import compare
from mirror.run.health import Health, RunNumbers, health, short_reason, start_problem, top_reason

# -- the verdict, pure ---------------------------------------------------------------------

REFUSED = "host unreachable: connection refused"


def numbers(pages: int, failed: int, *, starts: int = 1, starts_failed: int = 0,
            finished: bool = True) -> RunNumbers:
    return RunNumbers(finished, pages,
                      [(f"http://h.test:81/{i}", REFUSED) for i in range(failed)],
                      [(f"http://h.test:81/s{i}", REFUSED if i < starts_failed else None)
                       for i in range(starts)])


@pytest.mark.parametrize(("n", "problem"), [
    (numbers(0, 3, starts_failed=1), "stored no page"),
    (numbers(0, 0), "stored no page"),
    (numbers(2, 3), "3 URLs failed, 2 pages stored"),
    (numbers(1, 2), "2 URLs failed, 1 page stored"),
    (numbers(5, 1, starts=2, starts_failed=2), "every start URL failed"),
    (numbers(5, 5), None),  # as many failures as pages: not yet a failed run
    (numbers(5, 1, starts=2, starts_failed=1), None),
    (numbers(0, 9, finished=False), None),  # a run under way or stopped is not judged
])
def test_a_run_fails_when_it_stores_nothing_or_mostly_fails(n: RunNumbers,
                                                           problem: str | None) -> None:
    verdict = health(n)
    assert verdict.problem == problem
    assert verdict.failed is (problem is not None)
    if n.failed and problem:
        assert verdict.reason == "connection refused: h.test:81"
        assert verdict.text() == f"{problem} (connection refused: h.test:81)"


def test_the_top_reason_is_the_most_common_failure_with_its_host() -> None:
    failed = [("http://a.test/1", "HTTP 503"), ("http://b.test:8080/x", REFUSED),
              ("http://b.test:8080/robots.txt",
               "connect: cannot connect to b.test:8080: Connection refused"),
              ("http://a.test/2", "HTTP 503 (retries would outlast max_retry_time)"),
              ("http://a.test/3", "HTTP 503")]
    assert top_reason(failed) == "HTTP 503: a.test"
    assert top_reason(failed[1:3]) == "connection refused: b.test:8080"
    assert top_reason([]) is None
    assert short_reason("timeout: read timed out") == "timeout: read timed out"
    assert Health().text() == "" and Health("stored no page").text() == "stored no page"


def test_a_start_url_fails_by_its_state_or_its_answer() -> None:
    assert start_problem("done", 200, None) is None
    assert start_problem("done", 301, None) is None
    assert start_problem("done", 404, None) == "HTTP 404"
    assert start_problem("failed", 503, "HTTP 503") == "HTTP 503"
    assert start_problem("skipped", None, "robots.txt") == "skipped (robots.txt)"
    verdict = health(RunNumbers(True, 0, [], [("http://h.test/", "HTTP 404")]))
    assert verdict.text() == "stored no page (HTTP 404: h.test)"


def test_only_a_complete_run_says_a_url_is_gone() -> None:
    before = {u: (200, "d") for u in ("a", "b", "c", "d")} | {"x": (404, "e")}
    after = {"a": (200, "d"), "b": (410, "f")}
    stopped = compare(before, after, complete=False, failed={"d"})
    assert (stopped.unchanged, stopped.gone, stopped.pending) == (["a"], ["b"], ["c"])
    done = compare(before, after, complete=True, failed={"d"})
    assert (done.gone, done.pending) == (["b", "c"], [])
    assert done.counts() == {"new": 0, "changed": 0, "unchanged": 1, "gone": 2, "pending": 0}


def test_a_stopped_runs_own_queue_is_pending() -> None:
    """URLs the stopped run found and still has queued are pending, whether a run before it
    had them ("c") or not ("q"); one it captured meanwhile ("a") or failed ("d") is not;
    a complete run has no queue to count."""
    before = {u: (200, "d") for u in ("a", "c", "d")}
    after = {"a": (200, "d"), "n": (200, "e")}
    stopped = compare(before, after, complete=False, failed={"d"}, queued={"a", "c", "q"})
    assert (stopped.new, stopped.pending, stopped.gone) == (["n"], ["c", "q"], [])
    first = compare({}, after, complete=False, queued={"q", "r"})
    assert (first.new, first.pending) == (["a", "n"], ["q", "r"])
    done = compare(before, after, complete=True, failed={"d"}, queued={"q"})
    assert (done.pending, done.gone) == ([], ["c"])


# -- what a person sees ----------------------------------------------------------------------


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder


def closed_port() -> int:
    """A port nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def mirror_run(path: Path) -> tuple[int, str]:
    """`mirror run -q` as cron runs it: (exit code, what it printed on stdout)."""
    return await mirror_cmd("run", "-q", str(path))


async def pages_of(ui: UiProcess, name: str) -> tuple[str, str]:
    """(the text of the site's home row, the text of its site page) in the real app."""
    async with ui.session() as session:
        async with session.get(ui.base) as r:
            home = await r.text()
        async with session.get(f"{ui.base}site/{name}") as r:
            site = await r.text()
    found = re.search(rf'<tr id="site-{name}".*?</tr>', home, re.S)
    assert found, home
    return text_of(found[0]), text_of(site)


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.slow
async def test_a_run_against_a_closed_port_is_failed_with_its_reason(library: Path) -> None:
    port = closed_port()
    path = site_file(library, "dead", f"http://127.0.0.1:{port}/", timeout=5)
    code, out = await mirror_run(path)
    assert code == 3, out  # "finished, some URLs failed" keeps its code; the words change
    reason = f"connection refused: 127.0.0.1:{port}"
    assert out.splitlines()[0].startswith(
        f"dead: run 1 FAILED: stored no page ({reason}); exit 3: 0 captures, 1 failed"), out
    runs = subprocess.run([sys.executable, "-m", "mirror", "runs", str(path)],
                          capture_output=True, text=True, timeout=60).stdout
    assert runs.rstrip().endswith(f"failed 1  FAILED: stored no page ({reason})"), runs
    ui = UiProcess.start(library)
    try:
        row, site = await pages_of(ui, "dead")
        async with ui.session() as session, session.get(f"{ui.base}site/dead/runs/1") as r:
            report = text_of(await r.text())
    finally:
        ui.stop()
    assert f"failed stored no page ({reason})" in row and "idle" not in row, row
    assert "exit 3 (run failed)" in row, row
    assert f"failed stored no page ({reason})" in site, site
    assert f"run 1 failed : stored no page ({reason})" in site, site  # the runs table
    assert f"failed: stored no page ({reason})" in report, report


@pytest.mark.slow
async def test_a_run_whose_failures_outnumber_its_pages_is_failed(
        library: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    site.page("/", "".join(f'<a href="/p{i}.html">{i}</a>' for i in range(10)))
    for i in range(10):
        site.page(f"/p{i}.html", f"page {i}", status=200 if i < 2 else 503)
    path = site_file(library, "flaky", site.base, max_tries=1)
    code, out = await mirror_run(path)
    assert code == 3, out
    host = site.base.removeprefix("http://").rstrip("/")
    assert out.splitlines()[0].startswith(
        f"flaky: run 1 FAILED: 8 URLs failed, 3 pages stored (HTTP 503: {host}); exit 3"), out
    ui = UiProcess.start(library)
    try:
        row, _ = await pages_of(ui, "flaky")
    finally:
        ui.stop()
    assert f"failed 8 URLs failed, 3 pages stored (HTTP 503: {host})" in row, row

    # the same site healthy again: the next run is not failed, the row is idle
    for i in range(10):
        site.page(f"/p{i}.html", f"page {i}")
    code, out = await mirror_run(path)
    assert code == 0 and out.startswith("flaky: run 2 complete (exit 0)"), out
    ui = UiProcess.start(library)
    try:
        row, _ = await pages_of(ui, "flaky")
    finally:
        ui.stop()
    assert "idle" in row and "FAILED" not in row and "stored" not in row, row
