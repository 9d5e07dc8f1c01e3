"""The manifest alone (issue 16): captures per second on SQLite, before and after a change
of the code, and on PostgreSQL with 1, 2 and 4 worker processes leasing hosts; and the
bytes of database state per URL.

A synthetic crawl of `--captures` URLs on 8 sites: the seeds are each site's first page;
every capture is committed with about 20 discovered links (4 children in a tree, 16 pages
across every site), so each URL is found by about 20 pages, once new and then as a known
one, as on a real site. No WARC file, no network: the manifest's transactions only.

SQLite: the single machine's path (Manifest.urls.lease, then one commit_capture transaction per
capture), `durable` (synchronous=FULL, [archive] durability = "power") and `default`
(NORMAL), each in a process of its own, on this checkout and on `--before` (another
checkout: `git archive HEAD | tar -x -C /tmp/mirror-base`); the median of `--repeat` runs.
Bytes per URL: the file (its WAL checkpointed) over the URLs.

PostgreSQL: a server started by tests/pgserver.py with fsync on (synchronous_commit on, full
page writes), a fresh database per round; N worker processes each lease 2 hosts at a time
(lease_hosts, ttl 30 s), up to 8 URLs of each (lease_urls), commit each capture fenced by
the lease, and release the host; the captures over the wall time from a common start to the
last commit. The leases' intervals (database time) are checked: no two of one host slot
may overlap. Bytes per URL: pg_total_relation_size of every table (indexes and TOAST
included) over the URLs.

Usage: python bench/manifest.py [--captures 20000] [--pg-captures 10000] [--repeat 3]
       [--pg-repeat 1] [--workers 1,2,4] [--before /tmp/mirror-base] [--text]
       [--no-sqlite] [--no-pg]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITES = [f"s{n}.example.org" for n in range(8)]
#: the tables whose bytes per URL are shown apart (indexes included); the rest together
PARTS = ("urls", "captures", "links")
LINKS = 20


def universe(captures: int) -> int:
    """Pages per site."""
    return max(1, captures // len(SITES))


def found_on(url: str, per_site: int) -> list:  # noqa: ANN401 - NewUrl, imported late
    """About 20 links of a page: 4 children (a tree) and 16 pages across the sites."""
    from mirror.model import NewUrl

    site, n = url.split("/")[2], int(url.rsplit("-", 1)[1].split(".")[0])
    urls = [f"http://{site}/section/page-{(n * 4 + k) % per_site}.html" for k in range(1, 5)]
    urls += [f"http://{s}/section/page-{(n * 7 + i * 131) % per_site}.html"
             for i, s in enumerate(SITES * 2)]
    return [NewUrl(u, u.split("/")[2], 1, 5, "page", "link", "link") for u in urls]


def capture_row(n: int):  # noqa: ANN201 - CaptureRow, imported late
    from mirror.model import CaptureRow

    return CaptureRow("2026-01-01T00:00:00Z", f"<urn:uuid:{n:032x}>", "w-1.warc.gz",
                      n * 4000, 3000, n * 4000 + 3000, 900, 200, "text/html",
                      f"sha1:{n:032X}", 20_000, f'"{n:x}"', None, None, None)


def seeds() -> list:  # noqa: ANN401
    from mirror.model import NewUrl

    return [NewUrl(f"http://{s}/section/page-0.html", s, 0, 5, "page", "start", "link")
            for s in SITES]


def text_of(n: int):  # noqa: ANN201
    from mirror.model import PageText

    return PageText(f"Page {n}", " ".join(f"w{(n * 31 + i) % 3000}" for i in range(300)))


# -- SQLite: one process, the single machine's path -------------------------------------------
def sqlite_child(mode: str, captures: int, text: bool) -> dict[str, float]:
    """Runs with whatever `mirror` is first on sys.path (this checkout, or --before)."""
    from mirror.manifest.writer import Manifest

    per_site = universe(captures)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "manifest.sqlite3"
        m = Manifest(path, durable=mode == "durable")
        run = m.runs.start("2026-01-01T00:00:00Z", "bench", seeds())
        done = 0
        start, cpu = time.perf_counter(), time.process_time()
        while items := m.urls.lease(64, 1e12):
            for item in items:
                done += 1
                m.captures.commit(run, item, capture_row(done), found_on(item.url, per_site),
                                 text=text_of(done) if text else None)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        m.texts.index()
        urls = m.db.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
        m.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        parts = defaultdict(int)  # table (its indexes included) -> bytes
        for table, size in m.db.execute(
                "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d "
                "LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY 1"):
            parts[table if table in PARTS else "rest"] += size
        m.close()
        size = path.stat().st_size
    import mirror

    return {"captures": done, "per_s": done / elapsed, "cpu_ms": cpu / done * 1000,
            "bytes_per_url": size / urls, "parts": {k: v / urls for k, v in parts.items()},
            "code": mirror.__file__}


def sqlite_round(code: Path, mode: str, captures: int, text: bool) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", f"sqlite:{mode}",
         "--captures", str(captures)] + (["--text"] if text else []),
        env={**os.environ, "PYTHONPATH": str(code)}, cwd=code, capture_output=True,
        text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_sqlite(args: argparse.Namespace) -> None:
    codes = [("after", ROOT)] + ([("before", Path(args.before))] if args.before else [])
    print(f"SQLite, {args.captures} captures with {LINKS} links each, median of {args.repeat}")
    print("| code | mode | captures/s (runs) | CPU ms/capture | bytes/URL "
          f"({', '.join(PARTS)}, rest) |")
    print("|---|---|--:|--:|--:|")
    for mode in ("durable", "default"):
        rounds: dict[str, list[dict[str, float]]] = defaultdict(list)
        for _ in range(args.repeat):  # interleaved: a drift of the machine hits both
            for name, code in codes:
                rounds[name].append(sqlite_round(code, mode, args.captures, args.text))
        for name, _ in codes:
            rates = [r["per_s"] for r in rounds[name]]
            print(f"| {name} | {mode} | {statistics.median(rates):,.0f} "
                  f"({', '.join(f'{r:,.0f}' for r in rates)}) | "
                  f"{statistics.median(r['cpu_ms'] for r in rounds[name]):.3f} | "
                  f"{bytes_per_url(rounds[name][-1])} |", flush=True)


def bytes_per_url(result: dict) -> str:  # noqa: ANN401 - a round's result
    parts = result["parts"]
    return (f"{result['bytes_per_url']:,.0f} ("
            + ", ".join(f"{parts.get(p, 0):,.0f}" for p in (*PARTS, "rest")) + ")")


# -- PostgreSQL: N worker processes leasing hosts ---------------------------------------------
def pg_child(dsn: str, owner: str, go: str, captures: int, text: bool) -> dict[str, object]:
    from mirror.manifest.writer import open_manifest

    per_site = universe(captures)
    m = open_manifest(dsn)
    joined = m.sharedrun.join_or_start_run("2026-01-01T00:00:00Z", "bench", seeds())
    m.sharedrun.register_worker(owner, joined.run_id)
    while not Path(go).exists():
        time.sleep(0.001)
    done, refused, spans = 0, 0, []
    while True:
        leases = m.sharedrun.lease_hosts(owner, 2, 30)
        if not leases:
            if m.urls.count_pending() == 0:
                break
            time.sleep(0.002)
            continue
        for lease in leases:
            for item in m.sharedrun.lease_urls(lease, 8):
                n = item.id
                if m.captures.commit(joined.run_id, item, capture_row(n),
                                    found_on(item.url, per_site),
                                    text=text_of(n) if text else None, lease=lease):
                    done += 1
                else:
                    refused += 1
            end = m.sql.execute(f"SELECT {m.sql.now_ms}").fetchone()[0]
            released = m.sharedrun.release_host(lease, 0)
            spans.append((lease.site, lease.slot, lease.acquired,
                          end if released else lease.until))
    finished = time.time()
    m.close()
    return {"done": done, "refused": refused, "end": finished, "spans": spans}


def bench_pg(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import pgserver
    import psycopg

    reason = pgserver.why_not()
    if reason:
        print(f"PostgreSQL: skipped ({reason})")
        return
    print(f"\nPostgreSQL (fsync on), {args.pg_captures} captures, host leases, "
          f"median of {args.pg_repeat}")
    print("| workers | captures/s (runs) | leases | overlapping | refused | bytes/URL "
          f"({', '.join(PARTS)}, rest) |")
    print("|--:|--:|--:|--:|--:|--:|")
    with pgserver.pg_server(fsync=True) as server, tempfile.TemporaryDirectory() as tmp:
        for workers in (int(w) for w in args.workers.split(",")):
            results = []
            for r in range(args.pg_repeat):
                dsn = pgserver.create_database(server, f"bench_{workers}_{r}")
                results.append(pg_round(dsn, workers, args, Path(tmp) / f"go-{workers}-{r}"))
                with psycopg.connect(dsn) as conn:
                    sizes = conn.execute(
                        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
                        "AND n.nspname = 'public'").fetchall()
                    urls = conn.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
                parts: dict[str, float] = defaultdict(float)
                for table, size in sizes:
                    parts[table if table in PARTS else "rest"] += size / urls
                results[-1]["parts"] = parts
                results[-1]["bytes_per_url"] = sum(parts.values())
            rates = [r["per_s"] for r in results]
            print(f"| {workers} | {statistics.median(rates):,.0f} "
                  f"({', '.join(f'{x:,.0f}' for x in rates)}) | "
                  f"{sum(r['leases'] for r in results)} | "
                  f"{sum(r['overlaps'] for r in results)} | "
                  f"{sum(r['refused'] for r in results)} | {bytes_per_url(results[-1])} |",
                  flush=True)


def pg_round(dsn: str, workers: int, args: argparse.Namespace, go: Path) -> dict[str, float]:
    from mirror.manifest.writer import open_manifest

    open_manifest(dsn).close()  # the schema, before the workers race for it
    procs = [subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", f"pg:{dsn}:w{n}:{go}",
         "--captures", str(args.pg_captures)] + (["--text"] if args.text else []),
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
        for n in range(workers)]
    time.sleep(1.0 + 0.3 * workers)  # they import, connect and join the run
    start = time.time()
    go.touch()
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("a worker failed")
    done = sum(o["done"] for o in outs)
    spans: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for o in outs:
        for site, slot, begin, end in o["spans"]:
            spans[site, slot].append((begin, end))
    overlaps = sum(1 for s in spans.values()
                   for a, b in zip(sorted(s), sorted(s)[1:], strict=False) if b[0] < a[1])
    return {"per_s": done / (max(o["end"] for o in outs) - start),
            "leases": sum(len(s) for s in spans.values()), "overlaps": overlaps,
            "refused": sum(o["refused"] for o in outs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--captures", type=int, default=20000)
    p.add_argument("--pg-captures", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pg-repeat", type=int, default=1)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--before", help="another checkout of mirror to compare SQLite with")
    p.add_argument("--text", action="store_true", help="a page text with each capture")
    p.add_argument("--no-sqlite", action="store_true")
    p.add_argument("--no-pg", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, _, rest = args.child.partition(":")
        if kind == "sqlite":
            print(json.dumps(sqlite_child(rest, args.captures, args.text)))
        else:
            dsn, owner, go = rest.rsplit(":", 2)
            print(json.dumps(pg_child(dsn, owner, go, args.captures, args.text)))
        return 0
    if not args.no_sqlite:
        bench_sqlite(args)
    if not args.no_pg:
        bench_pg(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
