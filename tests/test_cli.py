"""The command line as a user runs it: its output and its exit code. `mirror.cli.main` runs
in this process, except where the test needs a process of its own: to send it signals, to
hold the archive's lock against it, or to look at the archive while it runs."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import re
import signal
import socket
import sqlite3
import sys
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import RunClock, write_config

from mirror.cli import main as mirror_cli
from mirror.crawl import crawler
from mirror.crawl.traprules import NAMES as TRAPS

ROOT = Path(__file__).resolve().parent.parent

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Cli:
    """`code, out, err = cli("run", "site.toml")`: `mirror.cli.main` in this process, run
    from tmp_path; out and err are what that one command printed."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = mirror_cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


async def mirror(*args: str, cwd: Path, timeout: float = 60,
                 on_start=None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", *args, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        if on_start:
            await asyncio.wait_for(on_start(proc), timeout)  # a child that died early: fail
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{h}">x</a>' for h in hrefs)


def test_check_prints_effective_settings(cli: Cli):
    code, out, err = cli("check", str(ROOT / "config" / "example.toml"))
    assert (code, err) == (0, "")
    assert "example.toml: OK" in out
    assert "  workers = 16" in out and "[archive]" in out


def test_check_lists_every_trap_rule_one_a_line(cli: Cli, tmp_path: Path):
    (tmp_path / "site.toml").write_text('[site]\nname = "x"\nstart_urls = ["http://a/"]\n'
                                        '[scope]\ntraps = ["login", "mediawiki-special"]\n')
    code, out, err = cli("check", "site.toml")
    assert (code, err) == (0, "")
    lines = [line.split() for line in out.splitlines() if " trap:" in line]
    assert [words[1] for words in lines] == [f"trap:{name}" for name in TRAPS]
    assert {words[1] for words in lines if words[0] == "on"} == {
        "trap:login", "trap:mediawiki-special"}
    special = next(line for line in out.splitlines() if "trap:mediawiki-special" in line)
    assert "MediaWiki: Special: pages but Special:AllPages" in special


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[site]\nname = "x"\nstart_urls = ["http://a/"]\n[crawl]\nworker = 3\n',
         "site.toml: [crawl] worker: unknown key; did you mean 'workers'?"),
        ('[site]\nname = "x"\nstart_urls = ["http://a/"]\n[crawl]\nworkers = "many"\n',
         "site.toml: [crawl] workers: expected an integer from 1 to 1,000,"
         " found 'many' (a string)"),
        ('[site]\nstart_urls = ["http://a/"]\n', "site.toml: [site] name: required key is missing"),
        ('[site\n', "site.toml: line 1, column 6: invalid TOML"),
    ],
    ids=["did-you-mean", "wrong-type", "missing", "syntax"],
)
def test_bad_config_exits_2_with_a_specific_message(cli: Cli, tmp_path: Path, toml: str,
                                                    message: str):
    (tmp_path / "site.toml").write_text(toml)
    for command in ("check", "run"):
        code, out, err = cli(command, "site.toml")
        assert code == 2
        assert err.startswith(f"mirror: {message}"), err
    assert not (tmp_path / "archive").exists()  # nothing written for a bad config


def test_check_prints_every_error_of_the_file_and_exits_2(cli: Cli, tmp_path: Path):
    (tmp_path / "site.toml").write_text(
        '[site]\nname = "x"\nstart_urls = ["http//example.com/"]\n'
        '[crawl]\nworker = 3\nper_host = "four"\ntimeout = 0\n')
    code, out, err = cli("check", "site.toml")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "mirror: site.toml: [site] start_urls[0]: expected an absolute http(s) URL such as "
        "'https://example.com/', found 'http//example.com/' (a string)",
        "mirror: site.toml: [crawl] worker: unknown key; did you mean 'workers'?",
        "mirror: site.toml: [crawl] per_host: expected an integer from 1 to 100,"
        " found 'four' (a string)",
        "mirror: site.toml: [crawl] timeout: expected a number > 0 and <= 3600,"
        " found 0 (an integer)",
        "mirror: site.toml: 4 errors",
    ]


def test_missing_config_file(cli: Cli):
    code, _, err = cli("run", "nope.toml")
    assert code == 2
    assert "nope.toml: cannot read" in err


