"""Start-up time of the quick commands: `mirror --version`, `check`, `status` and `runs`
(issue 31: under 100 ms each on a quiet machine), beside the floor (`python -c pass`) and
`import mirror.cli.main`.

Makes a small archive with `mirror demo` (once, in --work), runs each command --runs times
(after two warm-up runs; the commands interleaved, so that a burst of load hits all of
them) and prints each one's median and spread in ms, with the load average before and
after (the machine is quiet when it is well under the number of cores), then the slowest
imports of `mirror status` by cumulative time (`python -X importtime`).

With --bytecode, mirror's own modules load from cached .pyc files, as after a pip install
(a PYTHONPYCACHEPREFIX in --work, filled by the warm-up runs); without it they run as the
environment says (with PYTHONDONTWRITEBYTECODE=1 they are compiled at every start).

Usage: python bench/startup.py [--work DIR] [--bytecode] [--runs 10] [--imports 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mirror_argv() -> list[str]:
    """The `mirror` console script next to this Python, else `python -m mirror`."""
    script = Path(sys.executable).parent / "mirror"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mirror"]


def make_archive(work: Path, env: dict[str, str]) -> Path:
    site = work / "demo" / "demo.toml"
    if not site.exists():
        subprocess.run([*mirror_argv(), "demo", str(site.parent), "-q"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    return site


def commands(site: Path) -> dict[str, list[str]]:
    python, mirror = sys.executable, mirror_argv()
    return {
        "python -c pass": [python, "-c", "pass"],
        "import mirror.cli.main": [python, "-c", "import mirror.cli.main"],
        "mirror --version": [*mirror, "--version"],
        **{f"mirror {c}": [*mirror, c, str(site)] for c in ("check", "status", "runs")},
    }


def timed(cmds: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """Wall seconds of each command's `runs` runs (two warm-ups first), checked to exit 0."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for turn in range(runs + 2):
        for name, cmd in cmds.items():
            start = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            if turn >= 2:
                times[name].append(time.perf_counter() - start)
    return times


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def slowest_imports(site: Path, env: dict[str, str], top: int) -> list[tuple[int, str]]:
    """(cumulative µs, module) of the `top` slowest imports of one `mirror status`."""
    argv = [sys.executable, "-X", "importtime", "-m", "mirror", "status", str(site)]
    err = subprocess.run(argv, env=env, capture_output=True, text=True).stderr
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and not line.endswith("imported package"):
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="folder for the demo archive (kept)")
    parser.add_argument("--bytecode", action="store_true",
                        help="load mirror's modules from cached .pyc files")
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command")
    parser.add_argument("--imports", type=int, default=15, metavar="N",
                        help="slowest imports of `mirror status` to print (0: none)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="mirror-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        site = make_archive(work, env)
        print(f"load average before: {load()} ({os.cpu_count()} cores)")
        times = timed(commands(site), env, args.runs)
        print(f"load average after:  {load()}\n")
        print(f"{'command':<20} {'median (ms)':>12} {'min-max (ms)':>16}")
        for name, runs in times.items():
            spread = f"{min(runs) * 1e3:.1f}-{max(runs) * 1e3:.1f}"
            print(f"{name:<20} {statistics.median(runs) * 1e3:>12.1f} {spread:>16}")
        if args.imports:
            print("\nslowest imports of `mirror status` (cumulative µs, -X importtime):")
            for cumulative, name in slowest_imports(site, env, args.imports):
                print(f"{cumulative:>8} {name}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
