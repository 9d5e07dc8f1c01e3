"""[hooks]: a shell command run after a run, told about it through the environment, bounded
in time, its output appended to the run's log. A hook that fails or hangs is logged; it
never changes the run's exit code."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mirror.config import HooksSection
from mirror.model import SNAPSHOT_CODES

log = logging.getLogger(__name__)

#: seconds a hook has to end after SIGTERM (at its timeout) before SIGKILL
KILL_GRACE = 5.0


@dataclass(frozen=True)
class Outcome:
    """What a hook is told of the run that just ended."""

    site: str
    site_file: Path
    archive: Path
    run_id: int | None  # None: the run failed before the manifest had one
    exit_code: int
    report: Path | None  # None: no report was written
    #: new, changed, unchanged, gone, pending, failed: the report's counts (none: no report)
    counts: Mapping[str, int] = field(default_factory=dict)
    failure: str = ""  # the report says the run failed (run.health): what and why

    @classmethod
    def of(cls, site: str, site_file: Path, archive: Path, run_id: int | None,
           exit_code: int, report: Path | None) -> Outcome:
        """The outcome, with the counts and the verdict of its report when it has one."""
        counts, failure = report_facts(report) if report else ({}, "")
        return cls(site, site_file, archive, run_id, exit_code, report, counts, failure)


#: the counts a hook is told, as MIRROR_<NAME> (the report's changes.counts)
COUNTS = ("new", "changed", "unchanged", "gone", "pending", "failed")


def report_facts(report: Path) -> tuple[dict[str, int], str]:
    """(change counts, failure text) from a run's JSON report; ({}, "") if unreadable."""
    try:
        data = json.loads(report.read_bytes())
    except (OSError, ValueError):
        return {}, ""
    changes = data.get("changes") if isinstance(data, dict) else None
    counts = changes.get("counts") if isinstance(changes, dict) else None
    verdict = data.get("health") if isinstance(data, dict) else None
    failure = verdict.get("text") if isinstance(verdict, dict) else None
    return ({k: v for k, v in counts.items() if k in COUNTS and isinstance(v, int)}
            if isinstance(counts, dict) else {},
            failure if isinstance(failure, str) else "")


def choose(hooks: HooksSection, exit_code: int, failed: bool = False) -> tuple[str, str] | None:
    """(name, command) of the hook that follows a run ending with exit_code, or None. A run
    whose report says it failed (it stored no page, ...) calls for on_failure, whatever
    its exit code."""
    name, command = (("after", hooks.after) if exit_code in SNAPSHOT_CODES and not failed
                     else ("on_failure", hooks.on_failure))
    return (name, command) if command.strip() else None


def environment(outcome: Outcome, base: Mapping[str, str]) -> dict[str, str]:
    """`base` (the process's environment) with the run's facts as MIRROR_* variables."""
    return {**base,
            "MIRROR_SITE": outcome.site,
            "MIRROR_SITE_FILE": str(outcome.site_file),
            "MIRROR_ARCHIVE": str(outcome.archive),
            "MIRROR_RUN_ID": "" if outcome.run_id is None else str(outcome.run_id),
            "MIRROR_EXIT_CODE": str(outcome.exit_code),
            "MIRROR_REPORT": "" if outcome.report is None else str(outcome.report),
            **{f"MIRROR_{k.upper()}": str(outcome.counts.get(k, "")) for k in COUNTS},
            "MIRROR_FAILURE": outcome.failure}


def run_hooks(hooks: HooksSection, outcome: Outcome, log_file: Path) -> int | None:
    """Run the hook that follows this outcome, if any, through /bin/sh in the site file's
    folder; returns its exit status (None: none ran, it could not start, or it timed out)."""
    chosen = choose(hooks, outcome.exit_code, bool(outcome.failure))
    if chosen is None:
        return None
    name, command = chosen
    env = environment(outcome, os.environ)
    log.info("hook %s: running %r (run %s, exit %d)", name, command,
             outcome.run_id, outcome.exit_code)
    started = time.monotonic()
    try:
        status = _run(command, env, outcome.site_file.parent, log_file, hooks.timeout)
    except OSError as exc:
        log.warning("hook %s: cannot start: %s", name, exc)
        return None
    took = time.monotonic() - started
    if status is None:
        log.warning("hook %s: stopped after %gs (its timeout); the run's exit code stays %d",
                    name, hooks.timeout, outcome.exit_code)
    elif status != 0:
        log.warning("hook %s: failed with exit %d after %.1fs (its output is in %s); the "
                    "run's exit code stays %d", name, status, took, log_file, outcome.exit_code)
    else:
        log.info("hook %s: done in %.1fs", name, took)
    return status


def _run(command: str, env: dict[str, str], cwd: Path, log_file: Path,
         timeout: float) -> int | None:
    """The hook's exit status, or None when it outlived its timeout: then its whole process
    group (what it started too) gets SIGTERM, and SIGKILL at most KILL_GRACE seconds later."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc, signal.SIGKILL)  # what ignored SIGTERM, or outlived the shell
            proc.wait()
            return None


def _kill_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group's id is the shell's pid
    except ProcessLookupError:
        pass
