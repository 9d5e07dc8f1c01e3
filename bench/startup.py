"""Start-up time of the quick commands: `mirror check`, `status` and `runs` (issue 17: under
150 ms each), against the floor (`python -c pass`) and `import mirror.cli`.

Makes a small archive with `mirror demo` (once, in --work), runs hyperfine over the five
commands and prints each one's mean ± σ and median in ms, then the slowest imports of
`mirror status` by cumulative time (`python -X importtime`).

With --bytecode, mirror's own modules load from cached .pyc files, as after a pip install
(a PYTHONPYCACHEPREFIX in --work, filled by the warm-up runs); without it they run as the
environment says (with PYTHONDONTWRITEBYTECODE=1 they are compiled at every start).

Usage: python bench/startup.py [--work DIR] [--bytecode] [--imports 15]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
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
        "import mirror.cli": [python, "-c", "import mirror.cli"],
        **{f"mirror {c}": [*mirror, c, str(site)] for c in ("check", "status", "runs")},
    }


def hyperfine(cmds: dict[str, list[str]], env: dict[str, str], work: Path) -> list[dict]:
    out = work / "hyperfine.json"
    argv = ["hyperfine", "--warmup", "3", "-N", "--style", "none", "--export-json", str(out)]
    for name, cmd in cmds.items():
        argv += ["-n", name, shlex.join(cmd)]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    results: list[dict] = json.loads(out.read_text())["results"]
    return results


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
    parser.add_argument("--imports", type=int, default=15, metavar="N",
                        help="slowest imports of `mirror status` to print (0: none)")
    args = parser.parse_args(argv)
    if shutil.which("hyperfine") is None:
        parser.error("needs hyperfine on PATH")
    work = args.work or Path(tempfile.mkdtemp(prefix="mirror-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        site = make_archive(work, env)
        cmds = commands(site)
        print(f"{'command':<20} {'mean ± σ (ms)':>16} {'median (ms)':>12}")
        for r in hyperfine(cmds, env, work):
            spread = f"{r['mean'] * 1e3:.1f} ± {r['stddev'] * 1e3:.1f}"
            print(f"{r['command']:<20} {spread:>16} {r['median'] * 1e3:>12.1f}")
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
