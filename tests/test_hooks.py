"""[hooks] (issue 18): real shell commands after a run, told about it through MIRROR_*
variables, bounded in time, their output in mirror.log; never the run's exit code."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from mirror.cli import main as mirror_cli
from mirror.config import HooksSection
from mirror.run import hooks
from mirror.run.hooks import Outcome, choose, environment, run_hooks


def outcome(tmp_path: Path, code: int = 0, run_id: int | None = 4) -> Outcome:
    return Outcome("ex", tmp_path / "ex.toml", tmp_path / "archive", run_id, code,
                   tmp_path / "archive" / "reports" / "4.json" if run_id else None)


@pytest.mark.parametrize(("code", "hook"), [
    (0, "after"), (3, "after"), (4, "after"),  # a snapshot was made
    (1, "on_failure"), (2, "on_failure"), (130, "on_failure"),
])
def test_the_exit_code_chooses_the_hook(code: int, hook: str) -> None:
    both = HooksSection(after="a", on_failure="f")
    assert choose(both, code) == (hook, {"after": "a", "on_failure": "f"}[hook])
    assert choose(HooksSection(), code) is None
    assert choose(HooksSection(after="  ", on_failure=" "), code) is None


def test_the_environment_tells_the_run(tmp_path: Path) -> None:
    report = tmp_path / "archive" / "reports" / "4.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"changes": {"counts": {
        "new": 1, "changed": 2, "unchanged": 3, "gone": 0, "pending": 7, "failed": 4}},
        "health": {"text": "stored no page (HTTP 503: h.test)"}}))
    told = Outcome.of("ex", tmp_path / "ex.toml", tmp_path / "archive", 4, 3, report)
    env = environment(told, {"PATH": "/bin", "MIRROR_SITE": "stale"})
    assert env == {"PATH": "/bin", "MIRROR_SITE": "ex",
                   "MIRROR_SITE_FILE": str(tmp_path / "ex.toml"),
                   "MIRROR_ARCHIVE": str(tmp_path / "archive"), "MIRROR_RUN_ID": "4",
                   "MIRROR_EXIT_CODE": "3", "MIRROR_REPORT": str(report),
                   "MIRROR_NEW": "1", "MIRROR_CHANGED": "2", "MIRROR_UNCHANGED": "3",
                   "MIRROR_GONE": "0", "MIRROR_PENDING": "7", "MIRROR_FAILED": "4",
                   "MIRROR_FAILURE": "stored no page (HTTP 503: h.test)"}
    early = environment(outcome(tmp_path, 1, run_id=None), {})
    assert (early["MIRROR_RUN_ID"], early["MIRROR_REPORT"], early["MIRROR_PENDING"],
            early["MIRROR_FAILURE"]) == ("", "", "", "")


def test_a_run_that_failed_by_its_report_calls_on_failure() -> None:
    both = HooksSection(after="a", on_failure="f")
    assert choose(both, 3, failed=True) == ("on_failure", "f")
    assert choose(both, 0, failed=False) == ("after", "a")


def test_a_hook_runs_through_the_shell_with_its_output_in_the_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_file = tmp_path / "archive" / "mirror.log"
    command = ('echo "site=$MIRROR_SITE run=$MIRROR_RUN_ID code=$MIRROR_EXIT_CODE" | tee seen; '
               'echo "report=$MIRROR_REPORT" >&2; pwd')
    caplog.set_level(logging.INFO, "mirror.run.hooks")
    assert run_hooks(HooksSection(after=command), outcome(tmp_path), log_file) == 0
    assert (tmp_path / "seen").read_text() == "site=ex run=4 code=0\n"  # in the site's folder
    assert log_file.read_text() == (f"site=ex run=4 code=0\nreport={tmp_path}/archive/reports/"
                                    f"4.json\n{tmp_path}\n")
    assert "hook after: running" in caplog.text and "hook after: done in" in caplog.text


def test_a_failing_hook_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_file = tmp_path / "mirror.log"
    failing = HooksSection(on_failure="echo cannot reach the monitor; exit 7")
    assert run_hooks(failing, outcome(tmp_path, 1), log_file) == 7
    assert "cannot reach the monitor" in log_file.read_text()
    assert ("hook on_failure: failed with exit 7 after" in caplog.text
            and "the run's exit code stays 1" in caplog.text)
    assert run_hooks(failing, outcome(tmp_path, 0), log_file) is None  # `after` is unset


def test_a_hanging_hook_is_stopped_with_what_it_started(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At its timeout the hook's whole process group goes: a child it left in the
    background too (SIGTERM, then SIGKILL for one that ignores it)."""
    pids = tmp_path / "pids"
    command = (f"sh -c 'trap \"\" TERM; sleep 60' & echo $! > {pids}; "
               "sleep 60 & wait")
    monkeypatch.setattr(hooks, "KILL_GRACE", 0.5)
    started = time.monotonic()
    status = run_hooks(HooksSection(after=command, timeout=0.5), outcome(tmp_path),
                       tmp_path / "mirror.log")
    assert status is None and time.monotonic() - started < 10
    assert "hook after: stopped after 0.5s (its timeout); the run's exit code stays 0" \
        in caplog.text
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (not reaped by its dead parent yet) is gone for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_hook_that_cannot_start_is_logged(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    gone = Outcome("ex", tmp_path / "no-such-folder" / "ex.toml", tmp_path, 1, 0, None)
    assert run_hooks(HooksSection(after="true"), gone, tmp_path / "mirror.log") is None
    assert "hook after: cannot start:" in caplog.text


# --- in `mirror run` ------------------------------------------------------------------------------


def site(tmp_path: Path, hooks_toml: str) -> Path:
    path = tmp_path / "site.toml"
    path.write_text('[site]\nname = "ex"\nstart_urls = ["http://127.0.0.1:9/"]\n'
                    'output_dir = "archive"\n[scope]\nrobots = false\n' + hooks_toml,
                    encoding="utf-8")
    return path


def test_mirror_run_calls_the_hook_and_keeps_its_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The start URL is refused: the run completes with a failed URL (exit 3) and no page
    stored, a failed run (runhealth): `on_failure` runs, told why, fails, and the exit
    code is still the run's."""
    path = site(tmp_path, '[hooks]\non_failure = "env | grep ^MIRROR_ | sort > env.txt; '
                          'exit 9"\nafter = "touch after-ran"\n')
    assert mirror_cli.main(["run", "-q", str(path)]) == 3
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines())
    assert env == {"MIRROR_ARCHIVE": str(tmp_path / "archive"), "MIRROR_EXIT_CODE": "3",
                   "MIRROR_REPORT": str(tmp_path / "archive" / "reports" / "1.json"),
                   "MIRROR_RUN_ID": "1", "MIRROR_SITE": "ex", "MIRROR_SITE_FILE": str(path),
                   "MIRROR_NEW": "0", "MIRROR_CHANGED": "0", "MIRROR_UNCHANGED": "0",
                   "MIRROR_GONE": "0", "MIRROR_PENDING": "0", "MIRROR_FAILED": "1",
                   "MIRROR_FAILURE": "stored no page (connection refused: 127.0.0.1:9)"}
    assert (tmp_path / "archive" / "reports" / "1.json").exists()
    assert not (tmp_path / "after-ran").exists()
    err = capsys.readouterr().err
    assert "hook on_failure: failed with exit 9" in err and "exit code stays 3" in err
    assert "hook on_failure: failed with exit 9" in (
        tmp_path / "archive" / "mirror.log").read_text()


def test_a_run_that_fails_calls_on_failure(tmp_path: Path) -> None:
    """A damaged manifest stops the run (exit 2): on_failure runs with that exit code."""
    path = site(tmp_path, '[hooks]\non_failure = "echo $MIRROR_EXIT_CODE > failed.txt"\n')
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "manifest.sqlite3").write_bytes(b"not a database" * 100)
    assert mirror_cli.main(["run", "-q", str(path)]) == 2
    assert (tmp_path / "failed.txt").read_text() == "2\n"


def test_no_hook_when_no_run_took_place(tmp_path: Path) -> None:
    from mirror.archive.lock import ArchiveLock

    path = site(tmp_path, '[hooks]\nafter = "touch ran"\non_failure = "touch ran"\n')
    with ArchiveLock(tmp_path / "archive"):
        assert mirror_cli.main(["run", "-q", str(path)]) == 75
    assert not (tmp_path / "ran").exists()
