"""Round trips to PostgreSQL per capture of a shared run (issue 37: pipeline mode), counted
from libpq's protocol trace, not timed: each Sync (an extended-protocol statement, or a
whole pipeline) and each simple Query the client sends waits for the server once.

One worker's path of bench/manifest.py (lease 2 hosts, up to 8 URLs of each, commit each
capture with its ~20 links fenced by the lease, release) on a PostgreSQL this starts
(tests/pgserver.py), with the manifest's connection traced; the commits alone
(Captures.commit) and the whole loop (leases and releases too) are counted apart.

    python bench/fleet_pipeline.py [--captures 400] [--code /tmp/mirror-base]

--code: the checkout whose `mirror` is measured (default: this one), to compare a change
with `git archive HEAD | tar -x -C /tmp/mirror-base` (bench/README.md: the pipelined
upserts of commit 6f34a24, measured and left out).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def count(trace: Path) -> int:
    """Messages of the client that wait for an answer: Sync and Query."""
    n = 0
    for line in trace.read_text(errors="replace").splitlines():
        words = line.split()
        if "F" in words[:3] and ("Sync" in words or "Query" in words):
            n += 1
    return n


def measure(dsn: str, captures: int) -> dict[str, float]:
    import manifest as bench  # bench/manifest.py: the synthetic crawl

    from mirror.manifest.writer import open_manifest

    per_site = bench.universe(captures)
    m = open_manifest(dsn)
    joined = m.sharedrun.join_or_start_run("2026-01-01T00:00:00Z", "bench", bench.seeds())
    m.sharedrun.register_worker("w0", joined.run_id)
    pgconn = m.sql.raw.pgconn
    with tempfile.TemporaryDirectory() as tmp:
        all_trace, commit_trace = Path(tmp) / "all", Path(tmp) / "commits"
        done = 0
        with open(all_trace, "wb") as every, open(commit_trace, "wb") as commits:
            while done < captures:
                pgconn.trace(every.fileno())
                leases = m.sharedrun.lease_hosts("w0", 2, 30)
                if not leases:
                    break
                for lease in leases:
                    for item in m.sharedrun.lease_urls(lease, 8):
                        pgconn.untrace()
                        pgconn.trace(commits.fileno())
                        m.captures.commit(joined.run_id, item, bench.capture_row(item.id),
                                          bench.found_on(item.url, per_site), lease=lease)
                        pgconn.untrace()
                        pgconn.trace(every.fileno())
                        done += 1
                    m.sharedrun.release_host(lease, 0)
                pgconn.untrace()
        in_commits = count(commit_trace)
        rest = count(all_trace)
    m.close()
    return {"captures": done, "per_commit": in_commits / done,
            "per_capture": (in_commits + rest) / done}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--captures", type=int, default=400)
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout measured")
    args = p.parse_args(argv)
    sys.path[:0] = [str(args.code), str(ROOT / "tests"), str(ROOT / "bench")]
    import pgserver

    with pgserver.pg_server() as pg:
        dsn = pgserver.create_database(pg, "pipeline")
        r = measure(dsn, args.captures)
    print(f"{args.code}: {r['captures']} captures; round trips per commit "
          f"{r['per_commit']:.2f}, per capture with leases and releases "
          f"{r['per_capture']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
