"""An interrupted run counts the URLs it has not reached as pending, never as gone (issue 31,
J2): in `mirror run`'s summary, `mirror runs`, `mirror diff`, the report, the hooks'
environment and the app's home row; once resumed to its end, the run's real counts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from conftest import TestSite
from uiproc import UiProcess

from mirror.cli import main as mirror_cli

pytestmark = pytest.mark.slow

PAGES = 300
#: pages of run 2 served before the site holds the next requests until the test has
#: stopped the run
SERVED_BEFORE_STOP = 40


class Gate:
    """Holds every /p request past `after` once armed, until released."""

    def __init__(self) -> None:
        self.armed, self.after, self.served = False, 0, 0
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def passage(self) -> None:
        self.served += 1
        if self.armed and self.served > self.after:
            self.held.set()
            await self.release.wait()


def big_site(site: TestSite, gate: Gate, linked: range) -> None:
    """/ links to /p0 ... /p{PAGES-1} (those of `linked`); each page passes the gate."""
    site.page("/", "<html><body>" + "".join(f'<a href="/p{i}.html">{i}</a> ' for i in linked)
              + "</body></html>")
    for i in range(PAGES):
        site.handler(f"/p{i}.html", _page(gate, f"<html><body><p>page {i}</p></body></html>"))


def _page(gate: Gate, body: str, status: int = 200) -> Callable[[web.Request],
                                                               Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        await gate.passage()
        return web.Response(text=body, status=status, content_type="text/html")
    return handler


def site_file(folder: Path, base: str) -> Path:
    """The site file, with hooks that keep what they are told, one file per run and exit."""
    keep = "env | grep ^MIRROR_ | sort > hook-$MIRROR_RUN_ID-$MIRROR_EXIT_CODE.env"
    path = folder / "big.toml"
    path.write_text(f'[site]\nname = "big"\nstart_urls = ["{base}"]\noutput_dir = "archive/big"\n'
                    "[scope]\nrobots = false\n[crawl]\nworkers = 4\nper_host = 4\n"
                    f'[hooks]\nafter = "{keep}"\non_failure = "{keep}"\n', encoding="utf-8")
    return path


async def mirror_run(path: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "-q", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def finished(proc: asyncio.subprocess.Process, timeout: float = 120) -> tuple[int, str]:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def stop_when_held(proc: asyncio.subprocess.Process, gate: Gate) -> None:
    """SIGINT to the run once the site holds a request; the held requests are let go only
    when the run has taken the signal, so that it fetches nothing more."""
    await asyncio.wait_for(gate.held.wait(), 60)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.stderr is not None
    said = b""
    while b"finishing in-flight fetches" not in said:
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert line, said
        said += line
    gate.release.set()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert mirror_cli.main(list(argv)) == 0
    return capsys.readouterr().out


def report(folder: Path, run_id: int) -> dict[str, int]:
    data = json.loads((folder / "archive" / "big" / "reports" / f"{run_id}.json").read_text())
    counts: dict[str, int] = data["changes"]["counts"]
    return counts


def hook_env(folder: Path, run_id: int, code: int) -> dict[str, str]:
    text = (folder / f"hook-{run_id}-{code}.env").read_text()
    return dict(line.split("=", 1) for line in text.splitlines())


async def home_row(folder: Path) -> str:
    """The text of the site's row on the home page of a real `mirror ui` over `folder`."""
    ui = UiProcess.start(folder)
    try:
        async with ui.session() as session, session.get(ui.base) as r:
            page = await r.text()
    finally:
        ui.stop()
    found = re.search(r'<tr id="site-big".*?</tr>', page, re.S)
    assert found, page
    return " ".join(re.sub(r"<[^>]+>", " ", found[0]).split())


