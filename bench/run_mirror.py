"""Benchmark `mirror run` against a generated local site and print one table of numbers.

Steps: generate a site with bench/sitegen.py (or reuse --site DIR when it already holds the
same pages and seed), serve it with nginx when `nginx` is on PATH and no --latency is asked
for (else with `python -m mirror.demo.sitesrv`), write a site.toml, run `mirror run site.toml
--quiet` under /usr/bin/time -v, stop the server and count what it served and what the WARC
files hold.

Usage: python bench/run_mirror.py --pages 2000 [--latency 0.01] [--workers 16] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sitegen import DEFAULT_PAGE_KB, STATS_FILE, generate  # noqa: E402

SERVER_START_TIMEOUT = 15.0
SERVER_STOP_TIMEOUT = 10.0
SERVER_FILES = ("_redirects", STATS_FILE)  # in the site folder but not part of the site


class BenchError(Exception):
    """A failure with a message for the user; no traceback needed."""


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    base_url: str
    kind: str  # "nginx" or "sitesrv"
    log: Path  # one line per request, complete once the server has stopped


@dataclass
class Usage:
    wall: float
    user: float
    system: float
    max_rss_kb: int


# -- the site -------------------------------------------------------------------------------


def prepare_site(
    site: Path, pages: int, seed: int, page_kb: int = DEFAULT_PAGE_KB
) -> dict[str, int]:
    """Reuse a site generated earlier with the same parameters, else generate it."""
    marker = site / STATS_FILE
    if marker.is_file():
        saved = json.loads(marker.read_text())
        wanted = (pages, seed, page_kb)
        if (saved.get("pages"), saved.get("seed"), saved.get("page_kb", DEFAULT_PAGE_KB)) == wanted:
            print(f"reusing the site in {site}", file=sys.stderr)
            return dict(saved["stats"])
        raise BenchError(f"{site} holds a site generated with other parameters; remove it first")
    if site.exists() and any(site.iterdir()):
        raise BenchError(f"{site} is not empty and was not written by sitegen.py")
    started = time.perf_counter()
    stats = generate(site, pages, seed, page_kb)
    print(f"generated {pages} pages in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return stats


def read_redirects(site: Path) -> list[tuple[str, int, str]]:
    rules = []
    for line in (site / "_redirects").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            source, status, target = line.split()
            rules.append((source, int(status), target))
    return rules


# -- the server -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format timed '$msec "$request" $status';
    access_log {work}/access.log timed;
    client_body_temp_path {work}/tmp-body;
    proxy_temp_path {work}/tmp-proxy;
    fastcgi_temp_path {work}/tmp-fastcgi;
    uwsgi_temp_path {work}/tmp-uwsgi;
    scgi_temp_path {work}/tmp-scgi;
    types {{
        text/html html; text/css css; text/javascript js; image/png png;
        image/svg+xml svg; image/x-icon ico; application/json json;
    }}
    default_type application/octet-stream;
    charset utf-8;
    sendfile on;
    log_not_found off;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
{locations}
        location / {{ }}
    }}
}}
"""


