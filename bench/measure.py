"""Run one benchmarked command: wall time, CPU and peak RSS of its process tree, time-bounded.

The command runs in a new session (its own process group). Its rusage comes from os.wait4,
which on Linux covers the process and every descendant it waited for; ru_maxrss is the
largest single process of that tree, not their sum. Optionally the group's summed RSS is
sampled from /proc while it runs, which shows growth over time (bench/bigsite.py).
On a timeout, and always at the end, the whole group is sent SIGKILL by its id.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RSS_SAMPLE_EVERY = 0.25  # seconds between /proc samples when sampling is asked for


class ToolTimeout(Exception):
    """The command did not exit within its time limit; its process group was killed."""


@dataclass
class Measured:
    code: int  # exit code; negative: killed by that signal
    wall: float
    user: float
    system: float
    max_rss_kb: int
    # (seconds since start, summed RSS kB of the process group), when sampling was asked for
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    # each sampled process's own peak (VmHWM, kB); their sum bounds the group's summed RSS
    # at any moment, even between two samples, as if every peak came at once
    peaks_kb: dict[int, int] = field(default_factory=dict)
    # a bound on the group's summed RSS at any moment up to the last sample that counts
    # only processes that lived at the same time: for each sample, the VmHWMs (each bounds
    # its process's RSS until then) of the processes seen in it or in the sample before
    # (one that ended in between), summed; the largest of these
    together_kb: int = 0

    @property
    def peaks_sum_kb(self) -> int:
        return sum(self.peaks_kb.values())

    @property
    def cpu(self) -> float:
        return self.user + self.system


def group_rss_kb(pgid: int, peaks: dict[int, int] | None = None) -> int:
    """Summed VmRSS of the live processes in a process group (0 if none); `peaks` gets the
    VmHWM (own peak so far) of each process seen in this sample."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[2]) != pgid:  # fields after the name: state, ppid, pgrp, ...
                continue
            status = Path(entry.path, "status").read_text()
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
            elif line.startswith("VmHWM:") and peaks is not None:
                peaks[int(entry.name)] = int(line.split()[1])
    return total


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Peaks:
    """Each sampled process's VmHWM, and the bound of Measured.together_kb."""

    def __init__(self) -> None:
        self.by_pid: dict[int, int] = {}
        self.together = 0
        self._before: set[int] = set()

    def add(self, seen: dict[int, int]) -> None:
        for pid, kb in seen.items():
            self.by_pid[pid] = max(self.by_pid.get(pid, 0), kb)
        pids = set(seen) | self._before
        self.together = max(self.together, sum(self.by_pid[p] for p in pids))
        self._before = set(seen)


def _wait_exit(pid: int, timeout: float, sample: bool, started: float,
               peaks: Peaks, kill_when: Callable[[], bool] | None = None
               ) -> list[tuple[float, int]]:
    """Block until pid can be reaped (not reaping it), sampling RSS; ToolTimeout at the limit.
    `kill_when` is asked at every sample: once it says True, the group gets SIGKILL."""
    samples: list[tuple[float, int]] = []
    deadline = started + timeout
    killed = False
    try:
        fd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):  # old kernel or Python: poll instead
        fd = None
    try:
        while True:
            now = time.perf_counter()
            if sample:
                seen: dict[int, int] = {}
                samples.append((now - started, group_rss_kb(pid, seen)))
                peaks.add(seen)
            if kill_when is not None and not killed and kill_when():
                kill_group(pid)
                killed = True
            every = RSS_SAMPLE_EVERY if sample or kill_when else deadline - now
            step = min(deadline - now, every)
            if step <= 0:
                raise ToolTimeout
            if fd is not None:
                if select.select([fd], [], [], step)[0]:
                    return samples
            else:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return samples
                time.sleep(min(step, 0.01))
    finally:
        if fd is not None:
            os.close(fd)


def run_measured(
    cmd: Sequence[str],
    *,
    output: Path,
    timeout: float,
    cwd: Path | None = None,
    sample_rss: bool = False,
    kill_when: Callable[[], bool] | None = None,
    env: dict[str, str] | None = None,
) -> Measured:
    """Run cmd with stdout and stderr to output; ToolTimeout if it outlives timeout seconds.
    kill_when (asked every RSS_SAMPLE_EVERY s): True sends the group SIGKILL (a kill -9)."""
    with open(output, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=cwd, env=env, start_new_session=True,
        )
    try:
        peaks = Peaks()
        samples = _wait_exit(proc.pid, timeout, sample_rss, started, peaks, kill_when)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        kill_group(proc.pid)  # leftovers of the tree (a pool worker, a child left behind)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped above; Popen must not retry
    return Measured(
        proc.returncode, wall, usage.ru_utime, usage.ru_stime, int(usage.ru_maxrss), samples,
        peaks.by_pid, peaks.together,
    )


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a command's output, indented, for an error message."""
    text = path.read_text(errors="replace").strip().splitlines()[-lines:] if path.is_file() else []
    return "\n  ".join(text) or "(no output)"
