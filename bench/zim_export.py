"""What a ZIM export costs against a WACZ of the same archive (issue 19): wall time, CPU,
peak memory (RSS of the export process, /usr/bin/time -v) and file size, medians of
--repeat; then whether `zimcheck -A` passes the ZIM and how long it takes.

Generates the site (bench/sitegen.py) unless --site holds it, serves it with nginx when
installed (else mirror.demo.sitesrv), crawls it with `mirror run`, then runs `mirror export
--zim` and `mirror export --wacz` as separate processes, alternating. --work DIR reuses the
crawl a run with --keep left there (a 100,000-page crawl takes minutes).

Usage: python bench/zim_export.py [--pages 2000] [--page-kb 2] [--site DIR] [--repeat 3]
       [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from run_mirror import (  # noqa: E402
    BenchError,
    Usage,
    add_site_arguments,
    choose_server,
    in_work_folder,
    mirror_command,
    parse_gnu_time,
    prepare_site,
    run_mirror,
    start_nginx,
    start_sitesrv,
    stop_server,
    write_site_toml,
)

GNU_TIME = Path("/usr/bin/time")


def crawl(args: argparse.Namespace, work: Path) -> Path:
    """The site.toml of a finished crawl of the generated site in `work` (made if need be)."""
    toml = work / "site.toml"
    if (work / "archive" / "index.cdxj").is_file() and toml.is_file():
        print(f"reusing the archive in {work}", file=sys.stderr)
        return toml
    site = args.site.resolve() if args.site else work / "site"
    prepare_site(site, args.pages, args.seed, args.page_kb)
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, 0.0)
    try:
        toml = write_site_toml(work, server.base_url, 16, 16)
        started = time.perf_counter()
        run_mirror(toml, work, args.timeout)
        print(f"crawled in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        stop_server(server)
    return toml


def export(toml: Path, work: Path, flag: str, out: Path) -> Usage:
    """One `mirror export --zim/--wacz OUT` in its own process, measured."""
    if not GNU_TIME.is_file():
        raise BenchError("needs /usr/bin/time (Debian package time) for the peak RSS")
    out.unlink(missing_ok=True)
    time_file = work / "export-time.txt"
    cmd = [str(GNU_TIME), "-v", "-o", str(time_file), *mirror_command(), "export", str(toml),
           flag, str(out)]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"{' '.join(cmd[4:])} exited {done.returncode}: {done.stderr[-2000:]}")
    print(done.stdout.strip(), file=sys.stderr)
    return parse_gnu_time(time_file.read_text(), wall)


def zimcheck(path: Path) -> str:
    exe = shutil.which("zimcheck")
    if exe is None:
        return "not installed"
    started = time.perf_counter()
    done = subprocess.run([exe, "-A", str(path)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    verdict = "pass" if done.returncode == 0 else f"FAIL ({done.returncode})"
    return f"{verdict} in {seconds:.1f} s"


def bench(args: argparse.Namespace, work: Path) -> None:
    toml = crawl(args, work)
    outputs = {"zim": work / "site.zim", "wacz": work / "site.wacz"}
    runs: dict[str, list[Usage]] = {kind: [] for kind in outputs}
    for _ in range(args.repeat):
        for kind, out in outputs.items():
            runs[kind].append(export(toml, work, f"--{kind}", out))
    print(f"\n{args.pages} pages of {args.page_kb} KB, medians of {args.repeat}\n")
    print("| export | wall s | CPU s | peak RSS MB | size MB |")
    print("|---|---:|---:|---:|---:|")
    for kind, usages in runs.items():
        wall = statistics.median(u.wall for u in usages)
        cpu = statistics.median(u.user + u.system for u in usages)
        rss = statistics.median(u.max_rss_kb for u in usages) / 1024
        size = outputs[kind].stat().st_size / 1e6
        print(f"| {kind} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {size:.1f} |")
    print(f"\nzimcheck -A: {zimcheck(outputs['zim'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_site_arguments(parser)
    parser.add_argument("--page-kb", type=int, default=2, help="text per page, KB (2)")
    parser.add_argument("--repeat", type=int, default=3, help="exports of each kind (3)")
    parser.add_argument("--work", type=Path, help="work folder to use and keep (reused)")
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--timeout", type=float, default=7200, help="crawl seconds (7200)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        try:
            bench(args, args.work.resolve())
        except BenchError as exc:
            print(f"zim_export: {exc}", file=sys.stderr)
            return 1
        return 0

    def body(work: Path) -> int:
        bench(args, work)
        return 0

    return in_work_folder("zim_export", args.keep, body)


if __name__ == "__main__":
    sys.exit(main())
