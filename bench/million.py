"""A million pages on one machine (issue 36): one crawl of a generated site, killed with
SIGKILL at --kill-at pages and resumed, then what a person does with the finished run.

    PATH=/usr/sbin:$PATH python bench/million.py --site /tmp/site1m --work /tmp/million
    python bench/million.py --work /tmp/million --phases status,search,app,verify,export,wacz

Phases (each prints its figures as it ends, and adds them to WORK/million.json):
  crawl   bench/sitegen.py's site (--page-kb 2) served by nginx; `mirror run` with RSS
          sampled over its process group, SIGKILL to the whole group once the server has
          answered --kill-at page requests, then `mirror run` again to the end. Printed: the
          peak summed RSS of each run, wall and CPU, the resume's time from its start to its
          first request (from the server's log, in ms), and the time per page of every
          100,000 pages (pages: GETs of .html answered 200), the last over the first.
  status  `mirror status` wall time (median of 5 runs).
  search  for a set of words of the site (common, rare, prefix, phrase), in this process:
          the manifest's ranked hits as `mirror search SITE.toml` asks them, and the pages
          folded and counted as the app and `mirror search WORDS` ask them (a library
          holding the site); median and p95 of each; and both commands' wall time for one
          word.
  app     `mirror ui` on a library holding the site: time of GET / and of the site's page.
  verify, export, wacz
          `mirror verify`, `mirror export --to DIR`, `mirror export --wacz FILE`: wall, CPU
          and peak summed RSS; export's and wacz's output size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from app_speed import request as app_request  # noqa: E402
from app_speed import start_app, stop_app  # noqa: E402
from bigsite import disk_mb  # noqa: E402
from measure import Measured, ToolTimeout, run_measured, tail  # noqa: E402
from run_mirror import (  # noqa: E402
    BenchError,
    mirror_command,
    prepare_site,
    request_target,
    start_nginx,
    stop_server,
    write_site_toml,
)

PHASES = ("crawl", "status", "search", "app", "verify", "export", "wacz")
BUCKET = 100_000
QUERIES = ("garden", "harvest", "the", "mapmaker", "lighthouse", "gard*", "sea*",
           '"stone bridge"', "river AND market", "winter NOT summer", "keeper", "quiet")


class PageCounter:
    """Counts the pages the server has answered so far, reading its log as it grows."""

    def __init__(self, log: Path) -> None:
        self.log, self.offset, self.pages, self._rest = log, 0, 0, b""

    def __call__(self) -> int:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        self.offset += len(chunk)
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        self.pages += sum(1 for line in lines if is_page(line.decode(errors="replace")))
        return self.pages


def is_page(line: str) -> bool:
    parts = line.split('"')
    if len(parts) < 3:
        return False
    request, status = parts[1].split(), parts[2].split()
    return (len(request) > 1 and request[0] == "GET" and request[1].endswith(".html")
            and status[:1] == ["200"])


def page_times(log: Path) -> list[float]:
    """Wall-clock time of each page answered, in log order."""
    with open(log, encoding="utf-8", errors="replace") as f:
        return [float(line.split()[0]) for line in f if is_page(line)]


def curve(times: list[float], gaps: list[tuple[float, float]], bucket: int = BUCKET
          ) -> list[dict[str, float]]:
    """Seconds per `bucket` pages, each bucket's span less the downtime (gaps) inside it."""
    rows = []
    for start in range(0, len(times) - 1, bucket):
        end = min(start + bucket, len(times) - 1)
        span = times[end] - times[start]
        down = sum(max(0.0, min(b, times[end]) - max(a, times[start])) for a, b in gaps)
        rows.append({"first": start, "last": end, "seconds": span, "down": down,
                     "ms_per_page": 1000 * (span - down) / max(end - start, 1)})
    return rows


def show(measured: Measured) -> str:
    peak = max((kb for _, kb in measured.rss_samples), default=0) / 1024
    return (f"wall {measured.wall:.0f} s, CPU {measured.cpu:.0f} s, peak summed RSS {peak:.1f} MB"
            f" (sampled), bound of the processes alive together {measured.together_kb / 1024:.1f}"
            f" MB, largest process {measured.max_rss_kb / 1024:.1f} MB")


def figures(measured: Measured) -> dict[str, float]:
    return {"wall": measured.wall, "cpu": measured.cpu, "code": measured.code,
            "peak_sampled_mb": max((kb for _, kb in measured.rss_samples), default=0) / 1024,
            "together_mb": measured.together_kb / 1024, "largest_mb": measured.max_rss_kb / 1024}


def measured_mirror(args: argparse.Namespace, work: Path, name: str, words: list[str],
                    **kw: object) -> Measured:
    output = work / f"{name}.out"
    try:
        measured = run_measured(mirror_command() + words, output=output, timeout=args.timeout,
                                cwd=work, sample_rss=True, **kw)  # type: ignore[arg-type]
    except ToolTimeout:
        raise BenchError(f"{name}: not done within {args.timeout:.0f} s") from None
    if measured.code not in (0, -9):
        raise BenchError(f"{name} exited with {measured.code}; its output ends:\n  "
                         f"{tail(output)}")
    return measured


