"""Kill `mirror run` with SIGKILL at seeded random moments, restart, and check nothing was lost.

Serves a generated site on 127.0.0.1, runs `mirror run` in a subprocess, kills it after a
random delay, records which URLs the manifest had committed, and repeats; then lets the last
run finish and checks (REQUIREMENTS.md C1):

- the last run completes with exit 0;
- every URL of the run is stored exactly once (one response record per URL in the WARCs);
- the server never again received a request for a URL committed before a kill;
- every WARC file passes `warcio check` (and `mirror verify` when it exists).

Usage: python bench/chaos.py --kills 50 --pages 2000 --seed 7
A failing run prints its seed; the same seed replays the same kill times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from sitegen import generate  # noqa: E402

from mirror.cli import COMMANDS  # noqa: E402
from mirror.sitesrv import REQUEST_LOG, start_site_server  # noqa: E402


@dataclass
class ChaosReport:
    seed: int
    kills: int = 0
    restarts: int = 0
    refetched: list[str] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)
    urls_stored: int = 0
    urls_done: int = 0
    final_exit: int | None = None
    check_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.final_exit == 0 and not self.refetched and not self.duplicates
                and self.urls_stored == self.urls_done and not self.check_failures)

    def summary(self) -> str:
        return (f"seed {self.seed}: {self.kills} kills, final exit {self.final_exit}, "
                f"{self.urls_stored} URLs stored / {self.urls_done} done, "
                f"{len(self.duplicates)} duplicated, {len(self.refetched)} refetched, "
                f"{len(self.check_failures)} check failures -> {'OK' if self.ok else 'FAIL'}")


def committed_urls(archive: Path) -> set[str]:
    db_path = archive / "manifest.sqlite3"
    if not db_path.exists():
        return set()
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {u for (u,) in db.execute("SELECT url FROM urls WHERE state IN ('done', 'failed')")}
    except sqlite3.OperationalError:  # killed before the schema was created
        return set()
    finally:
        db.close()


def stored_responses(warc_dir: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    counts[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    return counts


def check_files(work: Path, toml: Path, warc_dir: Path) -> list[str]:
    failures = []
    files = [str(p) for p in sorted(warc_dir.glob("*.warc.gz"))]
    proc = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *files],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode:
        failures.append("warcio check: " + (proc.stdout + proc.stderr)[-2000:])
    if "verify" in COMMANDS:
        proc = subprocess.run([sys.executable, "-m", "mirror", "verify", str(toml)], cwd=work,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode:
            failures.append("mirror verify: " + (proc.stdout + proc.stderr)[-2000:])
    return failures


async def run_chaos(work: Path, *, kills: int, pages: int, seed: int,
                    max_delay: float = 1.0, timeout: float = 300) -> ChaosReport:
    """The whole experiment in `work`; returns what it found (never raises on a finding)."""
    rng = random.Random(seed)
    report = ChaosReport(seed=seed)
    site_root = work / "site"
    if not site_root.exists():
        generate(site_root, pages, seed=0)
    runner, base = await start_site_server(site_root)
    log = runner.app[REQUEST_LOG]
    toml = work / "site.toml"
    toml.write_text(f'[site]\nname = "chaos"\nstart_urls = ["{base}index.html"]\n'
                    'output_dir = "archive"\n[crawl]\nworkers = 16\nper_host = 16\n')
    archive = work / "archive"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "mirror", "run", str(toml), "--quiet"]
    origin = base.rstrip("/")
    snapshots: list[tuple[int, set[str]]] = []  # (server log length, URLs committed) per kill
    try:
        for _ in range(kills):
            proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=work, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            try:
                await asyncio.wait_for(proc.wait(), rng.uniform(0.3, max_delay))
                report.final_exit = proc.returncode  # the run finished before this kill:
                break  # another `mirror run` would start a new snapshot, not finish this one
            except TimeoutError:
                proc.kill()
                await proc.wait()
            report.kills += 1
            snapshots.append((len(log), committed_urls(archive)))
        if report.final_exit is None:
            proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=work, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await asyncio.wait_for(proc.communicate(), timeout)
            report.final_exit = proc.returncode
            if proc.returncode:
                report.check_failures.append("final run: " + err.decode()[-2000:])
    finally:
        await runner.cleanup()
    report.refetched = sorted({  # any request, after a kill, for a URL committed before it
        origin + path for mark, committed in snapshots for _, _, path in log[mark:]
        if origin + path in committed
    })
    counts = stored_responses(archive / "warc")
    report.duplicates = {u: n for u, n in counts.items() if n > 1}
    report.urls_stored = len(counts)
    report.urls_done = len(committed_urls(archive))
    report.check_failures += check_files(work, toml, archive / "warc")
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--seed", type=int, default=None, help="replay a failing run")
    p.add_argument("--max-delay", type=float, default=1.0, help="longest run before a kill (s)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    work = Path(tempfile.mkdtemp(prefix="mirror-chaos-"))
    report = asyncio.run(run_chaos(work, kills=args.kills, pages=args.pages, seed=seed,
                                   max_delay=args.max_delay))
    print(report.summary())
    for failure in report.check_failures:
        print(failure)
    if report.refetched:
        print("refetched after commit:", *report.refetched[:20], sep="\n  ")
    if report.duplicates:
        print("stored more than once:", *list(report.duplicates)[:20], sep="\n  ")
    if args.keep or not report.ok:
        print(f"work folder kept: {work}")
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
