"""Prune on a site backed up every day (issue 18): archive size with and without a
retention policy, prune's time, and whether the kept runs replay byte for byte as before.

Generates a site (bench/sitegen.py), serves it with mirror.demo.sitesrv (ETag and
Last-Modified: unchanged pages answer 304) and runs `mirror run` on it `--runs` times,
changing `--changed` of its pages before each run after the first. The runs are a second
apart: replay finds a revisit's original by its URL and 14-digit timestamp, so two captures
of one URL within a second are ambiguous, prune or not.

A crawl takes its start time from the clock, and 30 days cannot be waited for: the runs'
start times in the manifest are set to 30 consecutive days (03:15 UTC), which is all the
policy reads (the WARC dates stay as they were). Then every capture of the runs the policy
keeps is read as `mirror serve` reads it (mirror.replay.captures, through index.cdxj: a
revisit resolved to its original's payload) and hashed; `mirror prune --keep-daily N` runs
as a process, timed; the same captures are read and compared again, and `mirror verify`
(with `--warcio`, also `warcio check`) judges the result.

Usage: python bench/prune.py [--pages 2000] [--runs 30] [--changed 0.02] [--keep-daily 7]
       [--work DIR] [--keep] [--warcio]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from run_mirror import (  # noqa: E402
    mirror_command,
    run_mirror,
    start_sitesrv,
    stop_server,
    write_site_toml,
)
from sitegen import change_pages, generate  # noqa: E402

from mirror.archive.index import capture_line  # noqa: E402
from mirror.manifest.reader import ManifestReader  # noqa: E402
from mirror.replay.captures import CaptureIndex, parse_cdxj  # noqa: E402
from mirror.upkeep.retention import runs_to_keep  # noqa: E402

DAY0 = datetime(2026, 1, 1, 3, 15, tzinfo=UTC)


def sizes(archive: Path) -> dict[str, int]:
    """Bytes of the WARC files, the manifest (checkpointed: its WAL emptied) and the part
    of it in use (SQLite keeps the pages a delete frees for the next runs' rows), and the
    index; the total counts the manifest's file."""
    warc = sum(p.stat().st_size for p in (archive / "warc").glob("*.warc.gz"))
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        used = db.execute("PRAGMA page_size").fetchone()[0] * (
            db.execute("PRAGMA page_count").fetchone()[0]
            - db.execute("PRAGMA freelist_count").fetchone()[0])
    manifest = (archive / "manifest.sqlite3").stat().st_size
    cdxj = (archive / "index.cdxj").stat().st_size
    return {"WARC files": warc, "manifest file": manifest, "manifest in use": used,
            "index.cdxj": cdxj, "total": warc + manifest + cdxj}


def start_runs_on_days(archive: Path) -> None:
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db, db:
        ids = [i for (i,) in db.execute("SELECT id FROM runs ORDER BY id")]
        db.executemany("UPDATE runs SET started_at=? WHERE id=?", [
            ((DAY0 + timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%SZ"), i)
            for n, i in enumerate(ids)])


def replayed(archive: Path, runs: set[int]) -> dict[int, str]:
    """capture id -> sha256 of what replay reads for it (status, headers, payload), for
    every capture of `runs`."""
    index = CaptureIndex.load(archive)
    manifest = ManifestReader(archive / "manifest.sqlite3")
    out = {}
    try:
        for row in manifest.captures.all():
            if row["run_id"] in runs:
                cap = parse_cdxj(capture_line(row))
                assert cap is not None
                record = index.read(cap)
                h = hashlib.sha256(f"{record.status} {record.headers}".encode())
                h.update(record.payload)
                out[row["id"]] = h.hexdigest()
    finally:
        manifest.close()
    return out


def timed(cmd: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """The finished process, its wall seconds and CPU seconds (user + sys)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return proc, wall, cpu


def crawl(args: argparse.Namespace, work: Path) -> Path:
    site = work / "site"
    generate(site, args.pages, seed=args.seed)
    server = start_sitesrv(site, work, 0.0)
    try:
        toml = write_site_toml(work, server.base_url, args.workers, args.workers)
        for n in range(1, args.runs + 1):
            if n > 1:
                change_pages(site, args.changed, seed=f"{args.seed}-{n}", stamp=f"run {n}")
                time.sleep(1.1)  # see the docstring: no URL captured twice in one second
            usage = run_mirror(toml, work, args.timeout)
            print(f"run {n:>3}: {usage.wall:5.1f} s, WARC files "
                  f"{sizes(work / 'archive')['WARC files']:,} bytes", file=sys.stderr)
    finally:
        stop_server(server)
    return toml


def bench(args: argparse.Namespace, work: Path) -> int:
    toml = crawl(args, work)
    archive = work / "archive"
    start_runs_on_days(archive)
    reader = ManifestReader(archive / "manifest.sqlite3")
    runs = reader.runs.all()
    reader.close()
    kept = set(runs_to_keep(runs, keep_daily=args.keep_daily))
    before_sizes = sizes(archive)
    started = time.perf_counter()
    before = replayed(archive, kept)
    read_s = time.perf_counter() - started
    proc, wall, cpu = timed(mirror_command() + ["prune", str(toml), "--keep-daily",
                                                str(args.keep_daily)], work)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        return 1
    after_sizes = sizes(archive)
    after = replayed(archive, kept)
    same = sum(before[i] == after.get(i) for i in before)
    check, verify_wall, _ = timed(mirror_command() + ["verify", str(toml)], work)
    print(f"\n{args.pages} pages, {args.runs} runs, {args.changed:.0%} of the pages changed "
          f"before each run; runs started on {args.runs} consecutive days")
    print(f"{'':16}{'no prune':>16}{f'keep_daily {args.keep_daily}':>16}{'ratio':>8}")
    for key in before_sizes:
        print(f"{key:16}{before_sizes[key]:>16,}{after_sizes[key]:>16,}"
              f"{after_sizes[key] / before_sizes[key]:>8.1%}")
    print(f"\nprune: {wall:.1f} s wall, {cpu:.1f} s CPU; dropped "
          f"{len(runs) - len(kept)} runs; {proc.stdout.strip().splitlines()[-1]}")
    print(f"replay of the {len(kept)} kept runs: {same} of {len(before)} captures "
          f"identical ({read_s:.0f} s to read them all)")
    print(f"mirror verify: {check.stdout.strip().splitlines()[-1]} ({verify_wall:.0f} s)")
    failed = same != len(before) or check.returncode != 0
    if args.warcio:
        files = [str(p) for p in sorted((archive / "warc").glob("*.warc.gz"))]
        command = [str(Path(sys.executable).parent / "warcio"), "check", *files]
        warcio, warcio_wall, _ = timed(command, work)
        print(f"warcio check: exit {warcio.returncode} {warcio.stdout.strip()[:200]} "
              f"({warcio_wall:.0f} s)")
        failed |= warcio.returncode != 0
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--changed", type=float, default=0.02, help="share of pages changed")
    p.add_argument("--keep-daily", type=int, default=7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--warcio", action="store_true", help="also run `warcio check`")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="mirror-prune-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return bench(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work folder: {work}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