# -- phases ---------------------------------------------------------------------------------


def crawl(args: argparse.Namespace, work: Path) -> dict[str, object]:
    if (work / "archive").exists():
        raise BenchError(f"{work / 'archive'} exists: use a new --work, or other --phases")
    stats = prepare_site(args.site.resolve(), args.pages, 0, 2)
    print(f"site: {stats['pages']} pages, {stats['expected_fetches']} expected fetches")
    server = start_nginx(shutil.which("nginx") or "nginx", args.site.resolve(), work)
    try:
        toml = write_site_toml(work, server.base_url, args.workers, args.workers)
        counter = PageCounter(server.log)
        first = measured_mirror(args, work, "run1", ["run", str(toml), "--quiet"],
                                kill_when=lambda: counter() >= args.kill_at)
        killed_at = time.time()
        print(f"run 1 (SIGKILL at {counter.pages} pages, exit {first.code}): {show(first)}",
              flush=True)
        served = server.log.stat().st_size
        resumed_at = time.time()
        second = measured_mirror(args, work, "run2", ["run", str(toml), "--quiet"])
        print(f"run 2 (resumed, exit {second.code}): {show(second)}")
    finally:
        stop_server(server)
    with open(server.log, "rb") as f:
        f.seek(served)
        line = f.readline().decode(errors="replace")
    first_new = request_target(line)[0] if line.strip() else float("nan")
    times = page_times(server.log)
    rows = curve(times, [(killed_at, first_new)], args.bucket)
    resume_ms = 1000 * (first_new - resumed_at)
    requests = sum(1 for _ in open(server.log, "rb"))
    print(f"resume: first request {resume_ms:.0f} ms after `mirror run` started"
          f" (killed at {killed_at:.3f}, restarted {resumed_at - killed_at:.1f} s later)")
    print(f"pages {len(times)}, requests {requests}, archive {disk_mb(work / 'archive'):.0f} MB"
          f" ({1e6 * disk_mb(work / 'archive') / max(len(times), 1) / 1e3:.2f} KB per page)")
    print("| pages | seconds | of which down | ms per page |\n|--:|--:|--:|--:|")
    for row in rows:
        print(f"| {row['first']:,}-{row['last']:,} | {row['seconds']:.1f} | {row['down']:.1f}"
              f" | {row['ms_per_page']:.3f} |")
    full = [row for row in rows if row["last"] - row["first"] == args.bucket]
    ratio = full[-1]["ms_per_page"] / full[0]["ms_per_page"] if full else float("nan")
    print(f"last full {args.bucket:,} pages over the first: {ratio:.2f}x (target at most 1.2x)")
    return {"run1": figures(first), "run2": figures(second), "killed_pages": counter.pages,
            "resume_ms": resume_ms, "pages": len(times), "requests": requests,
            "archive_mb": disk_mb(work / "archive"), "curve": rows, "ratio": ratio}


def status(args: argparse.Namespace, work: Path) -> dict[str, object]:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(mirror_command() + ["status", "site.toml"], cwd=work, check=True,
                       capture_output=True, timeout=args.timeout)
        times.append(time.perf_counter() - started)
    print(f"mirror status: median {1000 * statistics.median(times):.0f} ms"
          f" ({', '.join(f'{1000 * t:.0f}' for t in times)})")
    return {"ms": [1000 * t for t in times]}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def search(args: argparse.Namespace, work: Path) -> dict[str, object]:
    sys.path.insert(0, str(BENCH.parent))
    from mirror.app.library import Library
    from mirror.app.search import search_library
    from mirror.manifest.reader import ManifestReader

    library = work / "library"
    library.mkdir(exist_ok=True)
    shutil.copy(work / "site.toml", library / "bench.toml")
    entries = Library(library).sites()
    reader = ManifestReader(work / "archive" / "manifest.sqlite3")
    took: dict[str, list[float]] = {}
    pages: dict[str, list[float]] = {}
    try:
        for _ in range(3):
            for query in QUERIES:
                started = time.perf_counter()
                hits = reader.texts.search(query, limit=20)
                took.setdefault(query, []).append(1000 * (time.perf_counter() - started))
                started = time.perf_counter()
                search_library(entries, query)
                pages.setdefault(query, []).append(1000 * (time.perf_counter() - started))
                if not hits and query not in ("lighthouse",):
                    print(f"  (no hit for {query})")
    finally:
        reader.close()
    every = [t for ts in took.values() for t in ts]
    folded = [t for ts in pages.values() for t in ts]
    print(f"  {'query':22s} {'ranked':>9s} {'pages':>9s}")
    for query, ts in took.items():
        print(f"  {query:22s} {statistics.median(ts):6.1f} ms "
              f"{statistics.median(pages[query]):6.1f} ms")
    cli = {}
    for how, words in (("site", ["site.toml", "garden"]), ("library", ["garden"])):
        started = time.perf_counter()
        subprocess.run(mirror_command() + ["search", *words], cwd=work, check=True,
                       capture_output=True, timeout=args.timeout,
                       env={**os.environ, "MIRROR_LIBRARY": str(library)})
        cli[how] = 1000 * (time.perf_counter() - started)
    print(f"search (ranked hits, as `mirror search SITE.toml`): {len(every)} queries, median "
          f"{statistics.median(every):.1f} ms, p95 {p95(every):.1f} ms (target under 100)")
    print(f"search (pages folded and counted, as the app and `mirror search WORDS`): median "
          f"{statistics.median(folded):.1f} ms, p95 {p95(folded):.1f} ms")
    print(f"`mirror search site.toml garden` {cli['site']:.0f} ms wall, `mirror search garden`"
          f" (the library) {cli['library']:.0f} ms wall")
    return {"median_ms": statistics.median(every), "p95_ms": p95(every),
            "pages_median_ms": statistics.median(folded), "pages_p95_ms": p95(folded),
            "cli_ms": cli["site"], "cli_library_ms": cli["library"], "by_query": took,
            "pages_by_query": pages}


