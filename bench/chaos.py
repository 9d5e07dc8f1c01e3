"""Kill `mirror run` with SIGKILL at random moments of runs 1, 2 and 3; check every run.

Serves a generated site on 127.0.0.1 and archives it --runs times (default 3): run 1 is a
full crawl, the next ones are incremental (conditional requests, revisit records), with
--changed (5%) of the pages rewritten before each (bench/sitegen.py change_pages). Before
each run, an uncrashed control archive makes the same run: it measures how long the run
takes (start-up, crawl, index and report) and which URLs it stores. Then the chaos archive's
run is killed --kills times, at moments drawn uniformly over that duration (less the time
a new process takes to import mirror: a kill before that touches nothing) and taken in
order: a restarted `mirror run` starts up again and goes on from where its manifest is, so
it is killed after the next moment less the crawl time its committed URLs stand for. Kills
thus fall in start-up and recovery, all through the crawl, and while the run writes its
index and report, however many there are. Then the run goes on to its end (a run that ends
before its kill is simply over: another `mirror run` would start the next run). After each
run, these hold (REQUIREMENTS.md C1), else the run fails:

- `mirror run` exits 0 and the manifest marks the run complete;
- each URL of the run is stored exactly once: one response or revisit record per URL in the
  run's WARC files (a file's warcinfo says `isPartOf: chaos/run-N`), for the same URLs as
  the manifest committed in the run and as the control run stored;
- the server got no request, after a kill, for a URL the manifest had committed in that run
  before the kill;
and at the end `warcio check` and `mirror verify` pass on the whole archive.

Usage: python bench/chaos.py --kills 50 --pages 2000 --seed 7   (--kills is per run)
A failing run prints its seed. The same seed replays the same page changes and the same
kill moments, as shares of each run's duration measured on this machine: a replay kills at
the same points of each run, give or take scheduling.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from sitegen import change_pages, generate  # noqa: E402

from mirror.demo.sitesrv import REQUEST_LOG, RequestLog, start_site_server  # noqa: E402

SITE = "chaos"
RUN_TIMEOUT = 300.0  # s: the longest a run may take once it is no longer killed
CHECK_TIMEOUT = 300.0  # s: for `warcio check` and `mirror verify`
LISTED = 5  # URLs named per kind of failure


@dataclass
class RunReport:
    """One run of the chaos archive: what was done to it and what the checks found."""

    run: int
    changed: int = 0  # pages rewritten before the run
    duration: float = 0.0  # seconds the uncrashed control run took
    delays: list[float] = field(default_factory=list)  # kill delays drawn, in order
    kills: int = 0
    phases: Counter[str] = field(default_factory=Counter)  # kills by where they fell
    restarts: int = 0
    exit_code: int | None = None
    killed_finished: bool = False  # a kill fell after the run was marked finished
    urls: int = 0  # URLs stored in the run
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # found, but not C1 failures

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.failures

    def line(self, seed: int) -> str:
        where = ", ".join(f"{n} in {phase}" for phase, n in sorted(self.phases.items()))
        spread = f"{min(self.delays):.2f}-{max(self.delays):.2f} s" if self.delays else "-"
        return (f"run {self.run}: {self.changed} pages changed, {self.kills} kills "
                f"({where or 'none'}), {self.restarts} restarts, kill delays {spread} "
                f"({self.duration:.1f} s uncrashed), {self.urls} URLs stored, "
                f"exit {self.exit_code} -> " + ("OK" if self.ok else f"FAIL (seed {seed})"))


@dataclass
class ChaosReport:
    """What the experiment found: per run, and over the whole archive at the end."""

    seed: int
    planned: int  # runs
    kills_per_run: int
    runs: list[RunReport] = field(default_factory=list)
    check_failures: list[str] = field(default_factory=list)  # warcio check, mirror verify
    seconds: float = 0.0

    @property
    def kills(self) -> int:
        return sum(r.kills for r in self.runs)

    @property
    def restarts(self) -> int:
        return sum(r.restarts for r in self.runs)

    @property
    def ok(self) -> bool:
        return (len(self.runs) == self.planned and all(r.ok for r in self.runs)
                and not self.check_failures)

    def failures(self) -> list[str]:
        found = [f"run {r.run}: {f}" for r in self.runs for f in r.failures]
        return found + self.check_failures

    def notes(self) -> list[str]:
        return [f"run {r.run}: note: {n}" for r in self.runs for n in r.notes]

    def summary(self) -> str:
        total = (f"seed {self.seed}: {len(self.runs)} of {self.planned} runs, "
                 f"{self.kills_per_run} kills per run planned, {self.kills} kills, "
                 f"{self.restarts} restarts, {sum(r.urls for r in self.runs)} URLs stored, "
                 f"{len(self.failures())} failures in {self.seconds:.0f} s -> "
                 + ("OK" if self.ok else "FAIL"))
        return "\n".join([r.line(self.seed) for r in self.runs] + [total])


@dataclass
class Control:
    """The same run in an archive nobody kills: its timing and the URLs it stored."""

    duration: float  # s, from process start to exit
    crawl: float  # s, from the first request to the last
    urls: set[str]
    exit_code: int

    def crawled(self, committed: int) -> float:
        """Seconds of the uncrashed crawl that `committed` URLs stand for."""
        return self.crawl * min(1.0, committed / len(self.urls)) if self.urls else 0.0


@dataclass
class Bench:
    """The site, its server's request log and the two archives."""

    work: Path
    log: RequestLog
    origin: str
    env: dict[str, str]
    ready: float = 0.0  # s a new process takes to import mirror: earlier kills touch nothing
    scanned: dict[str, tuple[int | None, Counter[str]]] = field(default_factory=dict)

    def toml(self, name: str) -> Path:
        return self.work / f"{name}.toml"

    def archive(self, name: str) -> Path:
        return self.work / name

    def command(self, name: str) -> list[str]:
        return [sys.executable, "-m", "mirror", "run", str(self.toml(name)), "--quiet"]


