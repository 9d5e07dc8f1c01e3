"""The crash-point sweep, timed: every step x kind of capture, every time it is reached.

tests/test_crashpoints.py restarts the archive from every crash state of a first, an
incremental and a resumed run (or of the first N occurrences of each (step, kind) with
--occurrences N); this runs it and prints how many crash states were restarted, per step,
and how long the sweep took.

Usage: python bench/crashpoints.py [--occurrences N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--occurrences", type=int, default=1_000_000,
                   help="crash states per (step, kind) and run (default: all)")
    args = p.parse_args(argv)
    env = {**os.environ, "MIRROR_CRASH_OCCURRENCES": str(args.occurrences)}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "tests/test_crashpoints.py", "-k", "every_crash_point"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    lines = [line for line in proc.stdout.splitlines() if "crash states restarted" in line]
    print(*(lines or [proc.stdout[-3000:]]), sep="\n")
    print(f"{'passed' if proc.returncode == 0 else 'FAILED'} in {elapsed:.1f}s")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