def app(args: argparse.Namespace, work: Path) -> dict[str, object]:
    library = work / "library"
    library.mkdir(exist_ok=True)
    shutil.copy(work / "site.toml", library / "bench.toml")
    handle = start_app(library, work / "app.err")
    home: list[float] = []
    site: list[float] = []
    try:
        for _ in range(5):
            for path, into in (("/", home), ("/site/bench", site)):
                started = time.perf_counter()
                code, _, body = app_request(handle, "GET", path)
                into.append(1000 * (time.perf_counter() - started))
                if code != 200 or b"bench" not in body:
                    raise BenchError(f"GET {path} answered {code}")
    finally:
        stop_app(handle)
    print(f"app: GET / first {home[0]:.0f} ms, median {statistics.median(home):.0f} ms;"
          f" GET /site/bench first {site[0]:.0f} ms, median {statistics.median(site):.0f} ms")
    return {"home_ms": home, "site_ms": site}


def tool(args: argparse.Namespace, work: Path, name: str, words: list[str],
         out: Path | None) -> dict[str, object]:
    """One command over the finished run, with its own temporary folder ($TMPDIR), whose
    largest size is sampled with the RSS: where the scratch tables go."""
    if out is not None and out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    tmp = work / f"tmp-{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    largest = [0.0]

    def sample_tmp() -> bool:
        largest[0] = max(largest[0], open_under(tmp))
        return False

    measured = measured_mirror(args, work, name, words, kill_when=sample_tmp,
                               env={**os.environ, "TMPDIR": str(tmp)})
    size = disk_mb(out) if out is not None and out.is_dir() else (
        out.stat().st_size / 1e6 if out is not None else 0.0)
    last = (work / f"{name}.out").read_text(errors="replace").strip().splitlines()[-1:]
    print(f"{name}: {show(measured)}" + (f", output {size:.0f} MB" if out else "")
          + f", temporary files at most {largest[0]:.0f} MB; says: {last[0] if last else ''}")
    return {**figures(measured), "output_mb": size, "tmp_mb": largest[0]}


def open_under(folder: Path) -> float:
    """MB of the files any process holds open under `folder`, deleted ones included (SQLite
    unlinks its temporary files as it opens them)."""
    total, prefix = 0, str(folder) + os.sep
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit():
            continue
        try:
            fds = list(os.scandir(f"/proc/{proc.name}/fd"))
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd.path).startswith(prefix):
                    total += os.stat(fd.path).st_blocks * 512
            except OSError:
                continue
    return total / 1e6


def run_phase(args: argparse.Namespace, work: Path, phase: str) -> dict[str, object]:
    if phase == "crawl":
        return crawl(args, work)
    if phase == "status":
        return status(args, work)
    if phase == "search":
        return search(args, work)
    if phase == "app":
        return app(args, work)
    if phase == "verify":
        return tool(args, work, "verify", ["verify", "site.toml"], None)
    if phase == "export":
        return tool(args, work, "export", ["export", "site.toml", "--to", "export"],
                    work / "export")
    return tool(args, work, "wacz", ["export", "site.toml", "--wacz", "bench.wacz"],
                work / "bench.wacz")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True,
                        help="folder for the server's log, the archive and the figures (kept)")
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--pages", type=int, default=1_000_000, help="pages (1000000)")
    parser.add_argument("--kill-at", type=int, default=900_000, help="SIGKILL at (900000)")
    parser.add_argument("--bucket", type=int, default=BUCKET, help="pages per curve row")
    parser.add_argument("--workers", type=int, default=16, help="workers and per_host (16)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="per command (s)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated, of {','.join(PHASES)} (all)")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := [p for p in phases if p not in PHASES]:
        parser.error(f"--phases: unknown {', '.join(unknown)}; expected some of {PHASES}")
    if "crawl" in phases and args.site is None:
        parser.error("the crawl phase needs --site DIR")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    saved = work / "million.json"
    results = json.loads(saved.read_text()) if saved.is_file() else {}
    try:
        for phase in phases:
            print(f"== {phase} ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f})",
                  flush=True)
            results[phase] = run_phase(args, work, phase)
            saved.write_text(json.dumps(results, indent=1) + "\n")
    except BenchError as exc:
        print(f"million: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