# -- the manifest and the WARC files -----------------------------------------------------

def query(archive: Path, sql: str, *args: object) -> list[tuple]:
    """Rows from the manifest, read-only; none before `mirror run` has created it."""
    path = archive / "manifest.sqlite3"
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # killed before the schema was created
            return []
        raise
    finally:
        db.close()


def committed_urls(archive: Path, run: int) -> set[str]:
    """URLs the manifest has committed in this run (not those committed by earlier runs)."""
    rows = query(archive, "SELECT url FROM urls WHERE state IN ('done', 'failed') "
                          "AND run_id = ?", run)
    return {u for (u,) in rows}


def run_state(archive: Path, run: int) -> tuple[str, int | None] | None:
    rows = query(archive, "SELECT state, exit_code FROM runs WHERE id = ?", run)
    return rows[0] if rows else None


def last_run(archive: Path) -> int | None:
    rows = query(archive, "SELECT max(id) FROM runs")
    return rows[0][0] if rows else None


def part_of(warcinfo: str) -> int | None:
    """The run number in a warcinfo block's `isPartOf: <name>/run-<N>`."""
    match = re.search(rf"^isPartOf: {SITE}/run-(\d+)\s*$", warcinfo, re.MULTILINE)
    return int(match.group(1)) if match else None


