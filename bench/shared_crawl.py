"""One crawl shared by several `mirror run --db` workers: how long the 2,000-page, 8-host
site (tests/multihost.py) takes with 1 and with 4 workers, and how long a killed
worker's hosts wait before another worker takes them over.

Starts its own PostgreSQL (tests/pgserver.py, fsync on), moto's S3 (tests/s3server.py)
and the site (a process of its own); each measurement gets a fresh database, bucket and
site process. Everything runs on this machine and is stopped by its process id.

    python bench/shared_crawl.py                     # both parts, --repeat 3
    python bench/shared_crawl.py --only crawl --repeat 5 --workers 1,4
    python bench/shared_crawl.py --only takeover --ttl default,6

crawl: wall seconds from the first worker's start to the last one's exit, CPU seconds of
all worker processes (user + system, with their helper processes: RUSAGE_CHILDREN), and
requests/s the site served; medians of --repeat runs. Also: requests for a path asked
before (robots.txt read again by another worker, pages fetched again) and the smallest
gap between two requests to one host the site saw (tests/multihost.py politeness: at
most `delay` apart is the promise). "local" is a single-machine `mirror run` of the same
site without --db, for comparison.

takeover: 4 workers; once a quarter of the pages are stored, the worker that holds the
most host slots is SIGKILLed (and not started again). From the site's request log: for
each host it held, seconds from the kill to the first request to that host after it (by
another worker); min / median / max over the hosts of all --repeat runs.

The table is printed (markdown) and, with the exact command, appended to --notes.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "tests")]

from multihost import MultiHost, SharedWorker, politeness, query, site_file  # noqa: E402

#: bound on one crawl (seconds)
CRAWL_TIMEOUT = 900.0


@dataclass
class Env:
    pg: Any
    s3: Any
    work: Path
    args: argparse.Namespace
    serial: int = 0

    def fresh(self) -> tuple[Path, str, str]:
        """A new folder, database and store for one measurement."""
        import pgserver

        self.serial += 1
        folder = self.work / f"m{self.serial}"
        folder.mkdir()
        dsn = pgserver.create_database(self.pg, f"bench{self.serial}")
        store = self.s3.make_bucket(f"bench-{self.serial}") + "/multi"
        return folder, dsn, store


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _until(predicate: Callable[[], Any], timeout: float, what: str,
           workers: list[SharedWorker]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    said = "\n".join(f"--- {w.id}\n{w.output()}" for w in workers)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}\n{said}")


@contextmanager
def _site(folder: Path, args: argparse.Namespace) -> Iterator[MultiHost]:
    site = MultiHost(folder / "site", args.pages, latency=args.latency)
    try:
        yield site
    finally:
        site.stop()


def _workers(folder: Path, site: MultiHost, dsn: str, store: str, count: int,
             args: argparse.Namespace, ttl: str | None = None) -> list[SharedWorker]:
    extra = ("--lease-ttl", ttl) if ttl else ()
    return [SharedWorker(f"w{n}", site_file(folder / f"w{n}" / "site.toml", site.start_url,
                                            site.hosts, store, delay=args.delay,
                                            workers=args.concurrency or None,
                                            timeout=args.timeout), dsn, *extra)
            for n in range(1, count + 1)]


def _requests(site: MultiHost) -> dict[str, float]:
    """Requests the site served, how many were for a path asked before (robots.txt is
    read by each worker that leases its host; a page is fetched again when its capture
    was not committed), and the smallest gap between two requests to one host."""
    log = site.stop()
    paths = [(host, r["path"]) for host, reqs in log.items() for r in reqs]
    gaps = [p["min_gap"] for p in politeness(log).values()]
    return {"requests": len(paths), "again": len(paths) - len(set(paths)),
            "min_gap_ms": 1000 * min(gaps, default=float("inf"))}


def crawl_once(env: Env, count: int) -> dict[str, float]:
    """One crawl with `count` workers (0: a single-machine run without --db)."""
    folder, dsn, store = env.fresh()
    with _site(folder, env.args) as site:
        if count == 0:
            path = site_file(folder / "local" / "site.toml", site.start_url, site.hosts, "",
                             delay=env.args.delay, workers=env.args.concurrency or None,
                             timeout=env.args.timeout)
            cpu, began = _children_cpu(), time.monotonic()
            done = subprocess.run([sys.executable, "-m", "mirror", "run", str(path),
                                   "--quiet"], capture_output=True, text=True,
                                  timeout=CRAWL_TIMEOUT)
            wall, cpu = time.monotonic() - began, _children_cpu() - cpu
            if done.returncode != 0:
                raise SystemExit(f"mirror run: {done.stdout}{done.stderr}")
        else:
            workers = _workers(folder, site, dsn, store, count, env.args)
            cpu, began = _children_cpu(), time.monotonic()
            try:
                for w in workers:
                    w.start()
                _until(lambda: not any(w.running() for w in workers), CRAWL_TIMEOUT,
                       "the workers to finish", workers)
                wall, cpu = time.monotonic() - began, _children_cpu() - cpu
            finally:
                for w in workers:
                    w.stop()
            bad = {w.id: w.exits for w in workers if w.exits != [0]}
            if bad:
                raise SystemExit(f"exit codes {bad}:\n" + "\n".join(w.output() for w in workers))
            stored = query(dsn, "SELECT count(*) AS n FROM captures")[0]["n"]
            if stored < env.args.pages:
                raise SystemExit(f"only {stored} captures of {env.args.pages} pages")
        served = _requests(site)
    return {"wall": wall, "cpu": cpu, "rps": served["requests"] / wall, **served}


def takeover_once(env: Env, ttl: str | None) -> tuple[list[float], dict[str, Any]]:
    """Seconds from the kill to the first request to each host the killed worker held."""
    folder, dsn, store = env.fresh()
    with _site(folder, env.args) as site:
        workers = _workers(folder, site, dsn, store, 4, env.args, ttl)
        began = time.monotonic()
        try:
            for w in workers:
                w.start()

            def stored() -> int:
                try:
                    return int(query(dsn, "SELECT count(*) AS n FROM captures")[0]["n"])
                except Exception:  # noqa: BLE001 - the tables are not made yet
                    return 0

            _until(lambda: stored() >= env.args.pages // 4, CRAWL_TIMEOUT,
                   "a quarter of the pages", workers)
            row = _until(lambda: query(
                dsn, "SELECT lease_owner, array_agg(site) AS sites, min(lease_until) AS until,"
                     " (extract(epoch from clock_timestamp()) * 1000)::bigint AS now FROM hosts"
                     " WHERE lease_owner IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"),
                30, "a worker holding hosts", workers)[0]
            victim = next(w for w in workers if w.id == row["lease_owner"])
            victim.kill()
            killed = victim.killed[-1]
            rest = [w for w in workers if w is not victim]
            _until(lambda: not any(w.running() for w in rest), CRAWL_TIMEOUT,
                   "the other workers to finish", workers)
            wall = time.monotonic() - began
        finally:
            for w in workers:
                w.stop()
        log = site.stop()
    waits = []
    for key in row["sites"]:
        after = [r["arrived"] for r in log[key.rsplit(":", 1)[0]] if r["arrived"] > killed]
        if after:
            waits.append(after[0] - killed)
    info = {"victim": victim.id, "hosts": len(row["sites"]), "wall": wall,
            "lease_left": (row["until"] - row["now"]) / 1000, "taken_over": len(waits)}
    return waits, info


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=("crawl", "takeover"), help="one part only")
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", default="local,1,4",
                   help="crawl: worker counts, comma-separated; local: no --db (local,1,4)")
    p.add_argument("--ttl", default="default,6",
                   help="takeover: --lease-ttl values; default: the CLI's (default,6)")
    p.add_argument("--delay", type=float, default=0.05, help="[crawl] delay (0.05)")
    p.add_argument("--timeout", type=float, default=3, help="[crawl] timeout (3)")
    p.add_argument("--concurrency", type=int, default=0,
                   help="[crawl] workers: host slots one worker leases (0: the default)")
    p.add_argument("--latency", type=float, default=0.0, help="the site's answer time")
    p.add_argument("--notes", type=Path, default=Path("/tmp/shared_bench_notes.md"))
    args = p.parse_args(argv)
    import pgserver
    import s3server

    lines = [f"`{shlex.join([sys.executable, *sys.argv])}`", "",
             f"pages {args.pages}, 8 hosts, delay {args.delay}, timeout {args.timeout}, "
             f"[crawl] workers {args.concurrency or 'default'}, site latency {args.latency}, "
             f"repeat {args.repeat}, {os.cpu_count()} CPUs", ""]
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shared-bench-")))
        pg = stack.enter_context(pgserver.pg_server(fsync=True))
        s3 = stack.enter_context(s3server.moto_s3())
        os.environ.update(s3.env)
        env = Env(pg, s3, work, args)
        if args.only in (None, "crawl"):
            lines += ["| workers | wall s (median) | CPU s, all workers (median) | requests/s "
                      "(median) | requests again (max) | smallest gap ms (min) | wall s of "
                      "each run |", "|---|---|---|---|---|---|---|"]
            for spec in args.workers.split(","):
                count = 0 if spec == "local" else int(spec)
                runs = []
                for i in range(args.repeat):
                    runs.append(crawl_once(env, count))
                    print(f"{spec} #{i + 1}: {runs[-1]}", file=sys.stderr)
                walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
                lines.append(f"| {spec} | {_median([r['wall'] for r in runs]):.1f} | "
                             f"{_median([r['cpu'] for r in runs]):.1f} | "
                             f"{_median([r['rps'] for r in runs]):.0f} | "
                             f"{max(r['again'] for r in runs):.0f} | "
                             f"{min(r['min_gap_ms'] for r in runs):.1f} | {walls} |")
            lines.append("")
        if args.only in (None, "takeover"):
            lines += ["| --lease-ttl | hosts taken over | kill → first request s: min | median"
                      " | max | lease left at kill s (median) | wall s (median) |",
                      "|---|---|---|---|---|---|---|"]
            for ttl in args.ttl.split(","):
                waits, infos = [], []
                for i in range(args.repeat):
                    w, info = takeover_once(env, None if ttl == "default" else ttl)
                    waits += w
                    infos.append(info)
                    print(f"takeover ttl {ttl} #{i + 1}: {[round(x, 2) for x in w]} {info}",
                          file=sys.stderr)
                held = sum(i["hosts"] for i in infos)
                lines.append(
                    f"| {ttl} | {sum(i['taken_over'] for i in infos)}/{held} | "
                    f"{min(waits, default=float('nan')):.2f} | {_median(waits):.2f} | "
                    f"{max(waits, default=float('nan')):.2f} | "
                    f"{_median([i['lease_left'] for i in infos]):.2f} | "
                    f"{_median([i['wall'] for i in infos]):.1f} |")
            lines.append("")
    table = "\n".join(lines)
    print(table)
    with open(args.notes, "a", encoding="utf-8") as notes:
        notes.write(f"\n## bench/shared_crawl.py, {time.strftime('%Y-%m-%d %H:%M')}\n\n"
                    f"{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
