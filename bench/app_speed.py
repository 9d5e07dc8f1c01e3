"""Speed of `mirror ui` on a big library: start-up, the home screen, live updates, CPU cost.

Builds (once, cached in --work) a library of --sites site files whose archives are copies of
one crawl of a generated site of about 10,000 captures, then measures:

1. time to a usable home screen: from spawning `mirror ui LIB --no-browser --port 0` until
   GET / answers 200 with every site's row, over --repeat fresh app processes;
2. the home screen's time on one running app: the first GET / (cold caches), then --warm
   GETs, then --warm GETs with every site's reports/*.json touched before each (and with
   the reports folders touched too, which is what makes the app read the reports again);
3. the delay of live updates: a run of a --run-pages site served with --latency started
   through the app (POST /site/live/run), with /events?site=live read meanwhile: for each
   row event, its receive time minus the `updated` time of the progress.json it shows;
4. the CPU a run costs while an app watches it: `mirror run --quiet` of the same site at
   zero latency --cpu-runs times without an app, and as often with an app and an SSE client
   on /events, and the app's own CPU over each run.

Usage: python bench/app_speed.py [--quick] [--work DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from mirror.webapp import session_value

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Measured, ToolTimeout, run_measured, tail  # noqa: E402
from run_mirror import (  # noqa: E402
    BenchError,
    Server,
    mirror_command,
    prepare_site,
    process_cpu,
    start_nginx,
    start_sitesrv,
    stop_process,
    stop_server,
    write_site_toml,
)

NGINX = "/usr/sbin/nginx"
LIBRARY_VERSION = 2  # of the cached library's layout: another one is built again
APP_START_TIMEOUT = 60.0  # seconds for `mirror ui` to print its address
APP_STOP_TIMEOUT = 10.0
REQUEST_TIMEOUT = 120.0  # seconds for one request to the app
HOME_TIMEOUT = 300.0  # seconds from spawning the app to a complete home screen
COOKIE = "mirror_ui"
LIVE_ID = "live"  # the id (file name) of the site the runs crawl
CAPTURES_PER_PAGE = 1.38  # sitegen: expected fetches per page (assets, redirects, 404s, ...)
PROGRESS_TICK = 0.5  # `mirror run` rewrites progress.json this often (mirror/cli.py TICK)
#: the app prints its own name under localhost (m<hex>.localhost), which it alone answers to
ADDRESS = re.compile(r"open (http://([^/:]+):(\d+)/)\?token=(\S+)")
ROW = re.compile(rb'<tr id="site-')
IDLE_ROW = re.compile(rb'<tr id="site-[^"]*" class="site" data-state="idle"')
UPDATED = re.compile(r'data-updated="([0-9.]+)"')
STATE = re.compile(r'data-state="([^"]*)"')


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def p95(values: list[float]) -> float:
    """Nearest rank: the smallest value with at least 95% of the values at or below it."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms" if seconds == seconds else "-"


# -- the library ---------------------------------------------------------------------------


def start_server(site: Path, work: Path, latency: float) -> Server:
    """nginx when installed and no latency is asked for, else mirror.demo.sitesrv."""
    work.mkdir(parents=True, exist_ok=True)
    if latency == 0 and Path(NGINX).is_file():
        return start_nginx(NGINX, site, work)
    return start_sitesrv(site, work, latency)


def crawl_once(toml: Path, output: Path, timeout: float) -> Measured:
    """`mirror run TOML --quiet`, measured; BenchError unless it exits 0 in time."""
    try:
        measured = run_measured(mirror_command() + ["run", str(toml), "--quiet"],
                                output=output, timeout=timeout)
    except ToolTimeout:
        raise BenchError(f"mirror run {toml} did not finish within {timeout:.0f} s") from None
    if measured.code != 0:
        raise BenchError(f"mirror run {toml} exited with {measured.code}:\n  {tail(output)}")
    return measured


def site_file(path: Path, name: str, start_url: str, archive: Path,
              workers: int | None = None) -> Path:
    text = (f"[site]\nname = {json.dumps(name)}\nstart_urls = [{json.dumps(start_url)}]\n"
            f"output_dir = {json.dumps(str(archive.resolve()))}\n")
    if workers:
        text += f"\n[crawl]\nworkers = {workers}\nper_host = {workers}\n"
    path.write_text(text, encoding="utf-8")
    return path