def scan_warc(path: Path) -> tuple[int | None, Counter[str]]:
    """The file's run, and how many response and revisit records it holds per URL."""
    run, counts = None, Counter[str]()
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f):
            if rec.rec_type == "warcinfo" and run is None:
                run = part_of(rec.content_stream().read().decode("utf-8", "replace"))
            elif rec.rec_type in ("response", "revisit"):
                counts[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    return run, counts


def stored_in_run(bench: Bench, run: int) -> tuple[Counter[str], list[str]]:
    """Records per URL in the run's WARC files, and the problems with the files."""
    counts, problems = Counter[str](), []
    warc_dir = bench.archive(SITE) / "warc"
    for path in sorted(warc_dir.glob("*.open")):
        problems.append(f"{path.name} left open after the run")
    for path in sorted(warc_dir.glob("*.warc.gz")):
        if path.name not in bench.scanned:  # closed files never change: scan each once
            bench.scanned[path.name] = scan_warc(path)
        file_run, file_counts = bench.scanned[path.name]
        if file_run is None:
            problems.append(f"{path.name}: no warcinfo `isPartOf: {SITE}/run-N`")
        elif file_run == run:
            counts.update(file_counts)
    return counts, problems


# -- running mirror ------------------------------------------------------------------------

async def attempt(bench: Bench, name: str, limit: float, err_path: Path) -> int | None:
    """Run `mirror run` on archive `name`; SIGKILL it after `limit` seconds. Its exit code,
    or None when it was killed."""
    with open(err_path, "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            *bench.command(name), cwd=bench.work, env=bench.env,
            stdout=asyncio.subprocess.DEVNULL, stderr=err)
        try:
            return await asyncio.wait_for(proc.wait(), limit)
        except TimeoutError:
            try:
                proc.kill()
            except ProcessLookupError:  # it ended just now
                pass
            code = await proc.wait()
    return None if code == -signal.SIGKILL else code  # else it ended before the kill


async def control_run(bench: Bench, run: int) -> Control:
    """Run the control archive's run `run` to its end, uncrashed, and time it."""
    mark, started = len(bench.log), time.monotonic()
    code = await attempt(bench, "control", RUN_TIMEOUT, bench.work / "control.stderr")
    duration = time.monotonic() - started
    times = [t for t, _, _ in bench.log[mark:]]
    crawl = times[-1] - times[0] if times else 0.0
    urls = committed_urls(bench.archive("control"), run)
    return Control(duration, crawl, urls, -1 if code is None else code)


async def import_time(bench: Bench) -> float:
    """Seconds a new process takes to import mirror, before it touches the archive."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import mirror.cli.main",
                                                env=bench.env)
    await asyncio.wait_for(proc.wait(), 60)
    return time.monotonic() - started


def kill_moments(seed: int, run: int, kills: int, start: float, end: float) -> list[float]:
    """When, in seconds into the uncrashed run, each kill falls: uniform over [start, end],
    in order. A random stream of its own per run, so that a run's kills replay whatever
    happened in the runs before it."""
    rng = random.Random(f"{seed}/run-{run}/kills")
    return sorted(start + rng.random() * (end - start) for _ in range(kills))


async def chaos_run(bench: Bench, run: int, control: Control, moments: list[float],
                    report: RunReport) -> list[tuple[int, set[str]]]:
    """Kill the chaos archive's run at each moment, then run it to its end. Returns, per
    kill, the request log's length and the URLs the manifest had committed in the run.

    A restarted run starts up again, then goes on from where its manifest is: to reach a
    moment it needs that moment less the crawl time its committed URLs stand for."""
    archive, err_path = bench.archive(SITE), bench.work / f"run-{run}.stderr"
    committed = committed_urls(archive, run)
    snapshots: list[tuple[int, set[str]]] = []
    for moment in moments:
        delay = max(bench.ready, moment - control.crawled(len(committed)))
        report.delays.append(delay)
        mark = len(bench.log)
        report.exit_code = await attempt(bench, SITE, delay, err_path)
        if report.exit_code is not None:
            return snapshots  # it ended before this kill: the run is over
        report.kills += 1
        committed = committed_urls(archive, run)
        report.phases[phase(len(bench.log) - mark, len(committed), len(control.urls))] += 1
        snapshots.append((len(bench.log), committed))
        state = run_state(archive, run)
        if state is not None and state[0] not in ("running", "interrupted"):
            report.exit_code = state[1]  # killed after the run was marked finished: over
            report.killed_finished = True
            return snapshots
        report.restarts += 1
    report.exit_code = await attempt(bench, SITE, RUN_TIMEOUT, err_path)
    if report.exit_code is None:
        report.failures.append(f"did not end within {RUN_TIMEOUT:.0f} s")
    return snapshots


def phase(requests: int, committed: int, urls: int) -> str:
    """Where a kill fell: before the killed process sent a request, in the crawl, or once
    every URL of the run was committed (index, report, the run marked finished)."""
    if requests == 0:
        return "start-up"
    return "end" if committed >= urls else "crawl"


# -- the checks ----------------------------------------------------------------------------

def listed(what: str, urls: set[str] | list[str]) -> list[str]:
    """One failure naming the first few URLs, or none."""
    if not urls:
        return []
    first = sorted(urls)[:LISTED]
    more = f" and {len(urls) - LISTED} more" if len(urls) > LISTED else ""
    return [f"{len(urls)} URLs {what}: " + ", ".join(first) + more]


def refetched(bench: Bench, snapshots: list[tuple[int, set[str]]], end: int) -> list[str]:
    """Requests, after a kill and before the run's end, for URLs committed before the kill."""
    found = []
    for kill, (mark, committed) in enumerate(snapshots, 1):
        urls = {bench.origin + p for _, _, p in bench.log[mark:end]} & committed
        found += listed(f"fetched again after kill {kill}, committed in the run before it",
                        urls)
    return found


def check_run(bench: Bench, report: RunReport, control: Control,
              snapshots: list[tuple[int, set[str]]], end: int) -> None:
    run, archive = report.run, bench.archive(SITE)
    if report.exit_code != 0:
        tail = (bench.work / f"run-{run}.stderr").read_text(errors="replace")[-2000:]
        report.failures.append(f"exit {report.exit_code}: {tail.strip()}")
        return
    state = run_state(archive, run)
    if last_run(archive) != run or state is None or state[0] != "complete":
        report.failures.append(f"the manifest's last run is {last_run(archive)}, "
                               f"run {run} is {state}")
    committed = committed_urls(archive, run)
    counts, problems = stored_in_run(bench, run)
    report.urls = len(counts)
    report.failures += problems
    report.failures += listed("stored more than once in the run",
                              [f"{u} ({n}x)" for u, n in counts.items() if n > 1])
    report.failures += listed("committed, with no record in the run's WARC files",
                              committed - counts.keys())
    report.failures += listed("in the run's WARC files, not committed", counts.keys() - committed)
    report.failures += listed("stored by the uncrashed run, not by this one",
                              control.urls - counts.keys())
    report.failures += listed("stored by this run, not by the uncrashed one",
                              counts.keys() - control.urls)
    report.failures += refetched(bench, snapshots, end)
    check_reports(archive, report)


def check_reports(archive: Path, report: RunReport) -> None:
    """Every run has its report; one a kill cut off is written by the next `mirror run`."""
    for run in range(1, report.run + 1):
        if (archive / "reports" / f"{run}.json").exists():
            continue
        if run == report.run and report.killed_finished:
            report.notes.append(f"no reports/{run}.json yet: killed after the run was marked "
                                "finished (the next `mirror run` writes it)")
        else:
            report.failures.append(f"no reports/{run}.json")


def shortened(output: str, lines: int = 16) -> str:
    """A tool's output, its first lines and its last (the verdict) when it is long."""
    found = output.strip().splitlines()
    if len(found) > lines:
        found = found[:lines - 2] + [f"... {len(found) - lines + 1} lines more ...", found[-1]]
    return "\n".join(found)


def check_files(bench: Bench, name: str) -> list[str]:
    """`warcio check` and `mirror verify` on the whole archive."""
    failures = []
    files = [str(p) for p in sorted((bench.archive(name) / "warc").glob("*.warc.gz"))]
    proc = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *files],
                          capture_output=True, text=True, timeout=CHECK_TIMEOUT)
    if proc.returncode:
        failures.append("warcio check: " + shortened(proc.stdout + proc.stderr))
    proc = subprocess.run([sys.executable, "-m", "mirror", "verify", str(bench.toml(name))],
                          cwd=bench.work, env=bench.env, capture_output=True, text=True,
                          timeout=CHECK_TIMEOUT)
    if proc.returncode:
        failures.append(f"mirror verify (exit {proc.returncode}): "
                        + shortened(proc.stdout + proc.stderr))
    return failures


