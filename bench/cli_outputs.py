"""The command line's outputs and exit codes, written to files to compare two versions of
the code byte for byte (a refactoring must not change them): `mirror --help`, every
command's `--help`, and the commands that read an archive, run on one demo archive, plus
the usage errors of a few bad command lines.

Make the archive once (--work keeps it), run this on each version, then diff the folders:

    python bench/cli_outputs.py --work /tmp/cmp --out /tmp/cmp/before   # on main
    python bench/cli_outputs.py --work /tmp/cmp --out /tmp/cmp/after    # on the branch
    diff -r /tmp/cmp/before /tmp/cmp/after

The code is this checkout's (PYTHONPATH), whatever mirror is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mirror(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "mirror", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def command_names(env: dict[str, str]) -> list[str]:
    """The commands `mirror --help` lists, one a line under COMMAND."""
    _, out, _ = mirror(["--help"], env, ROOT)
    names = re.findall(r"^    ([a-z][a-z-]*) ", out, re.M)
    assert names, out
    return names


def archive_commands(site: Path) -> dict[str, list[str]]:
    s, lib = str(site), str(site.parent)
    return {
        "check": ["check", s], "status": ["status", s], "status-library": ["status", lib],
        "runs": ["runs", s], "diff": ["diff", s], "diff-bad": ["diff", s, "7"],
        "explain": ["explain", s, "http://127.0.0.1:1/a/b?utm_source=x", "--offline"],
        "verify": ["verify", s], "index": ["index", s], "index-search": ["index", s, "--search"],
        "prune-dry": ["prune", s, "--dry-run"], "prune-bad": ["prune", s, "--keep-last", "-1"],
        "search": ["search", "demo", "--library", lib], "search-site": ["search", s, "page"],
        "export-none": ["export", s], "export-at": ["export", s, "--wacz", "x", "--at", "1"],
        "run-join": ["run", s, "--join"], "run-db": ["run", s, "--db", "nope"],
        "schedule-list": ["schedule", "list", s], "remove-none": ["remove", "nosuch",
                                                                  "--library", lib],
        "check-missing": ["check", str(site.parent / "nosuch.toml")],
        "no-command": [], "bad-command": ["nosuch"], "bad-option": ["status", "--nosuch"],
        "worker-no-db": ["worker", "--data", lib], "help-short": ["-h"],
        "help-prefix": ["--he", "status"], "help-after": ["--traceback", "check", "-h"],
        "traceback-check": ["--traceback", "check", s],
    }


#: what changes from one run to the next: durations and ages
MOVING = [(re.compile(r"\b\d+\.\ds\b"), "N.Ns"),
          (re.compile(r"\b\d+ (s|min|h|d) ago\b"), "N ago")]


def steady(text: str) -> str:
    for pattern, replacement in MOVING:
        text = pattern.sub(replacement, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True,
                        help="folder of the demo archive (made once, then reused)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the outputs")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "NO_COLOR": "1",
           "MIRROR_LIBRARY": str(args.work / "demo"), "HOME": str(args.work)}
    env.pop("MIRROR_DB", None)
    site = args.work / "demo" / "demo.toml"
    if not site.exists():
        code, out, err = mirror(["demo", str(site.parent), "-q"], env, ROOT)
        assert code == 0, out + err
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"help": ["--help"]}
    runs |= {f"help-{name}": [name, "--help"] for name in command_names(env)}
    runs |= archive_commands(site)
    for name, cmd in runs.items():
        code, out, err = mirror(cmd, env, args.work)
        text = f"$ mirror {' '.join(cmd)}\nexit {code}\n--- stdout\n{out}--- stderr\n{err}"
        (args.out / f"{name}.txt").write_text(steady(text.replace(str(args.work), "WORK")))
    print(f"{len(runs)} outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