def build_library(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The cached library of --sites copies of one archive; built when missing."""
    work: Path = args.work
    library = work / f"library-{args.sites}x{args.lib_pages}p-{args.page_kb}kb"
    marker = library / "_app_speed.json"
    wanted = {"sites": args.sites, "pages": args.lib_pages, "page_kb": args.page_kb,
              "version": LIBRARY_VERSION}
    if marker.is_file():
        saved = json.loads(marker.read_text())
        if {k: saved.get(k) for k in wanted} == wanted:
            say(f"reusing the library in {library}")
            return library, saved
    shutil.rmtree(library, ignore_errors=True)
    site = work / f"site-{args.lib_pages}p-{args.page_kb}kb"
    stats = prepare_site(site, args.lib_pages, 0, args.page_kb)
    crawl = work / "library-crawl"
    shutil.rmtree(crawl, ignore_errors=True)
    crawl.mkdir(parents=True)
    server = start_server(site, crawl, 0.0)
    try:
        say(f"crawling {site} ({stats['expected_fetches']} expected fetches) "
            f"with {server.kind} at {server.base_url}")
        toml = write_site_toml(crawl, server.base_url, args.lib_workers, args.lib_workers)
        measured = crawl_once(toml, crawl / "run.txt", args.timeout)
    finally:
        stop_server(server)
    report = json.loads((crawl / "archive" / "reports" / "1.json").read_text())
    say(f"crawled {report['captures']} captures in {measured.wall:.1f} s; "
        f"copying the archive {args.sites} times")
    started = time.perf_counter()
    archives = library / "archives"
    archives.mkdir(parents=True)
    for i in range(args.sites):
        sid = f"lib{i:02d}"
        shutil.copytree(crawl / "archive", archives / sid)
        site_file(library / f"{sid}.toml", sid,
                  f"{server.base_url}index.html", archives / sid)
    say(f"copied in {time.perf_counter() - started:.1f} s")
    saved = {**wanted, "captures": report["captures"], "crawl_wall": measured.wall,
             "archive_bytes": sum(p.stat().st_size for p in (crawl / "archive").rglob("*")
                                  if p.is_file())}
    marker.write_text(json.dumps(saved, indent=2) + "\n")
    shutil.rmtree(crawl, ignore_errors=True)
    return library, saved


def run_library(folder: Path, library: Path) -> Path:
    """A library of links to the cached site files, to which the live site is added (the
    cache stays as it was built)."""
    folder.mkdir(parents=True)
    for toml in sorted(library.glob("*.toml")):
        (folder / toml.name).symlink_to(toml)
    return folder


# -- the app -------------------------------------------------------------------------------


@dataclass
class App:
    proc: subprocess.Popen[bytes]
    port: int
    token: str
    spawned: float  # perf_counter() just before the spawn
    printed: float  # perf_counter() when its address was read
    host: str = "127.0.0.1"  # the name it answers to (reached on 127.0.0.1)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def cookie(self) -> str:
        """The access cookie a browser on 127.0.0.1 gets for the token (webapp)."""
        return f"{COOKIE}={session_value(self.token, '127.0.0.1')}"


def start_app(library: Path, stderr: Path) -> App:
    cmd = mirror_command() + ["ui", str(library), "--no-browser", "--port", "0"]
    with open(stderr, "ab") as err:
        spawned = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err)
    assert proc.stdout is not None
    deadline = spawned + APP_START_TIMEOUT
    text = b""  # read from the pipe itself: a buffered reader would hide lines from select
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.perf_counter()) > 0:
            if not sel.select(timeout=left):
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break  # it exited
            text += chunk
            match = ADDRESS.search(text.decode(errors="replace"))
            if match:
                return App(proc, int(match.group(3)), match.group(4), spawned,
                           time.perf_counter(), match.group(2))
    app = App(proc, 0, "", spawned, math.nan)
    stop_app(app)
    seen = text.decode(errors="replace").splitlines()
    shown = "\n  ".join(seen + tail(stderr).splitlines()) or "(no output)"
    raise BenchError(f"mirror ui printed no address within {APP_START_TIMEOUT:.0f} s:\n  {shown}")


def stop_app(app: App) -> None:
    stop_process(app.proc, APP_STOP_TIMEOUT)


def request(app: App, method: str, path: str, *, form: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with the app's cookie; redirects are not followed."""
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=REQUEST_TIMEOUT)
    sent = {"Host": f"{app.host}:{app.port}", "Cookie": app.cookie, **(headers or {})}
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def timed_home(app: App, sites: int) -> float:
    """Seconds for one GET / that shows every site; BenchError otherwise."""
    started = time.perf_counter()
    status, _, body = request(app, "GET", "/")
    took = time.perf_counter() - started
    rows, idle = len(ROW.findall(body)), len(IDLE_ROW.findall(body))
    if status != 200 or rows != sites or idle != sites:
        raise BenchError(f"GET / answered {status} with {rows} rows of {sites}, {idle} idle")
    return took