# -- the experiment ------------------------------------------------------------------------

def write_toml(path: Path, base: str, output_dir: str) -> None:
    path.write_text(f'[site]\nname = "{SITE}"\nstart_urls = ["{base}index.html"]\n'
                    f'output_dir = "{output_dir}"\n[crawl]\nworkers = 16\nper_host = 16\n')


async def one_run(bench: Bench, run: int, *, kills: int, changed: float,
                  seed: int) -> RunReport:
    report = RunReport(run)
    if run > 1:
        report.changed = len(change_pages(bench.work / "site", changed, f"{seed}/run-{run}",
                                          f"Revised for run {run}"))
    control = await control_run(bench, run)
    report.duration = control.duration
    if control.exit_code != 0:
        report.failures.append(f"the uncrashed control run exited {control.exit_code}")
    moments = kill_moments(seed, run, kills, bench.ready, control.duration)
    snapshots = await chaos_run(bench, run, control, moments, report)
    check_run(bench, report, control, snapshots, len(bench.log))
    return report


async def run_chaos(work: Path, *, kills: int, pages: int, seed: int, runs: int = 3,
                    changed: float = 0.05) -> ChaosReport:
    """The whole experiment in `work`; returns what it found (never raises on a finding).
    `kills` is per run; the runs stop at the first that fails."""
    started = time.monotonic()
    report = ChaosReport(seed, runs, kills)
    site = work / "site"
    if not site.exists():
        generate(site, pages, seed=0)
    runner, base = await start_site_server(site)
    bench = Bench(work, runner.app[REQUEST_LOG], base.rstrip("/"),
                  {**os.environ, "PYTHONPATH": str(ROOT)})
    bench.ready = await import_time(bench)
    write_toml(bench.toml(SITE), base, SITE)
    write_toml(bench.toml("control"), base, "control")
    try:
        for run in range(1, runs + 1):
            report.runs.append(await one_run(bench, run, kills=kills, changed=changed,
                                             seed=seed))
            if not report.runs[-1].ok:
                break
    finally:
        await runner.cleanup()
    report.check_failures = check_files(bench, SITE)
    if report.check_failures:  # tell crash bugs from plain ones
        report.check_failures += [f"(uncrashed control archive) {f}"
                                  for f in check_files(bench, "control")] or [
            "(the uncrashed control archive passes both checks)"]
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=50, help="kills per run (50)")
    p.add_argument("--runs", type=int, default=3, help="runs of the archive (3)")
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--changed", type=float, default=0.05,
                   help="share of pages rewritten before each run after the first (0.05)")
    p.add_argument("--seed", type=int, default=None, help="replay a failing run")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    work = Path(tempfile.mkdtemp(prefix="mirror-chaos-"))
    report = asyncio.run(run_chaos(work, kills=args.kills, pages=args.pages, seed=seed,
                                   runs=args.runs, changed=args.changed))
    print(report.summary())
    for line in report.failures() + report.notes():
        print(line)
    for run in report.runs:
        if not run.ok:
            print(f"run {run.run} kill delays (s):", " ".join(f"{d:.2f}" for d in run.delays))
    if not report.ok:
        print(f"replay: python bench/chaos.py --seed {seed} --kills {args.kills} "
              f"--pages {args.pages} --runs {args.runs} --changed {args.changed}")
    if args.keep or not report.ok:
        print(f"work folder kept: {work}")
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
