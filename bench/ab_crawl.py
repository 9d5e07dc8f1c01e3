"""Crawl CPU of two or more builds of mirror, A/B: the same generated site crawled by each
`mirror` command in turn, round after round (interleaved, so a change in the machine's load
falls on every build alike), then the median of each build's CPU (user + sys, every process
of the run), CPU ms per request and wall time, its difference to the first build, and the
load average at the start and end.

Each build is a `mirror` command, e.g. from a venv with a commit installed:
    git archive COMMIT | tar -x -C /tmp/src && python3 -m venv /tmp/v
    /tmp/v/bin/pip install /tmp/src

Usage: python bench/ab_crawl.py --pages 2000 --rounds 5 NAME=/tmp/a/bin/mirror NAME=...
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_mirror import Usage, in_work_folder, prepare_site  # noqa: E402
from text_cost import crawl_once  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench(args: argparse.Namespace, work: Path) -> int:
    site = args.site.resolve() if args.site else work / "site"
    stats = prepare_site(site, args.pages, args.seed, args.page_kb)
    builds = dict(b.split("=", 1) for b in args.builds)
    runs: dict[str, list[tuple[Usage, int]]] = {name: [] for name in builds}
    print(f"site: {args.pages} pages of ~{args.page_kb} KB, {stats['expected_fetches']} "
          f"expected fetches; load average at start {load()}")
    for i in range(args.rounds):
        for name, mirror in builds.items():
            folder = work / name
            folder.mkdir(exist_ok=True)
            usage, requests, _ = crawl_once(args, site, folder, Path(mirror))
            runs[name].append((usage, requests))
            print(f"  round {i + 1} {name}: CPU {usage.user + usage.system:.2f} s, wall "
                  f"{usage.wall:.2f} s, {requests} requests, load {load()}", flush=True)
    first = None
    for name, got in runs.items():
        cpu = statistics.median(u.user + u.system for u, _ in got)
        per = statistics.median((u.user + u.system) * 1000 / max(n, 1) for u, n in got)
        wall = statistics.median(u.wall for u, _ in got)
        first = first or cpu
        print(f"{name:<12} CPU {cpu:7.2f} s ({(cpu / first - 1) * 100:+5.1f}%)  "
              f"{per:6.3f} ms/request  wall {wall:6.2f} s  (median of {len(got)})")
    print(f"load average at end {load()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="NAME=path/to/mirror, the first the base")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--page-kb", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    return in_work_folder("ab_crawl", args.keep, lambda work: bench(args, work))


if __name__ == "__main__":
    sys.exit(main())