def csrf_token(app: App) -> str:
    status, _, body = request(app, "GET", "/")
    match = re.search(rb'<meta name="csrf" content="([^"]+)"', body)
    if status != 200 or match is None:
        raise BenchError(f"GET / answered {status} without a csrf meta tag")
    return match.group(1).decode()


@dataclass
class Event:
    received: float  # time.time() when its last byte arrived
    name: str
    data: dict[str, object]


@dataclass
class EventStream:
    """A client of the app's /events on its own thread (HTTP/1.0, so the body comes
    unchunked); it keeps every event with its time of arrival."""

    app: App
    path: str
    events: list[Event] = field(default_factory=list)
    error: str = ""

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._sock = socket.create_connection(("127.0.0.1", self.app.port),
                                              timeout=REQUEST_TIMEOUT)
        self._sock.sendall(f"GET {self.path} HTTP/1.0\r\nHost: {self.app.host}:{self.app.port}"
                           f"\r\nCookie: {self.app.cookie}\r\n\r\n".encode())
        self._sock.settimeout(0.2)  # how often the reader looks at the stop flag
        self._thread = threading.Thread(target=self._read, name="sse", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer, head = b"", True
        try:
            while not self._stop.is_set():
                try:
                    chunk = self._sock.recv(1 << 16)
                except TimeoutError:
                    continue
                if not chunk:
                    self.error = self.error or "the app closed the event stream"
                    return
                received = time.time()
                buffer += chunk
                if head:
                    if b"\r\n\r\n" not in buffer:
                        continue
                    status, buffer = buffer.split(b"\r\n\r\n", 1)
                    if b" 200 " not in status.split(b"\r\n", 1)[0]:
                        self.error = status.split(b"\r\n", 1)[0].decode(errors="replace")
                        return
                    head = False
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    name, data = "message", ""
                    for line in block.decode().splitlines():
                        if line.startswith("event: "):
                            name = line[7:]
                        elif line.startswith("data: "):
                            data += line[6:]
                    self.events.append(Event(received, name, json.loads(data or "{}")))
        except (OSError, ValueError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            if self.error or time.monotonic() > deadline:
                raise BenchError(f"{self.path}: {len(self.events)} events of {count} within "
                                 f"{timeout:.0f} s {self.error}")
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


def process_gone(pid: int) -> bool:
    """Whether pid has exited (gone, or a zombie its parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not process_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def end_process(pid: int) -> None:
    """A process the app started: SIGINT (a run's clean stop), then SIGKILL, by its pid."""
    for sig, grace in ((signal.SIGINT, 15.0), (signal.SIGKILL, 5.0)):
        if process_gone(pid):
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        wait_gone(pid, grace)


# -- the measurements ----------------------------------------------------------------------


def time_to_home(args: argparse.Namespace, library: Path, tmp: Path) -> dict[str, list[float]]:
    """Per fresh app: seconds to its printed address, to a complete home screen, and the
    first GET / alone."""
    out: dict[str, list[float]] = {"address": [], "home": [], "first_get": []}
    for i in range(args.repeat):
        app = start_app(library, tmp / "ui-stderr.txt")
        try:
            deadline = app.spawned + HOME_TIMEOUT
            while True:
                started = time.perf_counter()
                status, _, body = request(app, "GET", "/")
                ready = time.perf_counter()
                if status == 200 and len(IDLE_ROW.findall(body)) == args.sites:
                    break
                if ready > deadline:
                    raise BenchError(f"no complete home screen within {HOME_TIMEOUT:.0f} s "
                                     f"(last: {status}, {len(ROW.findall(body))} rows, "
                                     f"{len(IDLE_ROW.findall(body))} idle)")
                time.sleep(0.05)
        finally:
            stop_app(app)
        out["address"].append(app.printed - app.spawned)
        out["home"].append(ready - app.spawned)
        out["first_get"].append(ready - started)
        say(f"  app {i + 1}: address after {ms(out['address'][-1])}, home screen after "
            f"{ms(out['home'][-1])} (its GET {ms(out['first_get'][-1])})")
    return out


def touch(paths: list[Path]) -> None:
    stamp = time.time_ns()
    for path in paths:
        os.utime(path, ns=(stamp, stamp))


def home_times(args: argparse.Namespace, library: Path, tmp: Path) -> dict[str, list[float]]:
    """On one app: the cold GET /, warm ones, and warm ones after touching the reports."""
    reports = sorted((library / "archives").glob("*/reports/*.json"))
    folders = sorted({p.parent for p in reports})
    app = start_app(library, tmp / "ui-stderr.txt")
    try:
        out: dict[str, list[float]] = {"cold": [timed_home(app, args.sites)]}
        before = process_cpu(app.proc.pid)  # in clock ticks (10 ms): over all warm GETs
        out["warm"] = [timed_home(app, args.sites) for _ in range(args.warm)]
        out["cpu_warm"] = [(process_cpu(app.proc.pid) - before) / args.warm]
        out["touched_files"] = []
        for _ in range(args.warm):
            touch(reports)
            out["touched_files"].append(timed_home(app, args.sites))
        out["touched_folders"] = []
        for _ in range(args.warm):
            touch(reports + folders)
            out["touched_folders"].append(timed_home(app, args.sites))
    finally:
        stop_app(app)
    return out


def live_delay(args: argparse.Namespace, library: Path, site: Path, expected: int,
               tmp: Path) -> dict[str, object]:
    """A run started through the app; each row event's delay behind its progress.json."""
    folder = run_library(tmp / "live-library", library)
    server = start_server(site, tmp / "live-server", args.latency)
    archive = tmp / "live-archive"
    pid = None
    try:
        # the crawl settings a new site file has (16 workers, 4 per host): a longer run
        site_file(folder / f"{LIVE_ID}.toml", LIVE_ID, f"{server.base_url}index.html", archive)
        app = start_app(folder, tmp / "ui-stderr.txt")
        try:
            stream = EventStream(app, f"/events?site={LIVE_ID}")
            try:
                stream.wait_for(1, REQUEST_TIMEOUT)  # the row as it is before the run
                status, headers, body = request(
                    app, "POST", f"/site/{LIVE_ID}/run", form={"csrf": csrf_token(app)},
                    headers={"Origin": app.origin, "Referer": f"{app.origin}/site/{LIVE_ID}"})
                message = parse_qs(urlsplit(headers.get("Location", "")).query).get(
                    "message", [""])[0]
                found = re.search(r"pid (\d+)", message)
                if status != 303 or found is None:
                    raise BenchError(f"POST /site/{LIVE_ID}/run answered {status}: "
                                     f"{message or body[:300]!r}")
                pid = int(found.group(1))
                started = time.monotonic()
                say(f"  run started by the app (pid {pid}); {server.kind} latency "
                    f"{args.latency:g} s")
                if not wait_gone(pid, args.timeout):
                    raise BenchError(f"the run (pid {pid}) did not end within "
                                     f"{args.timeout:.0f} s")
                wall = time.monotonic() - started
                time.sleep(2 * PROGRESS_TICK + 0.5)  # the app's row after the run
            finally:
                stream.stop()
            if stream.error and not stream.events:
                raise BenchError(f"/events: {stream.error}")
        finally:
            stop_app(app)
    finally:
        if pid is not None:
            end_process(pid)
        stop_server(server)
    report_path = archive / "reports" / "1.json"
    if not report_path.is_file():
        raise BenchError(f"the run left no report; its output:\n  "
                         f"{tail(folder / '.mirror-ui' / f'{LIVE_ID}.out')}")
    report = json.loads(report_path.read_text())
    rows = [e for e in stream.events if e.name == "row"]
    delays, seen = [], set()
    for event in rows:
        found = UPDATED.search(str(event.data.get("html", "")))
        if found and found.group(1) not in seen:  # a row sent again with the same numbers
            seen.add(found.group(1))
            delays.append(event.received - float(found.group(1)))
    repeats = sum(1 for e in rows if UPDATED.search(str(e.data.get("html", "")))) - len(seen)
    states = [m.group(1) for e in rows if (m := STATE.search(str(e.data.get("html", ""))))]
    return {"delays": delays, "row_events": len(rows), "repeats": repeats, "wall": wall,
            "captures": report.get("captures"), "expected": expected,
            "exit_code": report.get("exit_code"), "states": _runs_of(states)}


def _runs_of(states: list[str]) -> str:
    """'never run > starting > running x40 > idle': the row's states in order."""
    out: list[list[object]] = []
    for state in states:
        if out and out[-1][0] == state:
            out[-1][1] = int(str(out[-1][1])) + 1
        else:
            out.append([state, 1])
    return " > ".join(f"{s}" + (f" x{n}" if n != 1 else "") for s, n in out)


def run_cpu(args: argparse.Namespace, library: Path, site: Path,
            tmp: Path) -> dict[str, list[float]]:
    """Each round: one run without an app, then one with an app and a client on /events."""
    folder = run_library(tmp / "cpu-library", library)
    server = start_server(site, tmp / "cpu-server", 0.0)
    out: dict[str, list[float]] = {k: [] for k in (
        "cpu_alone", "wall_alone", "cpu_watched", "wall_watched", "app_cpu", "app_idle")}
    say(f"  {server.kind} at {server.base_url}")
    try:
        for i in range(args.cpu_runs):
            toml = site_file(folder / f"{LIVE_ID}.toml", LIVE_ID, f"{server.base_url}index.html",
                             tmp / f"cpu-archive-{i}-alone", args.run_workers)
            alone = crawl_once(toml, tmp / f"cpu-run-{i}-alone.txt", args.timeout)
            out["cpu_alone"].append(alone.cpu)
            out["wall_alone"].append(alone.wall)
            toml = site_file(folder / f"{LIVE_ID}.toml", LIVE_ID, f"{server.base_url}index.html",
                             tmp / f"cpu-archive-{i}-watched", args.run_workers)
            app = start_app(folder, tmp / "ui-stderr.txt")
            try:
                stream = EventStream(app, "/events")
                try:
                    stream.wait_for(args.sites + 1, HOME_TIMEOUT)  # every row once
                    before = process_cpu(app.proc.pid)
                    time.sleep(args.idle_seconds)
                    idle = (process_cpu(app.proc.pid) - before) / args.idle_seconds
                    before = process_cpu(app.proc.pid)
                    watched = crawl_once(toml, tmp / f"cpu-run-{i}-watched.txt", args.timeout)
                    app_cpu = process_cpu(app.proc.pid) - before
                    if stream.error:
                        raise BenchError(f"/events: {stream.error}")
                finally:
                    stream.stop()
            finally:
                stop_app(app)
            out["cpu_watched"].append(watched.cpu)
            out["wall_watched"].append(watched.wall)
            out["app_cpu"].append(app_cpu)
            out["app_idle"].append(idle)
            say(f"  round {i + 1}: alone {alone.cpu:.2f} s CPU ({alone.wall:.2f} s wall); "
                f"watched {watched.cpu:.2f} s CPU ({watched.wall:.2f} s wall), app "
                f"{app_cpu:.2f} s CPU, idle app {100 * idle:.1f}% of a core")
    finally:
        stop_server(server)
    return out


# -- the whole -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="10 sites of ~1,000 captures, 300-page runs, fewer repeats")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "app_speed",
                        help="cache of generated sites and the library (%(default)s)")
    parser.add_argument("--sites", type=int, help="site files in the library (50)")
    parser.add_argument("--captures", type=int,
                        help="captures per archive of the library (10000); sets --lib-pages")
    parser.add_argument("--lib-pages", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--page-kb", type=int, default=1,
                        help="mean page size of the library's site (1)")
    parser.add_argument("--lib-workers", type=int, default=32,
                        help="workers of the library's one crawl (32)")
    parser.add_argument("--run-pages", type=int, help="pages of the site the runs crawl (2000)")
    parser.add_argument("--run-workers", type=int, default=16,
                        help="workers and per_host of those runs (16)")
    parser.add_argument("--latency", type=float, default=0.02,
                        help="server latency of the live run (0.02 s)")
    parser.add_argument("--repeat", type=int, help="fresh apps timed to the home screen (5)")
    parser.add_argument("--warm", type=int, help="warm GET / timed on one app (20)")
    parser.add_argument("--cpu-runs", type=int, help="runs with and without the app (3)")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="the watching app's idle CPU is measured this long (3)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed for one crawl (1800)")
    parser.add_argument("--keep", action="store_true", help="keep the per-run temporary folder")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {"sites": (50, 10), "captures": (10_000, 1000), "run_pages": (2000, 300),
                "repeat": (5, 3), "warm": (20, 10), "cpu_runs": (3, 2)}
    for name, (full, small) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    if args.lib_pages is None:
        args.lib_pages = max(1, round(args.captures / CAPTURES_PER_PAGE))
    args.work = args.work.resolve()
    return args


def table(rows: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, value in rows if value)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}" if value else f"{name}")