async def test_a_stopped_run_counts_what_it_did_not_reach_as_pending_until_resumed(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
        capsys: pytest.CaptureFixture[str]) -> None:
    site, gate = await make_site(), Gate()
    big_site(site, gate, range(PAGES))
    path = site_file(tmp_path, site.base)
    code, out = await finished(await mirror_run(path))
    assert code == 0, out
    assert report(tmp_path, 1)["new"] == PAGES + 1

    # run 2: p3 answers 404 (found gone), p298 changed, p299 no longer linked; the site
    # holds its requests after 40 pages, and the run is stopped as the app's Stop does
    big_site(site, gate, range(PAGES - 1))
    site.handler("/p3.html", _page(gate, "no more", status=404))
    site.handler("/p298.html", _page(gate, "<html><body><p>page 298, new</p></body></html>"))
    gate.armed, gate.after, gate.served = True, SERVED_BEFORE_STOP, 0
    proc = await mirror_run(path)
    await stop_when_held(proc, gate)
    code, out = await finished(proc)
    assert code == 130, out

    counts = report(tmp_path, 2)
    pending = counts["pending"]
    assert counts["gone"] == 1 and counts["new"] == 0 and counts["changed"] == 1  # p3; /
    assert PAGES - SERVED_BEFORE_STOP - 8 <= pending <= PAGES - SERVED_BEFORE_STOP, counts
    assert counts["unchanged"] + counts["changed"] + counts["gone"] + pending == PAGES + 1
    first = out.splitlines()[0]
    assert first.startswith("big: run 2 interrupted (exit 130)") and \
        f", 1 gone, {pending} pending," in first, out
    runs = cli(capsys, "runs", str(path)).splitlines()
    assert runs[1].startswith("run 2    interrupted") and \
        f"gone 1, pending {pending}, failed 0" in runs[1], runs
    diff = cli(capsys, "diff", str(path)).splitlines()
    assert diff[0] == (f"run 1 -> run 2: new 0, changed 1, unchanged {counts['unchanged']}, "
                       f"gone 1, pending {pending}"), diff
    assert f"    {site.base}p3.html" in diff and f"    {site.base}p299.html" not in diff
    told = hook_env(tmp_path, 2, 130)
    assert (told["MIRROR_GONE"], told["MIRROR_PENDING"]) == ("1", str(pending))
    row = await home_row(tmp_path)
    assert "interrupted" in row and f"1 gone · {pending} pending" in row, row

    # resumed: the same run reaches every URL, and its counts are the real ones
    gate.armed = False
    code, out = await finished(await mirror_run(path))
    assert code == 0, out
    assert report(tmp_path, 2) == {"new": 0, "changed": 2, "unchanged": PAGES - 3, "gone": 2,
                                   "pending": 0, "failed": 0}
    assert out.splitlines()[0].startswith("big: run 2 complete (exit 0)") and \
        "2 gone," in out and "pending" not in out, out
    runs = cli(capsys, "runs", str(path)).splitlines()
    assert runs[1].startswith("run 2    complete") and runs[1].endswith(
        f"new 0, changed 2, unchanged {PAGES - 3}, gone 2, failed 0"), runs
    diff = cli(capsys, "diff", str(path)).splitlines()
    assert f"    {site.base}p299.html" in diff and "pending" not in diff[0]
    told = hook_env(tmp_path, 2, 0)
    assert (told["MIRROR_GONE"], told["MIRROR_PENDING"], told["MIRROR_FAILURE"]) == \
        ("2", "0", "")
    row = await home_row(tmp_path)
    assert "idle" in row and "2 gone · 0 failed" in row and "pending" not in row, row


async def test_a_stopped_first_run_counts_its_queued_urls_as_pending(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    """A first run stopped early: everything it stored is new, nothing is gone, and the URLs
    it found but had not fetched yet are pending (there is no run before it, so these are
    its frontier's)."""
    site, gate = await make_site(), Gate()
    big_site(site, gate, range(PAGES))
    path = site_file(tmp_path, site.base)
    gate.armed, gate.after = True, 10
    proc = await mirror_run(path)
    await stop_when_held(proc, gate)
    code, out = await finished(proc)
    assert code == 130, out
    counts = report(tmp_path, 1)
    with sqlite3.connect(tmp_path / "archive" / "big" / "manifest.sqlite3") as db:
        queued = db.execute("SELECT COUNT(*) FROM urls WHERE state IN ('pending', 'leased') "
                            "AND via != 'robots'").fetchone()[0]
    assert counts["gone"] == 0 and 10 < counts["new"] < PAGES, counts
    assert counts["pending"] == queued > 0, (counts, queued)
    first = out.splitlines()[0]
    assert first.startswith("big: run 1 interrupted (exit 130)") and \
        f"0 gone, {queued} pending," in first, out
    row = await home_row(tmp_path)
    assert "interrupted" in row and f"0 gone · {queued} pending" in row, row