def test_run_quiet_prints_one_line_and_writes_report(cli: Cli, site_in_thread,
                                                     tmp_path: Path):
    site = site_in_thread()
    site.page("/", links("/a", "/missing"))
    site.page("/a", "a")
    write_config(tmp_path, [site.base])
    collector = gc.get_freeze_count(), gc.get_threshold()
    code, out, err = cli("run", "site.toml", "--quiet")
    assert (code, err) == (0, "")
    # only the `mirror` process itself settles its collector (procgc): not a test's
    assert (gc.get_freeze_count(), gc.get_threshold()) == collector
    assert out.count("\n") == 1
    assert out.startswith("test: run 1 complete (exit 0): 3 captures, 0 failed")
    assert sorted(site.log) == ["/", "/a", "/missing"]
    assert (tmp_path / "archive" / "reports" / "1.json").exists()
    assert "200 " + site.base in (tmp_path / "archive" / "mirror.log").read_text()


def test_run_summary_lists_broken_links(cli: Cli, site_in_thread, tmp_path: Path):
    site = site_in_thread()
    site.page("/", links("/missing"))
    write_config(tmp_path, [site.base])
    code, out, _ = cli("run", "site.toml")
    assert code == 0
    assert f"{site.base}missing  [404]  linked from {site.base}" in out
    assert "status         2xx 1, 4xx 1" in out


def test_index_command_rebuilds(cli: Cli, site_in_thread, tmp_path: Path):
    site = site_in_thread()
    site.page("/", "hi")
    write_config(tmp_path, [site.base])
    code, _, err = cli("index", "site.toml")
    assert code == 2 and "no WARC folder" in err
    assert cli("run", "site.toml", "-q")[0] == 0
    index = tmp_path / "archive" / "index.cdxj"
    before = index.read_text()
    index.unlink()
    code, out, _ = cli("index", "site.toml")
    assert code == 0 and "1 lines from 1 WARC files" in out
    assert index.read_text() == before


async def test_sigterm_stops_gracefully_and_the_next_run_resumes(make_site, tmp_path: Path):
    site = await make_site()
    site.latency = 0.05
    pages = [f"/{i}" for i in range(60)]
    site.page("/", links(*pages))
    for p in pages:
        site.page(p, "page")
    write_config(tmp_path, [site.base], crawl={"workers": 2})

    async def stop_soon(proc):
        while len(site.log) < 10:
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGTERM)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, on_start=stop_soon)
    assert code == 130, err
    warc = tmp_path / "archive" / "warc"
    assert not list(warc.glob("*.open"))
    with sqlite3.connect(tmp_path / "archive" / "manifest.sqlite3") as db:
        done = {u for (u,) in db.execute("SELECT url FROM urls WHERE state='done'")}
        assert db.execute("SELECT state FROM runs").fetchall() == [("interrupted",)]
    assert 10 <= len(done) < 61
    first = list(site.log)
    code, out, _ = await mirror("run", "site.toml", "-q", cwd=tmp_path)
    assert code == 0
    refetched = [p for p in site.log[len(first):] if site.base + p.lstrip("/") in done]
    assert refetched == []
    assert sorted(set(site.log)) == sorted(["/", *pages])
    assert "run 1 complete" in out


def test_demo_runs_offline(cli: Cli, tmp_path: Path):
    code, out, err = cli("demo", str(tmp_path / "d"), "-q")
    assert code == 0, out + err
    assert "demo site served at http://127.0.0.1:" in out
    assert f"archive: {tmp_path / 'd' / 'archive' / 'demo'}" in out
    assert f"browse it offline: mirror serve {tmp_path / 'd' / 'demo.toml'}" in out
    assert f"see it in the library: mirror ui {tmp_path / 'd'}" in out
    index = (tmp_path / "d" / "archive" / "demo" / "index.cdxj").read_text().splitlines()
    assert len(index) >= 10
    first_site = (tmp_path / "d" / "demo.toml").read_text()

    # again: the demo site comes back on its port, so run 2 is an incremental backup
    code, out, err = cli("demo", str(tmp_path / "d"), "-q")
    assert code == 0, out + err
    assert (tmp_path / "d" / "demo.toml").read_text() == first_site
    assert re.search(r"run 2 complete \(exit 0\): \d+ captures, 0 failed, 0 new, 0 changed, "
                     r"[1-9]\d* unchanged, 0 gone", out), out

    # its port taken by another program: the demo says so and still runs
    port = int(re.search(r"127\.0\.0\.1:(\d+)", first_site).group(1))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        code, out, err = cli("demo", str(tmp_path / "d"), "-q")
    assert code == 0, out + err
    assert f"port {port} is taken: the demo site moves, so every URL is new" in out
    assert "run 3 complete (exit 0)" in out


