"""What learning trap patterns costs on a site without traps: the generated 2,000-page site
crawled with `[scope] learn_traps = false` and `= true` in interleaved rounds (A B A B ...,
a fresh archive each), one server for all; prints each round's CPU per request and the
medians, with the load average before each round.

    python bench/learned_traps.py --site /tmp/site2000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from run_mirror import (  # noqa: E402  (a script beside its helpers)
    add_site_arguments,
    choose_server,
    count_records,
    in_work_folder,
    prepare_site,
    run_mirror,
    start_nginx,
    start_sitesrv,
    stop_server,
    write_site_toml,
)


def one_round(work: Path, base_url: str, learn: bool, workers: int) -> tuple[float, float, int]:
    """(CPU s, wall s, requests) of one crawl into a fresh archive."""
    folder = work / ("learn" if learn else "plain")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    toml = write_site_toml(folder, base_url, workers, workers)
    toml.write_text(toml.read_text() + f"\n[scope]\nlearn_traps = {str(learn).lower()}\n")
    usage = run_mirror(toml, folder, 1800)
    records = count_records(folder / "archive")
    requests = records.get("response", 0) + records.get("revisit", 0)
    return usage.user + usage.system, usage.wall, requests


def bench(args: argparse.Namespace, work: Path) -> None:
    site = args.site.resolve() if args.site else work / "site"
    prepare_site(site, args.pages, args.seed)
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, args.latency)
    results: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    try:
        for i in range(args.rounds):
            for learn in (False, True) if i % 2 == 0 else (True, False):
                load = os.getloadavg()[0]
                cpu, wall, requests = one_round(work, server.base_url, learn, args.workers)
                results[learn].append((cpu, wall, requests))
                print(f"round {i + 1} learn_traps={str(learn).lower():<5} load {load:5.2f}  "
                      f"CPU {cpu:6.2f} s  wall {wall:6.2f} s  requests {requests}  "
                      f"{1000 * cpu / requests:.3f} CPU ms/request", flush=True)
    finally:
        stop_server(server)
    for learn, rows in results.items():
        per = [1000 * cpu / req for cpu, _, req in rows]
        print(f"learn_traps={str(learn).lower():<5} median of {len(rows)}: "
              f"CPU {statistics.median(r[0] for r in rows):.2f} s, "
              f"{statistics.median(per):.3f} CPU ms/request, "
              f"wall {statistics.median(r[1] for r in rows):.2f} s, "
              f"requests {statistics.median(r[2] for r in rows):.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_site_arguments(parser)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each (5)")
    parser.add_argument("--workers", type=int, default=16, help="[crawl] workers (16)")
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)

    def body(work: Path) -> int:
        bench(args, work)
        return 0

    return in_work_folder("learned_traps", args.keep, body)


if __name__ == "__main__":
    sys.exit(main())
