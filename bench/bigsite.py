"""Peak memory of `mirror run` on a big generated site (the issue's target: 100,000 pages).

Generates small pages (--page-kb 2: about 3.5 KB each, 100,000 pages in about a minute and
0.5 GB of disk) unless --site already holds them, serves them (nginx when installed, else
mirror.demo.sitesrv), crawls with mirror while sampling the summed RSS of its process group four
times a second, then checks the archive with `mirror verify` and `warcio check`. The peak
is shown while fetching and after the last request (closing the WARC, index, report).

Usage: python bench/bigsite.py [--pages 100000] [--page-kb 2] [--site DIR] [--workers 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import check_mirror, count_mirror  # noqa: E402
from measure import Measured, ToolTimeout, run_measured, tail  # noqa: E402
from run_mirror import (  # noqa: E402
    BenchError,
    Server,
    choose_server,
    count_lines,
    in_work_folder,
    mirror_command,
    prepare_site,
    request_target,
    start_nginx,
    start_sitesrv,
    stop_server,
    write_site_toml,
)


def disk_mb(folder: Path) -> float:
    """Allocated size of a folder tree, like `du -s`, in MB."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total / 1e6


def last_request_at(server: Server) -> float | None:
    """Wall-clock time of the server's last logged request."""
    if not server.log.is_file():
        return None
    with open(server.log, "rb") as f:
        f.seek(max(0, server.log.stat().st_size - 4096))
        lines = f.read().decode(errors="replace").splitlines()
    if not lines:
        return None
    at, _ = request_target(lines[-1])
    return at if server.kind == "nginx" else time.time() - (time.monotonic() - at)


def rss_profile(measured: Measured, fetching: float | None) -> list[str]:
    """Peak RSS in each quarter of the run, and while fetching against after the last fetch."""
    samples = measured.rss_samples
    if len(samples) < 4:
        return ["too few RSS samples (a run shorter than 4 s)"]
    end = samples[-1][0]
    lines = []
    for q in range(4):
        inside = [kb for t, kb in samples if q * end / 4 <= t <= (q + 1) * end / 4] or [0]
        lines.append(f"peak RSS in quarter {q + 1} of the run: {max(inside) / 1024:6.1f} MB")
    if fetching is not None:
        during = max([kb for t, kb in samples if t <= fetching] or [0])
        after = max([kb for t, kb in samples if t > fetching] or [0])
        lines.append(f"peak RSS while fetching (first {fetching:.0f} s): {during / 1024:.1f} MB;"
                     f" after the last request (last {measured.wall - fetching:.0f} s:"
                     f" closing the WARC, index, report): {after / 1024:.1f} MB")
    return lines


def bigsite(args: argparse.Namespace, work: Path) -> int:
    site = args.site.resolve() if args.site else work / "site"
    started = time.perf_counter()
    stats = prepare_site(site, args.pages, args.seed, args.page_kb)
    print(f"site: {stats['pages']} pages, {stats['expected_fetches']} expected fetches,"
          f" {disk_mb(site):.0f} MB on disk, ready in {time.perf_counter() - started:.0f} s")
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, args.latency)
    toml = write_site_toml(work, server.base_url, args.workers, args.workers)
    output = work / "mirror-output.txt"
    try:
        cmd = mirror_command() + ["run", str(toml), "--quiet"]
        started_at = time.time()
        measured = run_measured(cmd, output=output, timeout=args.timeout, sample_rss=True)
    except ToolTimeout:
        raise BenchError(f"mirror run did not finish within {args.timeout:.0f} s") from None
    finally:
        stop_server(server)
    if measured.code != 0:
        raise BenchError(f"mirror run exited with {measured.code}; its output ends:\n"
                         f"  {tail(output)}")
    requests = count_lines(server.log) or 0
    last = last_request_at(server)
    fetching = None if last is None else min(measured.wall, last - started_at)
    pages, records = count_mirror(work / "archive")
    print(f"\nmirror run, {server.kind}, latency {args.latency:g} s, workers = per_host ="
          f" {args.workers}")
    for line in [
        f"wall {measured.wall:.0f} s, CPU {measured.cpu:.0f} s"
        f" ({1000 * measured.cpu / max(requests, 1):.2f} ms/request)",
        f"requests served {requests} ({requests / measured.wall:.0f}/s),"
        f" pages stored {pages}, response + revisit records {records}",
        f"peak RSS {measured.max_rss_kb / 1024:.1f} MB (largest process, from wait4);"
        f" summed over the process group {max(kb for _, kb in measured.rss_samples) / 1024:.1f}"
        " MB (sampled every 0.25 s)",
        "bounds from each process's own peak (VmHWM): all peaks at once "
        f"{measured.peaks_sum_kb / 1024:.1f} MB over {len(measured.peaks_kb)} processes; "
        f"of the processes alive together {measured.together_kb / 1024:.1f} MB; after the "
        f"last sample the largest process alone {measured.max_rss_kb / 1024:.1f} MB",
        f"archive {disk_mb(work / 'archive'):.0f} MB on disk",
        *rss_profile(measured, fetching),
    ]:
        print(f"  {line}")
    verdicts = [] if args.no_verify else check_mirror(work)
    for verdict in verdicts:
        print(f"  {verdict}")
    return 1 if any("FAILED" in v for v in verdicts) else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=100_000, help="pages (100000)")
    parser.add_argument("--page-kb", type=int, default=2, help="mean page size in KB (2)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (0)")
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--workers", type=int, default=16, help="mirror workers and per_host (16)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response (0)")
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds allowed (7200)")
    parser.add_argument("--no-verify", action="store_true", help="skip mirror verify / warcio")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return in_work_folder("bigsite", args.keep, lambda work: bigsite(args, work))


if __name__ == "__main__":
    sys.exit(main())