def bench(args: argparse.Namespace, tmp: Path) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    library, saved = build_library(args)
    run_site = args.work / f"site-{args.run_pages}p"
    run_stats = prepare_site(run_site, args.run_pages, 0)

    say(f"1/4 time to a usable home screen ({args.repeat} fresh apps)")
    start = time_to_home(args, library, tmp)
    say(f"2/4 home screen on one app (1 cold, {args.warm} warm, {args.warm} + "
        f"{args.warm} touched)")
    home = home_times(args, library, tmp)
    say(f"3/4 live update delay (a {args.run_pages}-page run started by the app)")
    live = live_delay(args, library, run_site, run_stats["expected_fetches"], tmp)
    say(f"4/4 CPU of a run watched by the app ({args.cpu_runs} rounds)")
    cpu = run_cpu(args, library, run_site, tmp)

    delays = live["delays"]
    assert isinstance(delays, list)
    print(f"\nmirror ui: a library of {args.sites} sites x {saved['captures']} captures "
          f"({saved['archive_bytes'] / 1e6:.0f} MB each); runs of {args.run_pages} pages "
          f"({run_stats['expected_fetches']} fetches), {args.run_workers} workers")
    table([
        (f"time to a usable home screen ({args.repeat} fresh apps)", ""),
        ("address printed, median", ms(median(start["address"]))),
        ("home screen complete, median / max",
         f"{ms(median(start['home']))} / {ms(max(start['home']))}"),
        ("  of which the first GET /, median", ms(median(start["first_get"]))),
        (f"home screen GET / on one app ({args.sites} rows)", ""),
        ("first (cold)", ms(home["cold"][0])),
        (f"warm x{args.warm}, median / p95",
         f"{ms(median(home['warm']))} / {ms(p95(home['warm']))}"),
        ("  app CPU per warm GET, mean", ms(home["cpu_warm"][0])),
        ("reports/*.json touched, median / p95",
         f"{ms(median(home['touched_files']))} / {ms(p95(home['touched_files']))}"),
        ("reports/ folders touched too, median / p95",
         f"{ms(median(home['touched_folders']))} / {ms(p95(home['touched_folders']))}"),
        (f"live update delay ({args.latency:g} s latency, default workers, started by POST "
         f"/site/{LIVE_ID}/run)", ""),
        ("delay, median / p95 / max",
         f"{ms(median(delays))} / {ms(p95(delays))} / {ms(max(delays, default=math.nan))}"),
        ("row events (distinct progress / repeats)",
         f"{live['row_events']} ({len(delays)} / {live['repeats']})"),
        ("progress.json writes expected (wall / 0.5 s)",
         f"~{float(str(live['wall'])) / PROGRESS_TICK:.0f} over {float(str(live['wall'])):.1f}"
         " s"),
        ("run: captures / expected fetches / exit",
         f"{live['captures']} / {live['expected']} / {live['exit_code']}"),
        ("row states", str(live["states"])),
        (f"CPU of `mirror run --quiet`, zero latency ({args.cpu_runs} runs each), median", ""),
        ("run alone: CPU s / wall s",
         f"{median(cpu['cpu_alone']):.2f} / {median(cpu['wall_alone']):.2f}"),
        ("run watched: CPU s / wall s",
         f"{median(cpu['cpu_watched']):.2f} / {median(cpu['wall_watched']):.2f}"),
        ("app CPU s over the watched run", f"{median(cpu['app_cpu']):.2f}"),
        ("app CPU idle, % of a core", f"{100 * median(cpu['app_idle']):.1f}"),
    ])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="mirror-app_speed-"))
    try:
        bench(args, tmp)
        return 0
    except BenchError as exc:
        print(f"app_speed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
