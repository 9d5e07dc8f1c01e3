"""What the full-text index costs and gives (issue 14): crawl CPU with and without it, its
size on disk, and search latency.

Crawls one generated site with this checkout and with a baseline commit from before the
text index (the same `mirror run`, its code put first on PYTHONPATH), alternating, `--repeat`
times each, served by nginx when installed; prints the medians of CPU seconds (user + sys,
every process of the run), CPU ms per request, wall time and peak RSS, and the extra CPU.
Then, on the last archive this checkout made: the manifest's size against the baseline's,
the text stored, and the latency of `ManifestReader.search` (20 results with snippets, as
`mirror search` asks) for one word, a phrase and a prefix, each over `--queries` different
queries drawn from the archived texts: p50 and p95.

Usage: python bench/text_cost.py [--pages 100000 --page-kb 2] [--site DIR] [--repeat 3]
       [--baseline 8f91e03] [--queries 200]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_mirror as run_mirror_module  # noqa: E402
from run_mirror import (  # noqa: E402
    BenchError,
    Usage,
    choose_server,
    count_lines,
    in_work_folder,
    prepare_site,
    run_mirror,
    start_nginx,
    start_sitesrv,
    stop_server,
    write_site_toml,
)

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "8f91e03"  # the last commit before the text index


def baseline_venv(ref: str, folder: Path) -> Path:
    """A venv with the baseline commit installed (not editable), made once in `folder`."""
    mirror = folder / "bin" / "mirror"
    if mirror.is_file():
        return mirror
    src = folder.with_name(folder.name + "-src")
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "-q", str(src)], check=True)
    return mirror


def crawl_once(args: argparse.Namespace, site: Path, work: Path,
               mirror: Path) -> tuple[Usage, int, Path]:
    """One `mirror run` of the site with this `mirror` command: usage, requests, archive."""
    for old in work.glob("*"):
        subprocess.run(["rm", "-rf", str(old)], check=True)
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, 0.0)
    run_mirror_module.mirror_command = lambda: [str(mirror)]
    here = os.getcwd()
    os.chdir(work)  # not the checkout: the baseline's helpers would import its code
    try:
        toml = write_site_toml(work, server.base_url, args.workers, args.workers)
        usage = run_mirror(toml, work, args.timeout)
    finally:
        os.chdir(here)
        stop_server(server)
    log = (work / "archive" / "mirror.log").read_text(errors="replace")
    if "process died" in log:
        raise BenchError(f"{mirror}: a link-extraction process died (see {work})")
    return usage, count_lines(server.log) or 0, work / "archive"


def median_row(name: str, runs: list[tuple[Usage, int]]) -> dict[str, float]:
    cpu = statistics.median(u.user + u.system for u, _ in runs)
    per = statistics.median((u.user + u.system) * 1000 / max(n, 1) for u, n in runs)
    row = {"cpu_s": cpu, "ms_per_request": per,
           "wall_s": statistics.median(u.wall for u, _ in runs),
           "rss_mb": statistics.median(u.max_rss_kb for u, _ in runs) / 1024,
           "requests": statistics.median(n for _, n in runs)}
    print(f"{name:<10} CPU {row['cpu_s']:7.1f} s  {row['ms_per_request']:6.3f} ms/request  "
          f"wall {row['wall_s']:6.1f} s  peak RSS {row['rss_mb']:5.0f} MB  "
          f"requests {row['requests']:.0f}  (median of {len(runs)})")
    return row


def latency(archive: Path, queries: int, seed: int) -> None:
    sys.path.insert(0, str(ROOT))
    from mirror.manifest.reader import ManifestReader

    manifest = ManifestReader(archive / "manifest.sqlite3")
    rng = random.Random(seed)
    try:
        bodies = [b for (b,) in manifest.db.execute(
            "SELECT body FROM texts ORDER BY random() LIMIT 500")]
        words = [w for b in bodies for w in re.findall(r"[a-z]{4,}", b.lower())]
        kinds = {
            "word": [rng.choice(words) for _ in range(queries)],
            "phrase": [],
            "prefix": [rng.choice(words)[:3] + "*" for _ in range(queries)],
        }
        for _ in range(queries):
            run = re.findall(r"[a-z]+", rng.choice(bodies).lower())
            at = rng.randrange(max(len(run) - 2, 1))
            kinds["phrase"].append('"' + " ".join(run[at:at + 2]) + '"')
        for kind, qs in kinds.items():
            times, found = [], 0
            for q in qs:
                started = time.perf_counter()
                hits = manifest.texts.search(q, limit=20)
                times.append((time.perf_counter() - started) * 1000)
                found += len(hits)
            times.sort()
            print(f"search {kind:<7} p50 {times[len(times) // 2]:6.1f} ms  "
                  f"p95 {times[int(len(times) * 0.95)]:6.1f} ms  max {times[-1]:6.1f} ms  "
                  f"({len(qs)} queries, {found / len(qs):.1f} results each, e.g. {qs[0]})")
        frequent = max(set(words[:5000]), key=words.count)
        started = time.perf_counter()
        manifest.texts.search(frequent, limit=20)
        took = (time.perf_counter() - started) * 1000
        pages = manifest.db.execute("SELECT COUNT(*) FROM texts WHERE texts MATCH ?",
                                    (frequent,)).fetchone()[0]
        print(f"search of the most frequent sampled word ({frequent!r}, in {pages} "
              f"pages): {took:.1f} ms")
    finally:
        manifest.close()


def bench(args: argparse.Namespace, work: Path) -> int:
    site = args.site.resolve() if args.site else work / "site"
    stats = prepare_site(site, args.pages, args.seed, args.page_kb)
    print(f"site: {args.pages} pages, {stats['expected_fetches']} expected fetches",
          file=sys.stderr)
    venv = args.baseline_venv or work / "baseline-venv"
    base_mirror = baseline_venv(args.baseline, venv.resolve())
    here = Path(sys.executable).parent / "mirror"
    runs: dict[str, list[tuple[Usage, int]]] = {"baseline": [], "text": []}
    sizes: dict[str, int] = {}
    for i in range(args.repeat):
        for name, code in (("baseline", base_mirror), ("text", here)):
            folder = work / name
            folder.mkdir(exist_ok=True)
            usage, requests, archive = crawl_once(args, site, folder, code)
            runs[name].append((usage, requests))
            sizes[name] = (archive / "manifest.sqlite3").stat().st_size
            print(f"  {name} #{i + 1}: CPU {usage.user + usage.system:.1f} s, wall "
                  f"{usage.wall:.1f} s, {requests} requests", file=sys.stderr)
    base, text = median_row("baseline", runs["baseline"]), median_row("text", runs["text"])
    print(f"extra CPU for text extraction and indexing: "
          f"{(text['cpu_s'] / base['cpu_s'] - 1) * 100:+.1f}% "
          f"({(text['ms_per_request'] / base['ms_per_request'] - 1) * 100:+.1f}% per request)")
    archive = work / "text" / "archive"
    sys.path.insert(0, str(ROOT))
    import sqlite3

    with sqlite3.connect(archive / "manifest.sqlite3") as db:
        pages, chars = db.execute("SELECT COUNT(*), SUM(LENGTH(title) + LENGTH(body)) "
                                  "FROM texts").fetchone()
    print(f"manifest: {sizes['text'] / 1e6:.1f} MB with the text index, "
          f"{sizes['baseline'] / 1e6:.1f} MB without: the index takes "
          f"{(sizes['text'] - sizes['baseline']) / 1e6:.1f} MB for {pages} page texts "
          f"({chars / 1e6:.1f} M characters of text)")
    latency(archive, args.queries, args.seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--page-kb", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--baseline-venv", type=Path,
                        help="make (or reuse) the baseline's venv here")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--server", choices=("auto", "nginx", "sitesrv"), default="auto")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    return in_work_folder("text_cost", args.keep, lambda work: bench(args, work))


if __name__ == "__main__":
    sys.exit(main())
