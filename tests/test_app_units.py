"""The app's pure parts: the doors' checks, a site's state, the formatting of its pages."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.app.guard import origin_ok, without_token
from mirror.app.jobs import Launch, Launcher
from mirror.app.library import Library
from mirror.app.search import MAX_PAGES, clamp_page
from mirror.app.status import Reports, SiteState, classify, site_status
from mirror.app.ui import host_names
from mirror.app.views import ago, duration, exit_text, highlight
from mirror.archive.lock import ArchiveLock
from mirror.model import Run
from mirror.webapp import host_allowed, loopback_hosts


def run(state: str, exit_code: int | None) -> Run:
    return Run(1, "2026-11-24T10:00:00Z", None, state, "sha256:x", exit_code)


@pytest.mark.parametrize(("holder", "last", "live", "state"), [
    (None, None, False, SiteState.NEVER_RUN),
    ("12", None, True, SiteState.RUNNING),  # before its first run row: the live file says
    ("12", None, False, SiteState.BUSY),
    ("12", run("running", None), False, SiteState.RUNNING),
    ("12", run("complete", 0), False, SiteState.BUSY),  # verify or index holds it
    (None, run("running", None), False, SiteState.INTERRUPTED),  # killed: resumable
    (None, run("interrupted", 130), False, SiteState.INTERRUPTED),
    (None, run("complete", 0), False, SiteState.IDLE),
    (None, run("complete", 3), False, SiteState.IDLE),  # some URLs failed: still an archive
    (None, run("limit", 4), False, SiteState.IDLE),
    (None, run("complete", 1), False, SiteState.FAILED),
])
def test_a_sites_state_comes_from_its_lock_its_last_run_and_its_live_file(
        holder: str | None, last: Run | None, live: bool, state: SiteState) -> None:
    assert classify(holder, last, live) == state


def test_a_run_whose_report_says_it_failed_makes_the_site_failed() -> None:
    """Exit 3 with no page stored (runhealth): failed, not idle; a running site is still
    running, and a stopped one still resumable."""
    why = "stored no page (connection refused: 127.0.0.1:9)"
    assert classify(None, run("complete", 3), False, why) == SiteState.FAILED
    assert classify(None, run("complete", 3), False, None) == SiteState.IDLE
    assert classify("12", run("running", None), True, why) == SiteState.RUNNING
    assert classify(None, run("interrupted", 130), False, why) == SiteState.INTERRUPTED


@pytest.mark.parametrize(("origin", "referer", "ok"), [
    ("http://127.0.0.1:8700", None, True),
    ("http://127.0.0.1:8700", "http://evil.test/", True),  # Origin decides when present
    ("http://127.0.0.1:8701", None, False),  # another port: a replay server's pages
    ("https://127.0.0.1:8700", None, False),
    ("null", "http://127.0.0.1:8700/", False),  # a sandboxed frame or a data: page
    (None, "http://127.0.0.1:8700/site/a", True),
    (None, "http://127.0.0.1:8700", True),
    (None, "http://127.0.0.1:87000/", False),
    (None, "http://127.0.0.1:8700.evil.test/", False),
    (None, None, False),
])
def test_a_state_change_must_come_from_the_apps_own_origin(
        origin: str | None, referer: str | None, ok: bool) -> None:
    assert origin_ok(origin, referer, "127.0.0.1:8700") is ok


def test_the_host_check_knows_only_loopback_names_with_the_port() -> None:
    allowed = loopback_hosts(8700)
    assert allowed == {"127.0.0.1:8700", "localhost:8700", "[::1]:8700"}
    assert host_allowed("LOCALHOST:8700", allowed)
    for host in (None, "127.0.0.1", "127.0.0.1:8701", "rebind.evil.test:8700", ""):
        assert not host_allowed(host, allowed), host


def test_host_names_are_the_address_given_or_this_machines_for_a_wildcard() -> None:
    assert host_names("127.0.0.2") == {"127.0.0.2"} and host_names("::1") == {"[::1]"}
    assert host_names("192.168.1.20") == {"192.168.1.20"}
    assert host_names("fd00::5") == {"[fd00::5]"}
    assert socket.gethostname().lower() in host_names("0.0.0.0")


def test_the_token_leaves_the_address_once_used() -> None:
    assert without_token("/", {"token": "t"}) == "/"
    assert without_token("//evil.test/x", {"token": "t"}) == "/evil.test/x"
    assert without_token("/site/a", {"token": "t", "message": "hi there"}) == \
        "/site/a?message=hi+there"


def test_formatting() -> None:
    assert duration(None) == "" and duration(4.24) == "4.2 s"
    assert duration(185) == "3 min 05 s" and duration(7620) == "2 h 07 min"
    now = 1_795_500_000.0  # 2026-11-24T06:00:00Z
    assert ago("2026-11-18T00:00:00Z", now) == "6 d ago"
    assert ago("2026-11-24T05:59:30Z", now) == "30 s ago"
    assert ago("not a time") == "not a time" and ago(None) == ""
    assert ago("2020-01-01T00:00:00Z", now) == "2020-01-01 00:00:00 UTC"
    assert ago("2026-11-24T05:59:30.123456Z", now) == "30 s ago"  # a WARC-Date's fractions
    assert exit_text(3) == "exit 3 (some URLs failed)" and exit_text(None) == ""
    assert exit_text(3, "stored no page") == "exit 3 (run failed)"


def test_highlight_marks_the_spans_and_escapes_everything_else() -> None:
    title = "<script>x</script> & Walrus"
    assert highlight(title, [(21, 27)]) == \
        "&lt;script&gt;x&lt;/script&gt; &amp; <mark>Walrus</mark>"
    assert highlight("a<b", [(1, 2)]) == "a<mark>&lt;</mark>b"
    # out of order, overlapping, empty and out of range spans cannot break the markup
    assert highlight("abcdef", [(4, 9), (0, 2), (1, 3), (5, 5), (7, 8)]) == \
        "<mark>ab</mark><mark>c</mark>d<mark>ef</mark>"
    assert highlight("", []) == "" and highlight("x", []) == "x"


@given(st.text(), st.lists(st.tuples(st.integers(-3, 40), st.integers(-3, 40))))
def test_highlight_keeps_the_text_and_adds_only_marks(
        text: str, spans: list[tuple[int, int]]) -> None:
    import html

    shown = str(highlight(text, spans))
    assert shown.count("<mark>") == shown.count("</mark>")
    assert "<" not in shown.replace("<mark>", "").replace("</mark>", "")
    assert html.unescape(shown.replace("<mark>", "").replace("</mark>", "")) == text


def test_a_search_page_number_is_clamped() -> None:
    assert [clamp_page(p) for p in ("", "0", "-2", "x", "²", "1", "3")] == [1, 1, 1, 1, 1, 1, 3]
    assert clamp_page("99999999999999999999") == MAX_PAGES


def test_the_library_reads_a_site_file_again_only_when_it_changes(tmp_path: Path) -> None:
    site = tmp_path / "a.toml"
    site.write_text('[site]\nname = "a"\nstart_urls = ["http://a.test/"]\n')
    (tmp_path / "notes.txt").write_text("not a site")
    (tmp_path / ".hidden.toml").write_text("x")
    library = Library(tmp_path)
    first = library.get("a")
    assert first is not None and first.config is not None and library.get("a") is first
    assert [e.id for e in library.sites()] == ["a"]
    site.write_text('[site]\nname = "a"\nstart_urls = "http://a.test/"\n')
    os.utime(site, ns=(1, 1))
    second = library.get("a")
    assert second is not first and second is not None and second.error is not None
    assert second.error.key == "site.start_urls"
    assert library.get("../a") is None and library.get("missing") is None


async def test_a_launch_is_starting_until_seen_with_its_lock_or_gone(tmp_path: Path) -> None:
    """A run that released its lock and is still exiting must not block the next run (the
    Resume right after a Stop): start_run waits for it to go, a moment at most."""
    launcher = Launcher(tmp_path / "state")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(0.3)")
    launch = launcher.launches["s"] = Launch(proc.pid, time.monotonic(), tmp_path / "s.out")
    reaper = asyncio.create_task(launcher._reap(proc, launch))
    assert launcher.starting("s", None)  # alive, lock free, never seen holding it
    await launcher._settle("s", tmp_path / "archive")
    assert launch.exit_code == 0 and not launcher.starting("s", None)
    await reaper
    other = launcher.launches["t"] = Launch(4242, time.monotonic(), tmp_path / "t.out")
    assert not launcher.starting("t", "4242") and other.held  # past its start for good
    assert not launcher.starting("t", None)


def test_a_manifest_being_created_is_a_run_starting_not_a_failure(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "manifest.sqlite3").write_bytes(b"")  # what a first run has made so far
    with ArchiveLock(root):
        status = site_status(root, Reports())
        assert status.state == SiteState.BUSY and status.error is None
    status = site_status(root, Reports())  # no one is making it: it is broken
    assert status.state == SiteState.FAILED and "not a usable manifest" in (status.error or "")