async def test_second_run_on_a_locked_archive_exits_75(make_site, tmp_path: Path):
    from mirror.archive.lock import ArchiveLock

    site = await make_site()
    site.page("/", "hi")
    write_config(tmp_path, [site.base])
    with ArchiveLock(tmp_path / "archive"):
        code, _, err = await mirror("run", "site.toml", cwd=tmp_path)
    assert code == 75
    assert f"another mirror process (pid {os.getpid()}) is using this archive" in err
    assert site.log == []
    code, _, _ = await mirror("run", "site.toml", "-q", cwd=tmp_path)  # released: runs
    assert code == 0 and site.log == ["/"]


async def test_status_works_during_and_after_a_run(make_site, tmp_path: Path):
    site = await make_site()
    site.latency = 0.3  # 20 pages, 2 at a time: the run lasts about 3 s
    pages = [f"/{i}" for i in range(20)]
    site.page("/", links(*pages))
    for p in pages:
        site.page(p, f"page {p}")
    write_config(tmp_path, [site.base], crawl={"workers": 2})
    seen: dict[str, str] = {}

    async def look_during(proc):
        while len(site.log) < 3:
            await asyncio.sleep(0.01)
        code, out, err = await mirror("status", "site.toml", cwd=tmp_path)
        assert (code, err) == (0, "")
        seen["during"] = out

    code, _, _ = await mirror("run", "site.toml", "-q", cwd=tmp_path, on_start=look_during)
    assert code == 0
    assert "running (pid " in seen["during"]
    assert "URLs of the latest run: done " in seen["during"]
    code, out, _ = await mirror("status", "site.toml", cwd=tmp_path)
    assert code == 0
    assert "complete" in out and "21 captures" in out
    assert "URLs of the latest run: done 21" in out
    assert "WARC files: 1," in out


def test_status_without_an_archive(cli: Cli, tmp_path: Path):
    write_config(tmp_path, ["http://127.0.0.1:9/"])
    code, _, err = cli("status", "site.toml")
    assert code == 2 and "no manifest (has `mirror run` run yet?)" in err


async def test_second_signal_abandons_fetches_without_partial_records(make_site,
                                                                      tmp_path: Path):
    site = await make_site()
    site.latency = 3  # fetches in flight when the signals arrive would take 3 s
    pages = [f"/{i}" for i in range(8)]
    site.page("/", links(*pages))
    for p in pages:
        site.page(p, "page")
    write_config(tmp_path, [site.base], crawl={"workers": 4, "stop_grace": 30})
    loop = asyncio.get_running_loop()
    times: dict[str, float] = {}

    async def two_signals(proc):
        while len(site.log) < 2:  # "/" done, its links in flight
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        await asyncio.sleep(0.3)
        times["sent"] = loop.time()
        proc.send_signal(signal.SIGINT)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, on_start=two_signals)
    assert loop.time() - times["sent"] < 2.5  # did not wait for the 3 s responses
    assert code == 130, err
    warc = tmp_path / "archive" / "warc"
    assert not list(warc.glob("*.open"))
    files = [str(p) for p in warc.glob("*.warc.gz")]
    check = await asyncio.create_subprocess_exec(sys.executable, "-m", "warcio.cli", "check",
                                                 *files)
    assert await check.wait() == 0
    with sqlite3.connect(tmp_path / "archive" / "manifest.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM urls WHERE state='leased'").fetchone() == (0,)


def test_robots_are_obeyed_archived_and_explained(cli: Cli, site_in_thread, tmp_path: Path):
    site = site_in_thread()
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.page("/", links("/private/x", "/public"))
    site.page("/public", "ok")
    write_config(tmp_path, [site.base], scope={"robots": True})
    code, out, _ = cli("run", "site.toml")
    assert code == 0
    assert sorted(site.log) == ["/", "/public", "/robots.txt", "/sitemap.xml"]  # once each
    assert "skipped        robots 1" in out
    code, out, _ = cli("explain", "site.toml", site.base + "private/x", "--offline")
    assert code == 0
    assert f"canonical  {site.base}private/x" in out
    assert "as a link            crawled as a page (in scope)" in out
    assert "robots.txt  disallows it (parsed, archived " in out
    code, out, _ = cli("explain", "site.toml", "http://elsewhere.test/a", "--offline")
    assert "as a link            not fetched: rule host:" in out
    assert "as a page requisite  fetched, links not followed" in out
    report = json.loads((tmp_path / "archive" / "reports" / "1.json").read_text())
    assert report["skipped_urls"] == {"robots": [site.base + "private/x"]}