def start_nginx(nginx: str, site: Path, work: Path) -> Server:
    port = free_port()
    locations = [
        f"        location = {src} {{ return {status} {target}; }}"
        for src, status, target in read_redirects(site)
    ]
    locations += [f"        location = /{name} {{ return 404; }}" for name in SERVER_FILES]
    conf = work / "nginx.conf"
    # As root, nginx workers would run as "nobody", who cannot read a mkdtemp() folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf.write_text(
        NGINX_CONF.format(
            user=user, work=work, port=port, root=site.resolve(), locations="\n".join(locations)
        )
    )
    # -e: nginx >= 1.19.5 opens this error log before reading the config (not /var/log/nginx)
    cmd = [nginx, "-p", str(work), "-c", str(conf), "-e", str(work / "nginx-error.log")]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise BenchError(f"nginx exited with {proc.returncode}: {err.strip()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return Server(proc, base, "nginx", work / "access.log")
        except OSError:
            time.sleep(0.05)
    stop_server(Server(proc, base, "nginx", work / "access.log"))
    raise BenchError(f"nginx did not listen on port {port} within {SERVER_START_TIMEOUT:.0f} s")


def start_sitesrv(site: Path, work: Path, latency: float) -> Server:
    log = work / "requests.log"
    cmd = [sys.executable, "-m", "mirror.demo.sitesrv", str(site), "--port", "0"]
    cmd += ["--latency", str(latency), "--log", str(log)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    server = Server(proc, "", "sitesrv", log)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=SERVER_START_TIMEOUT)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not line.startswith("http://"):
        stop_server(server)
        raise BenchError(f"mirror.demo.sitesrv did not print its URL (exit code {proc.returncode})")
    server.base_url = line
    return server


def request_target(line: str) -> tuple[float, str]:
    """Time, METHOD and path of one request log line: nginx's `MSEC "GET /p HTTP/1.1" 200`
    (NGINX_CONF's log_format, wall-clock time) or sitesrv's `TIME GET /p` (monotonic)."""
    if '"' in line:
        method, target = line.split('"')[1].split()[:2]
    else:
        method, target = line.split()[1:3]
    return float(line.split()[0]), f"{method} {target}"


async def run_mirror_async(toml: Path, timeout: float = 900.0) -> int:
    """`mirror run -q TOML` in a process of its own, awaited from an event loop (one that
    serves the site under test); killed by its pid at the limit. Returns its exit code."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "-q", str(toml),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        return await asyncio.wait_for(proc.wait(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM (the process's own clean stop), SIGKILL if it does not exit in time; then
    its pipes are closed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def stop_server(server: Server) -> None:
    """Stop the server (on SIGTERM it writes its request log)."""
    stop_process(server.proc, SERVER_STOP_TIMEOUT)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process and its live children (Linux /proc)."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, IndexError, ValueError):
        return total
    return total + sum(process_cpu(int(child)) for child in children)


# -- the crawl ------------------------------------------------------------------------------


def mirror_command() -> list[str]:
    beside = Path(sys.executable).parent / "mirror"
    found = str(beside) if beside.is_file() else shutil.which("mirror")
    if found is None:
        raise BenchError("no `mirror` command: install the project (pip install -e .)")
    return [found]


def write_site_toml(work: Path, base_url: str, workers: int, per_host: int,
                    parse_processes: int = 1) -> Path:
    toml = work / "site.toml"
    toml.write_text(
        "[site]\n"
        'name = "bench"\n'
        f"start_urls = [{json.dumps(base_url + 'index.html')}]\n"
        f"output_dir = {json.dumps(str(work / 'archive'))}\n"
        "\n[crawl]\n"
        f"workers = {workers}\n"
        f"per_host = {per_host}\n"
        f"parse_processes = {parse_processes}\n",
        encoding="utf-8",
    )
    return toml


def run_mirror(toml: Path, work: Path, timeout: float) -> Usage:
    """Run `mirror run TOML --quiet` in a new process group; BenchError unless it exits 0."""
    time_file = work / "time.txt"
    cmd = mirror_command() + ["run", str(toml), "--quiet"]
    gnu_time = Path("/usr/bin/time")
    if gnu_time.is_file():
        cmd = [str(gnu_time), "-v", "-o", str(time_file)] + cmd
    output = work / "mirror-output.txt"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(output, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group holds /usr/bin/time and mirror
            proc.wait()
            raise BenchError(f"mirror run did not finish within {timeout:.0f} s") from None
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        tail = output.read_text(errors="replace").strip().splitlines()[-15:]
        detail = "\n  ".join(tail) or "(no output)"
        raise BenchError(f"mirror run exited with {code}; last lines of its output:\n  {detail}")
    if time_file.is_file():
        return parse_gnu_time(time_file.read_text(), wall)
    return Usage(
        wall,
        after.ru_utime - before.ru_utime,
        after.ru_stime - before.ru_stime,
        int(after.ru_maxrss),  # kB on Linux; the largest of all waited-for children
    )


def parse_gnu_time(text: str, wall: float) -> Usage:
    def number(label: str) -> float:
        match = re.search(rf"{re.escape(label)}: ([\d.]+)", text)
        if match is None:
            raise BenchError(f"/usr/bin/time -v output has no {label!r}")
        return float(match.group(1))

    return Usage(
        wall,
        number("User time (seconds)"),
        number("System time (seconds)"),
        int(number("Maximum resident set size (kbytes)")),
    )


def count_records(archive: Path) -> dict[str, int]:
    from warcio.archiveiterator import ArchiveIterator

    counts: dict[str, int] = {}
    files = sorted((archive / "warc").glob("*.warc.gz")) + sorted(archive.glob("**/*.warc"))
    for path in files:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                counts[record.rec_type] = counts.get(record.rec_type, 0) + 1
    counts["files"] = len(files)
    return counts


def count_lines(path: Path) -> int | None:
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# -- the report -----------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    stats: dict[str, int],
    server: Server,
    usage: Usage,
    served: int | None,
    server_cpu: float,
    records: dict[str, int],
) -> None:
    cpu = usage.user + usage.system
    requests = served if served is not None else stats["expected_fetches"]
    rows = [
        ("server", f"{server.kind}, latency {args.latency:g} s"),
        ("workers / per_host", f"{args.workers} / {args.per_host or args.workers}"),
        ("wall s", f"{usage.wall:.2f}"),
        ("CPU s (user+sys)", f"{cpu:.2f} ({usage.user:.2f} + {usage.system:.2f})"),
        ("CPU ms/request", f"{1000 * cpu / requests:.2f}" if requests else "-"),
        ("requests/s", f"{requests / usage.wall:.0f}" if usage.wall else "-"),
        ("peak RSS MB", f"{usage.max_rss_kb / 1024:.1f}"),
        ("requests served", "unknown" if served is None else str(served)),
        ("expected fetches", str(stats["expected_fetches"])),
        ("pages stored (response)", str(records.get("response", 0))),
        ("revisit records", str(records.get("revisit", 0))),
        ("WARC files", str(records.get("files", 0))),
        ("server CPU s", f"{server_cpu:.2f}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\nmirror run: {stats['pages']} pages, seed {args.seed}")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def add_site_arguments(parser: argparse.ArgumentParser) -> None:
    """--pages, --seed, --site and --latency: the generated site and how it is served."""
    parser.add_argument("--pages", type=int, default=2000, help="pages to generate (2000)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (0)")
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds added to every response (uses sitesrv)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_site_arguments(parser)
    parser.add_argument("--workers", type=int, default=16, help="[crawl] workers (16)")
    parser.add_argument("--per-host", type=int, help="[crawl] per_host (default: --workers)")
    parser.add_argument(
        "--server", choices=("auto", "nginx", "sitesrv"), default="auto", help="(auto)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds allowed for the crawl (1800)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder and archive")
    return parser.parse_args(argv)


def choose_server(args: argparse.Namespace) -> str | None:
    """The nginx executable to use, or None for sitesrv."""
    nginx = shutil.which("nginx")
    if args.server == "sitesrv" or (args.server == "auto" and (nginx is None or args.latency)):
        return None
    if nginx is None:
        raise BenchError("--server nginx: no nginx on PATH")
    if args.latency:
        raise BenchError("--latency needs --server sitesrv (nginx cannot delay responses)")
    return nginx


def bench(args: argparse.Namespace, work: Path) -> None:
    site = args.site.resolve() if args.site else work / "site"
    stats = prepare_site(site, args.pages, args.seed)
    nginx = choose_server(args)
    server = start_nginx(nginx, site, work) if nginx else start_sitesrv(site, work, args.latency)
    try:
        print(f"{server.kind} serving {site} at {server.base_url}", file=sys.stderr)
        toml = write_site_toml(work, server.base_url, args.workers, args.per_host or args.workers)
        usage = run_mirror(toml, work, args.timeout)
        server_cpu = process_cpu(server.proc.pid)
    finally:
        stop_server(server)
    records = count_records(work / "archive")
    report(args, stats, server, usage, count_lines(server.log), server_cpu, records)
    stored = records.get("response", 0) + records.get("revisit", 0)
    if stored < stats["expected_fetches"]:
        raise BenchError(
            f"only {stored} response/revisit records for {stats['expected_fetches']} expected"
            " fetches: see the server's logs in the work folder (run with --keep)"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body(work: Path) -> int:
        bench(args, work)
        return 0

    return in_work_folder("run_mirror", args.keep, body)


def in_work_folder(name: str, keep: bool, body: Callable[[Path], int]) -> int:
    """Run `body` in a new temporary folder, removed afterwards unless `keep`; a BenchError
    becomes its message and exit status 1. Shared by the bench scripts."""
    work = Path(tempfile.mkdtemp(prefix=f"mirror-{name}-"))
    try:
        return body(work)
    except BenchError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
