"""A site run as a child process of the worker: in a process group of its own (so that a
stop reaches the helpers it starts too), killed by the kernel if the worker dies (Linux
PR_SET_PDEATHSIG), so that no run outlives the worker that the fleet believes owns it."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mirror.schedule.timers import scheduled_argv

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def run_argv(site_file: Path, python: str = sys.executable) -> list[str]:
    """What a job runs: this Python's mirror, as a timer would (quiet, scheduled)."""
    return scheduled_argv(site_file, python)


def _die_with(parent: int) -> Callable[[], None] | None:
    """A preexec function for the child: SIGKILL when the worker dies, whatever kills it.
    SIGKILL, not SIGTERM: a run that stopped gracefully would upload what it closed, while
    the fleet may already have handed the site to another worker."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the worker died before prctl took effect
            os._exit(1)
    return preexec


async def start(argv: Sequence[str], *, cwd: Path, log_file: Path) -> asyncio.subprocess.Process:
    """Start the run; its stdout and stderr go to `log_file`."""
    with open(log_file, "wb") as out:
        return await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=out,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with(os.getpid()))  # noqa: PLW1509 - only prctl and getppid


def kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the run's process group at once (it has lost its job, or it has ended and
    nothing it started may outlive it). Safe after the run was reaped: its group id is not
    reused while a member lives, and an empty group is ESRCH."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def stop(proc: asyncio.subprocess.Process, grace: float) -> int:
    """SIGTERM the run's process group (as Ctrl-C: in-flight fetches finish, files close,
    exit 130), SIGKILL it after `grace` seconds; its exit code."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
        except TimeoutError:
            log.warning("the run (pid %d) did not stop within %.0f s: killed", proc.pid, grace)
            kill(proc)
    return await proc.wait()


def tail(log_file: Path, lines: int = 12, limit: int = 4000) -> str:
    """The last lines the run printed, for the fleet's record of it."""
    try:
        with open(log_file, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - limit, 0))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