def test_runs_diff_and_new_run(cli: Cli, site_in_thread, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch):
    clock = RunClock()  # the WARC dates of every run `mirror run` starts here
    monkeypatch.setattr(crawler, "Crawler", functools.partial(crawler.Crawler, clock=clock))
    site = site_in_thread()
    site.page("/", links("/a", "/b"))
    site.page("/a", "a one")
    site.page("/b", "b one")
    write_config(tmp_path, [site.base])
    assert cli("run", "site.toml", "-q")[0] == 0
    code, _, err = cli("diff", "site.toml")
    assert code == 2 and "diff needs two runs; this archive has only run 1" in err
    site.page("/a", "a two")
    clock.next_run()
    code, out, _ = cli("run", "site.toml", "-q")
    assert code == 0 and "run 2 complete" in out and "1 changed, 2 unchanged" in out
    code, out, _ = cli("runs", "site.toml")
    lines = out.splitlines()
    assert lines[0].startswith("run 1    complete") and "new 3, changed 0" in lines[0]
    assert lines[1].startswith("run 2    complete") and "changed 1, unchanged 2" in lines[1]
    code, out, _ = cli("diff", "site.toml")
    assert out.splitlines() == ["run 1 -> run 2: new 0, changed 1, unchanged 2, gone 0",
                                "  changed (1):", f"    {site.base}a"]
    code, out, _ = cli("diff", "site.toml", "1", "2")
    assert f"    {site.base}a" in out
    code, _, err = cli("diff", "site.toml", "7")
    assert code == 2 and "diff takes up to two run ids among [1, 2]" in err

    # an unfinished run is resumed, unless --new-run says to leave it
    with sqlite3.connect(tmp_path / "archive" / "manifest.sqlite3") as db:
        db.execute("INSERT INTO runs (id, started_at, state, config_digest) "
                   "VALUES (3, '2026-01-01T00:00:00Z', 'interrupted', 'x')")
    clock.next_run()
    code, out, _ = cli("run", "site.toml", "-q", "--new-run")
    assert code == 0 and "run 4 complete" in out
    with sqlite3.connect(tmp_path / "archive" / "manifest.sqlite3") as db:
        states = db.execute("SELECT id, state FROM runs ORDER BY id").fetchall()
        dates = db.execute("SELECT run_id, MIN(warc_date), MAX(warc_date) FROM captures "
                           "GROUP BY run_id ORDER BY run_id").fetchall()
    assert states == [(1, "complete"), (2, "complete"), (3, "abandoned"), (4, "complete")]
    # each run's captures at 14-digit timestamps of their own, later than the run before's
    assert [run for run, _, _ in dates] == [1, 2, 4]
    for (_, _, last), (_, first, _) in pairwise(dates):
        assert last[:19] < first[:19], dates


def test_check_names_the_browser_it_will_use(cli: Cli, tmp_path: Path):
    """Issue 35: the default mode "auto" with the first browser found (Debian's chromium
    here), "always" with a configured one, "off" with none."""
    site = '[site]\nname = "x"\nstart_urls = ["http://a/"]\n'
    (tmp_path / "site.toml").write_text(site)
    code, out, err = cli("check", "site.toml")
    assert (code, err) == (0, "")
    assert re.search(r'^browser: /\S*chrom\S* loads the pages built by scripts '
                     r'\(\[browser\] mode = "auto"\)$', out, re.MULTILINE), out
    (tmp_path / "site.toml").write_text(site + "[browser]\nmode = 'always'\n"
                                        "executable = '/usr/bin/chromium'\n")
    out = cli("check", "site.toml")[1]
    assert 'browser: /usr/bin/chromium loads every HTML page ([browser] mode = "always")' in out
    (tmp_path / "site.toml").write_text(site + "[browser]\nmode = 'off'\n")
    out = cli("check", "site.toml")[1]
    assert 'browser: off ([browser] mode = "off")' in out


def test_check_says_how_to_enable_a_browser_when_none_is_found(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """No browser on PATH nor in the usual places (both emptied for this test): the line says
    what happens to such pages and how to install one on this system."""
    from mirror.browser import find
    from mirror.browserconfig import install_command, this_system

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(find, "PLACES", ())
    (tmp_path / "site.toml").write_text('[site]\nname = "x"\nstart_urls = ["http://a/"]\n')
    code, out, err = cli("check", "site.toml")
    assert (code, err) == (0, "")
    line = next(line for line in out.splitlines() if line.startswith("browser:"))
    assert line == ('browser: none found ([browser] mode = "auto"): pages built by scripts '
                    "will be stored as the server sends them; install a Chromium-family "
                    f"browser ({install_command(*this_system())}) or set [browser] executable "
                    "to one already installed; mirror never downloads one")
