"""mirror's CPU per request against wget --warc-file's, whole process trees, in pairs.

    python bench/cpu.py [--pages 2000] [--pairs 5] [--max-spread 15]
    python bench/cpu.py --instructions [--pages 100] [--pairs 1]

One generated site (bench/sitegen.py, seed 0) served by one server for every run (nginx
when installed, else mirror.demo.sitesrv). The runs alternate: mirror, wget-warc, mirror,
wget-warc, ... Each run is wrapped by bench/treecpu.py, a child subreaper that reaps every
descendant (mirror's parse helpers included, even one left behind), so the CPU is that of
the whole tree. Requests are counted from the server's log (a mark request after each run
splits it). Each pair is printed with the 1-minute load average at its start and end.

The verdict is the median over the pairs of mirror's CPU ms/request divided by wget-warc's
(each pair's own ratio, so a pair measured under a different load compares like with like).
When the pairs' ratios spread (max - min over the median) more than --max-spread percent,
the pairs are printed with "spread too large" and no verdict (exit status 3).

--instructions runs both tools under valgrind --tool=callgrind --trace-children=yes and
sums the instructions of every process (callgrind's totals): a count that does not depend
on the machine's load, for measuring a change to mirror on a loaded machine (mirror runs
about 55x slower under valgrind: use a small site, --pages 100 is the default there). It
counts user space only, so it gives no verdict against wget (mostly system time).
--mirror-tree DIR runs mirror from another checkout (PYTHONPATH=DIR), for git bisect.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from compare import WGET_OK, mark, requests_per_run, settle  # noqa: E402
from run_mirror import (  # noqa: E402
    BenchError,
    Server,
    add_site_arguments,
    choose_server,
    in_work_folder,
    prepare_site,
    start_nginx,
    start_sitesrv,
    stop_server,
    write_site_toml,
)

TOOLS = ("mirror", "wget-warc")
#: the issue's line: mirror's CPU per request at most this multiple of wget-warc's
TARGET = 1.5
SETTINGS = ("crawl-time page text and full-text search index: on (they have no switch);"
            " learn_traps, robots, sitemaps: mirror's defaults")


#: [crawl] lines under valgrind (continuing write_site_toml's [crawl] section): at 50x
#: slower with 4 others like it on 2 cores, 60 s read timeouts gave up on a third of the
#: pages. A helper's 10 s parse budget is not a setting: run one valgrind crawl at a time.
SLOW_CRAWL = "timeout = 3000\nread_timeout = 3000\nconnect_timeout = 600\n"


@dataclass
class Run:
    tool: str
    code: int
    wall: float
    cpu: float  # user + system seconds of the whole tree
    system: float = 0.0  # of which system (kernel) seconds: callgrind does not count these
    instructions: int = 0  # --instructions: summed over every process
    processes: int = 0  # --instructions: callgrind outputs (one per process)
    requests: int = 0  # from the server's log

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.cpu / max(self.requests, 1)

    @property
    def instr_per_request(self) -> float:
        return self.instructions / max(self.requests, 1)


# -- one run --------------------------------------------------------------------------------


def tool_command(tool: str, args: argparse.Namespace, base: str, run_dir: Path) -> list[str]:
    if tool == "mirror":
        toml = write_site_toml(run_dir, base, args.workers, args.workers, args.parse_processes)
        with open(toml, "a", encoding="utf-8") as f:
            if args.instructions:  # valgrind's slowdown on a loaded machine: no timeouts
                f.write(SLOW_CRAWL)
            if args.scope:
                f.write("\n[scope]\n" + "".join(f"{key}\n" for key in args.scope))
        return [sys.executable, "-m", "mirror", "run", str(toml), "--quiet"]
    return [args.wget, "--mirror", "--page-requisites", "--no-verbose", "-P",
            str(run_dir / "out"), f"--warc-file={run_dir / 'wget'}", base + "index.html"]


def valgrind(run_dir: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--trace-children=yes", "-q",
            f"--callgrind-out-file={run_dir}/callgrind.%p"]


def tool_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.mirror_tree:
        env["PYTHONPATH"] = str(args.mirror_tree.resolve())
    return env


def run_tool(tool: str, args: argparse.Namespace, server: Server, run_dir: Path) -> Run:
    run_dir.mkdir(parents=True)
    cmd = tool_command(tool, args, server.base_url, run_dir)
    if args.instructions:
        cmd = valgrind(run_dir) + cmd
    usage_file = run_dir / "treecpu.json"
    wrapped = [sys.executable, str(BENCH / "treecpu.py"), str(usage_file), "--", *cmd]
    with open(run_dir / "output.txt", "wb") as out:
        proc = subprocess.run(wrapped, stdout=out, stderr=subprocess.STDOUT, cwd=run_dir,
                              env=tool_env(args), timeout=args.timeout, check=False)
    usage = json.loads(usage_file.read_text()) if usage_file.is_file() else None
    ok = WGET_OK if tool == "wget-warc" else (0,)
    if usage is None or proc.returncode not in ok:
        lines = (run_dir / "output.txt").read_text(errors="replace").strip().splitlines()[-12:]
        raise BenchError(f"{tool} exited with {proc.returncode}; its output ends:\n  "
                         + "\n  ".join(lines))
    run = Run(tool, proc.returncode, usage["wall"], usage["user"] + usage["system"],
              usage["system"])
    if args.instructions:
        run.instructions, run.processes = callgrind_totals(run_dir)
    return run


def callgrind_totals(run_dir: Path) -> tuple[int, int]:
    """Instructions summed over every callgrind output of a run, and how many there were."""
    total, files = 0, 0
    for path in run_dir.glob("callgrind.*"):
        files += 1
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("totals:", "summary:")):
                total += int(line.split()[1])
                break
    if not files:
        raise BenchError(f"no callgrind output in {run_dir}")
    return total, files


# -- the pairs ------------------------------------------------------------------------------


def run_pairs(args: argparse.Namespace, server: Server, work: Path) -> list[list[Run]]:
    pairs: list[list[Run]] = []
    loads: list[tuple[float, float]] = []
    for n in range(1, args.pairs + 1):
        before = os.getloadavg()[0]
        pair = []
        for tool in args.tools:
            settle()
            pair.append(run_tool(tool, args, server, work / f"{tool}-{n}"))
            mark(server, sum(map(len, pairs)) + len(pair) - 1)
        pairs.append(pair)
        loads.append((before, os.getloadavg()[0]))
        print(f"pair {n}: " + ", ".join(f"{r.tool} {r.cpu:.2f} s CPU {r.wall:.2f} s wall"
                                        for r in pair) + f"; load {before:.2f}", file=sys.stderr)
    args.loads = loads
    return pairs


def count_requests(server: Server, pairs: list[list[Run]]) -> None:
    runs = [run for pair in pairs for run in pair]
    for run, timed in zip(runs, requests_per_run(server.log, len(runs)), strict=True):
        run.requests = len(timed)


def spread(values: list[float]) -> float:
    """(max - min) / median, in percent."""
    return 100 * (max(values) - min(values)) / statistics.median(values)


# -- the report -----------------------------------------------------------------------------


def measure_of(run: Run, instructions: bool) -> float:
    return run.instr_per_request if instructions else run.ms_per_request


def report(args: argparse.Namespace, stats: dict[str, int], server: Server,
           pairs: list[list[Run]]) -> int:
    unit = "instructions/request" if args.instructions else "CPU ms/request"
    print(f"\n{stats['pages']} pages (seed {args.seed}), {server.kind}; mirror workers = per_host"
          f" = {args.workers}, parse_processes = {args.parse_processes}; {SETTINGS};"
          f" [scope] {', '.join(args.scope) or 'defaults'};"
          f" MIRROR_UVLOOP={os.environ.get('MIRROR_UVLOOP', '(unset)')};"
          f" wget --mirror --page-requisites --warc-file; {os.cpu_count()} CPUs;"
          f" whole process trees (bench/treecpu.py)"
          + ("; valgrind callgrind, every process" if args.instructions else "") + "\n")
    names = [t for t in args.tools]
    print("| pair | load 1 min (start -> end) | " + " | ".join(
        f"{t} CPU s (system) | {t} requests | {t} {unit}" for t in names) + " | ratio |")
    print("|--:|--:|" + "--:|" * (3 * len(names) + 1))
    ratios = []
    for n, (pair, (l0, l1)) in enumerate(zip(pairs, args.loads, strict=True), 1):
        cells = []
        for run in pair:
            figure = measure_of(run, args.instructions)
            cells += [f"{run.cpu:.2f} ({run.system:.2f})", str(run.requests),
                      f"{figure:,.0f}" if args.instructions else f"{figure:.2f}"]
        ratio = (measure_of(pair[0], args.instructions) / measure_of(pair[1], args.instructions)
                 if len(pair) == 2 else 0.0)
        ratios.append(ratio)
        print(f"| {n} | {l0:.2f} -> {l1:.2f} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    if args.instructions:
        for pair in pairs:
            for run in pair:
                print(f"  {run.tool}: {run.instructions:,} instructions in {run.processes}"
                      f" processes, {run.cpu:.1f} s CPU under valgrind")
    return verdict(args, pairs, ratios, unit)


def verdict(args: argparse.Namespace, pairs: list[list[Run]], ratios: list[float],
            unit: str) -> int:
    if len(args.tools) != 2:
        return 0
    for i, tool in enumerate(args.tools):
        values = [measure_of(p[i], args.instructions) for p in pairs]
        print(f"  median {tool}: {statistics.median(values):,.2f} {unit}"
              f" (spread {spread(values):.1f}%)")
    if len(ratios) > 1 and spread(ratios) > args.max_spread:
        print(f"spread too large: {spread(ratios):.1f}% > {args.max_spread:g}%"
              " (no verdict: measure again on a quieter machine, or with --instructions)")
        return 3
    ratio = statistics.median(ratios)
    if args.instructions:
        print(f"instructions ratio {ratio:.2f}x; no verdict: callgrind counts user-space"
              " instructions only, and wget's work is mostly the kernel's (system time)")
        return 0
    kind = "CPU"
    result = "PASS" if ratio <= TARGET else "FAIL"
    print(f"verdict: mirror's {kind} per request is {ratio:.2f}x wget-warc's (median of"
          f" {len(ratios)} pairs, spread {spread(ratios) if len(ratios) > 1 else 0:.1f}%);"
          f" target <= {TARGET}x: {result}")
    return 0


def bench(args: argparse.Namespace, work: Path) -> int:
    site = args.site.resolve() if args.site else work / "site"
    stats = prepare_site(site, args.pages, args.seed)
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, 0.0)
    try:
        print(f"{server.kind} serving {site} at {server.base_url}", file=sys.stderr)
        pairs = run_pairs(args, server, work)
    finally:
        stop_server(server)
    count_requests(server, pairs)
    code = report(args, stats, server, pairs)
    if args.json:
        args.json.write_text(json.dumps([[r.__dict__ for r in p] for p in pairs], indent=1))
    return code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_site_arguments(parser)
    parser.set_defaults(pages=None)
    parser.add_argument("--pairs", type=int, help="alternating pairs (5; 1 with --instructions)")
    parser.add_argument("--max-spread", type=float, default=15.0,
                        help="largest spread of the pairs' ratios, percent, for a verdict (15)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind (callgrind) instead")
    parser.add_argument("--tools", default=",".join(TOOLS), help="(mirror,wget-warc)")
    parser.add_argument("--workers", type=int, default=16, help="mirror workers, per_host (16)")
    parser.add_argument("--parse-processes", type=int, default=1, help="(1, mirror's default)")
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--wget", default="wget")
    parser.add_argument("--mirror-tree", type=Path, help="run mirror from this checkout")
    parser.add_argument("--scope", action="append", default=[], metavar="KEY=VALUE",
                        help="a [scope] line for mirror's site.toml, e.g. learn_traps=false")
    parser.add_argument("--json", type=Path, help="also write the runs here")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run (3600)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    args.pages = args.pages or (100 if args.instructions else 2000)
    args.pairs = args.pairs or (1 if args.instructions else 5)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if set(args.tools) - set(TOOLS) or not args.tools:
        parser.error(f"--tools: a subset of {','.join(TOOLS)}")
    if args.instructions and not shutil.which("valgrind"):
        parser.error("--instructions needs valgrind on PATH")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()

    def body(work: Path) -> int:
        code = bench(args, work)
        print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        return code

    return in_work_folder("cpu", args.keep, body)


if __name__ == "__main__":
    sys.exit(main())
