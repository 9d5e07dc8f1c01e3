"""CPU of a whole process tree: run a command as a child subreaper, reap every descendant.

    python bench/treecpu.py OUT.json -- CMD [ARG...]

The wrapper marks itself a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER), so a
descendant whose parent exits before it (a helper left behind, a daemonised child) is
re-parented to the wrapper instead of to init. It runs CMD, waits for CMD, then reaps
every remaining descendant (each gets GRACE seconds, then SIGKILL by its pid), and writes
getrusage(RUSAGE_CHILDREN) to OUT.json: user and system seconds of every process of the
tree, whoever waited for it; the wrapper's own start-up is not in it. Exits with CMD's
exit status.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
#: seconds the descendants left after CMD exits get before SIGKILL
GRACE = 10.0


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_all(deadline: float) -> int:
    """Reap children until none is left; past the deadline, SIGKILL each one still there
    (by pid, read from /proc). Returns how many were reaped."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
            continue
        if time.monotonic() > deadline:
            for child in children(os.getpid()):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    try:
        text = open(f"/proc/{pid}/task/{pid}/children", encoding="ascii").read()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    out, cmd = argv[0], argv[2:]
    become_subreaper()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd)
    code = proc.wait()
    wall = time.perf_counter() - started
    left = reap_all(time.monotonic() + GRACE)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"code": code, "wall": wall, "user": usage.ru_utime,
                   "system": usage.ru_stime, "max_rss_kb": usage.ru_maxrss,
                   "orphans_reaped": left}, f)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
