"""A site of N pages on 8 loopback hosts (127.0.0.2 ... 127.0.0.9), each address its own
aiohttp server on the same port, for the shared-crawl test and bench (several `mirror run
--db` workers on one crawl), and what they read back: the workers' host-lease log lines,
the WARC objects in the store, the manifest in PostgreSQL. Run the site as a process of
its own, stopped by its process id:

    python tests/multihost.py --pages 2000 --log LOG.json --ready READY.json

READY.json is written once every host listens: {"pid", "port", "hosts", "start"}. The
request log (every request to every host: arrival and end, time.monotonic() and
time.time(), path, User-Agent, X-Mirror-Worker if sent, the client's port) is written to
LOG.json on SIGTERM or SIGINT (then the server exits) and on SIGUSR1 (it goes on); the
file is replaced atomically, so a reader never sees half of it.

The link graph is deterministic (pages(), links() and page_url() are importable): page i
is on host i % hosts, page 0 is "/" on the first host; page i links to 2i+1 and 2i+2 (a
binary tree: every page is reachable from the start URL within log2(N) links, on the
next hosts) and to four pages of its own host chosen by a seeded RNG, so each host has
links to itself and to the others. Each host serves robots.txt (allow all) and no
sitemap. Nothing links outside the 8 hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

#: the loopback addresses of the hosts (Linux routes all of 127.0.0.0/8 to lo)
HOSTS = tuple(f"127.0.0.{n}" for n in range(2, 10))
#: links of each page to pages of its own host (besides the two tree links)
SAME_HOST_LINKS = 4
#: filler per page, so that WARC files rotate after a few dozen pages
FILLER_WORDS = 120
#: seconds between the server's ticks (Site.ticker): the resolution of `earliest`
TICK = 0.001
ROBOTS = b"User-agent: *\nAllow: /\n"
WORDS = ("archive", "harbour", "lantern", "meadow", "quartz", "river", "saddle", "timber",
         "violet", "walnut", "yonder", "zephyr")


class _Accepted(asyncio.Protocol):
    """A connection's protocol (aiohttp's, whose attributes are slots) that notes the tick
    of its accept in `accepted` first."""

    def __init__(self, inner: asyncio.Protocol, accepted: dict[int, float],
                 tick: Callable[[], float]) -> None:
        self.inner, self.accepted, self.tick = inner, accepted, tick
        self.key = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.key = id(transport)
        self.accepted[self.key] = self.tick()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.accepted.pop(self.key, None)  # no request came: no stale entry for its id
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/page/{i}.html"


def page_host(i: int, hosts: int = len(HOSTS)) -> str:
    return HOSTS[i % hosts]


def page_url(i: int, port: int, hosts: int = len(HOSTS)) -> str:
    return f"http://{page_host(i, hosts)}:{port}{page_path(i)}"


def links(i: int, pages: int, hosts: int = len(HOSTS), seed: int = 0) -> list[int]:
    """The pages page `i` links to (deterministic for a seed), without repeats."""
    out = [c for c in (2 * i + 1, 2 * i + 2) if c < pages]
    rng = random.Random(seed * 1_000_003 + i)
    own = list(range(i % hosts, pages, hosts))  # the pages of i's host
    for _ in range(SAME_HOST_LINKS):
        j = rng.choice(own)
        if j != i and j not in out:
            out.append(j)
    return out


def pages(n: int, port: int, hosts: int = len(HOSTS)) -> Iterator[str]:
    """Every page URL of the site."""
    return (page_url(i, port, hosts) for i in range(n))


def render(i: int, pages: int, port: int, hosts: int, seed: int) -> bytes:
    rng = random.Random(-1 - i)
    filler = " ".join(rng.choice(WORDS) for _ in range(FILLER_WORDS))
    items = "".join(f'<li><a href="{page_url(j, port, hosts)}">page {j}</a></li>\n'
                    for j in links(i, pages, hosts, seed))
    return (f"<!doctype html>\n<html><head><title>Page {i}</title></head><body>\n"
            f"<h1>Page {i} on {page_host(i, hosts)}</h1>\n<p>{filler}</p>\n"
            f"<ul>\n{items}</ul>\n</body></html>\n").encode()


def bind_same_port(hosts: tuple[str, ...], port: int = 0, tries: int = 50) -> list[socket.socket]:
    """A listening socket on each host, all on one port (`port`, else a free one found by
    binding the first host to port 0 and trying that port on the others)."""
    for _ in range(tries if port == 0 else 1):
        socks: list[socket.socket] = []
        chosen = port
        try:
            for host in hosts:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, chosen))
                chosen = s.getsockname()[1]
                s.listen(128)
                s.setblocking(False)
            return socks
        except OSError:
            for s in socks:
                s.close()
            if port:
                raise
    raise OSError(f"no port free on all of {', '.join(hosts)} after {tries} tries")


class Site:
    """The pages of every host, pre-rendered, and the request log."""

    def __init__(self, pages: int, port: int, hosts: tuple[str, ...], seed: int,
                 latency: float) -> None:
        self.hosts, self.latency = hosts, latency
        self.bodies: dict[tuple[str, str], bytes] = {
            (page_host(i, len(hosts)), page_path(i)): render(i, pages, port, len(hosts), seed)
            for i in range(pages)}
        #: host -> [arrival, end, arrival (wall), end (wall), path, user agent, worker,
        #: peer port, earliest arrival]
        self.log: dict[str, list[list[Any]]] = {h: [] for h in hosts}
        #: time.monotonic() of the event loop's last tick (see ticker)
        self.tick = time.monotonic()
        #: id(transport) -> the tick when its connection was accepted, until its first
        #: request is handled (see accepting)
        self.accepted: dict[int, float] = {}

    async def ticker(self) -> None:
        """Notes the time every TICK seconds: a request handled at `arrived` reached this
        process after the tick before (when the loop last looked), so its arrival is known
        within [tick, arrived] even when this process was not scheduled for a while (a
        busy 2-core machine) or its loop was busy with another request."""
        while True:
            self.tick = time.monotonic()
            await asyncio.sleep(TICK)

    def accepting(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A connection's protocol factory that notes the tick when each connection is
        accepted. A connection's first request reaches the handler some loop turns after
        its bytes arrived (accept, then read, then the handler's task), so its earliest
        arrival is the tick before the accept, not the one before the handler."""
        return lambda: _Accepted(make(), self.accepted, lambda: self.tick)

    def app(self, host: str) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            arrived, arrived_wall = time.monotonic(), time.time()
            earliest = self.accepted.pop(id(request.transport), self.tick)
            if self.latency:
                await asyncio.sleep(self.latency)
            path = request.path_qs
            if path == "/robots.txt":
                resp = web.Response(body=ROBOTS, content_type="text/plain")
            elif (body := self.bodies.get((host, path))) is not None:
                resp = web.Response(body=body, content_type="text/html", charset="utf-8")
            else:
                resp = web.Response(status=404, text="not found", content_type="text/html")
            await resp.prepare(request)
            await resp.write_eof()
            peer = request.transport.get_extra_info("peername") if request.transport else None
            self.log[host].append([
                arrived, time.monotonic(), arrived_wall, time.time(), path,
                request.headers.get("User-Agent", ""),
                request.headers.get("X-Mirror-Worker", ""), peer[1] if peer else None,
                earliest])
            return resp

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        return app

    def dump(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"fields": ["arrived", "ended", "arrived_wall", "ended_wall",
                                              "path", "user_agent", "worker", "peer_port",
                                              "earliest"],
                                   "hosts": self.log}), encoding="utf-8")
        os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    hosts = HOSTS[:args.hosts]
    socks = bind_same_port(hosts, args.port)
    port = socks[0].getsockname()[1]
    site = Site(args.pages, port, hosts, args.seed, args.latency)
    runners = []
    servers = []
    loop = asyncio.get_running_loop()
    for host, sock in zip(hosts, socks, strict=True):
        runner = web.AppRunner(site.app(host), access_log=None, handle_signals=False)
        await runner.setup()
        assert runner.server is not None
        servers.append(await loop.create_server(site.accepting(runner.server), sock=sock))
        runners.append(runner)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, site.dump, args.log)
    ticking = asyncio.create_task(site.ticker())
    ready = {"pid": os.getpid(), "port": port, "hosts": list(hosts),
             "start": page_url(0, port, len(hosts))}
    tmp = args.ready.with_name(args.ready.name + ".tmp")
    tmp.write_text(json.dumps(ready), encoding="utf-8")
    os.replace(tmp, args.ready)
    try:
        await stop.wait()
    finally:
        ticking.cancel()
        site.dump(args.log)
        for server in servers:
            server.close()
        for runner in runners:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--hosts", type=int, default=len(HOSTS), choices=range(1, len(HOSTS) + 1))
    p.add_argument("--port", type=int, default=0, help="0: one free on every host")
    p.add_argument("--seed", type=int, default=0, help="of the same-host links")
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--log", type=Path, required=True, help="request log (JSON) on exit")
    p.add_argument("--ready", type=Path, required=True, help="written once serving")
    args = p.parse_args(argv)
    asyncio.run(serve(args))
    return 0


# -- for the test and the bench: the server as a process, and its log -------------------


class MultiHost:
    """`python tests/multihost.py` in a process of its own, stopped by its process id."""

    script = __file__  # the server's module (tests/kernelstamp.py: KernelStampHost)

    def __init__(self, folder: Path, pages: int, *, latency: float = 0.0, seed: int = 0,
                 hosts: int = len(HOSTS), timeout: float = 30.0) -> None:
        import subprocess

        folder.mkdir(parents=True, exist_ok=True)
        self.pages, self.nhosts = pages, hosts
        self.log_path, ready = folder / "requests.json", folder / "ready.json"
        ready.unlink(missing_ok=True)
        self.output = folder / "multihost.out"
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, self.script, "--pages", str(pages), "--hosts", str(hosts),
                 "--seed", str(seed), "--latency", str(latency), "--log", str(self.log_path),
                 "--ready", str(ready)], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("multihost did not start: "
                                   + self.output.read_text(errors="replace")[-2000:])
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        self.port: int = info["port"]
        self.hosts: list[str] = info["hosts"]
        self.start_url: str = info["start"]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def urls(self) -> list[str]:
        return list(pages(self.pages, self.port, self.nhosts))

    def stop(self) -> dict[str, list[dict[str, Any]]]:
        """SIGTERM (SIGKILL if it lingers); the request log, by host ({} if none)."""
        import subprocess

        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return read_log(self.log_path)

    def snapshot(self, timeout: float = 10.0) -> dict[str, list[dict[str, Any]]]:
        """The request log so far (SIGUSR1: the server writes it and goes on)."""
        before = self.log_path.stat().st_mtime_ns if self.log_path.exists() else 0
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_path.exists() and self.log_path.stat().st_mtime_ns != before:
                return read_log(self.log_path)
            time.sleep(0.02)
        raise TimeoutError("multihost did not write its log")


def read_log(path: Path) -> dict[str, list[dict[str, Any]]]:
    """host -> requests in arrival order, each a dict of the log's fields."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    names = data["fields"]
    return {host: sorted((dict(zip(names, row, strict=True)) for row in rows),
                         key=lambda r: r["arrived"])
            for host, rows in data["hosts"].items()}


def politeness(log: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per host: requests; the smallest gap between consecutive arrivals as stamped
    (seconds) and the smallest they can have been (`min_gap`: the later one's stamp less
    the earlier one's earliest possible arrival, see Site.ticker), with the pair's paths
    and stamps; and the largest overlap of one request with the next (seconds; > 0: two
    at once)."""
    out: dict[str, dict[str, Any]] = {}
    for host, reqs in log.items():
        stamped = min((b["arrived"] - a["arrived"] for a, b in zip(reqs, reqs[1:],
                                                                   strict=False)),
                      default=float("inf"))
        gaps = [(b["arrived"] - a["earliest"], a["path"], b["path"],
                 round(a["earliest"], 4), round(a["arrived"], 4), round(b["arrived"], 4))
                for a, b in zip(reqs, reqs[1:], strict=False)]
        ended = float("-inf")
        overlap, pair = 0.0, ("", "")
        last = ""
        for r in reqs:  # against the latest end of all earlier requests
            if ended - r["arrived"] > overlap:
                overlap, pair = ended - r["arrived"], (last, r["path"])
            if r["ended"] > ended:
                ended, last = r["ended"], r["path"]
        smallest = min(gaps, default=(float("inf"), "", ""))
        out[host] = {"requests": len(reqs), "min_gap": smallest[0], "min_gap_stamped": stamped,
                     "min_gap_at": smallest[1:], "max_overlap": overlap,
                     "overlap_paths": pair}
    return out


# -- the workers of a shared run -----------------------------------------------------------


def site_file(path: Path, start: str, hosts: list[str], store: str, *, name: str = "multi",
              delay: float = 0.05, workers: int | None = None, warc_kb: int = 100,
              timeout: float = 3, max_pages: int = 0) -> Path:
    """One worker's copy of the site file: the workers' copies differ in output_dir only
    (the folder beside the file). `workers`: [crawl] workers, the host slots a worker
    leases at most (None: the default); "" as `store`: none (a single-machine run);
    `max_pages`: [scope] max_pages, the run's page budget."""
    quoted = ", ".join(f'"{h}"' for h in hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    concurrency = f"workers = {workers}\n" if workers is not None else ""
    path.write_text(
        f'[site]\nname = "{name}"\nstart_urls = ["{start}"]\n'
        f'output_dir = "{path.parent / "archive"}"\n\n'
        f"[scope]\nhosts = [{quoted}]\nsitemaps = false\nmax_pages = {max_pages}\n\n"
        f"[crawl]\ndelay = {delay}\nper_host = 1\n{concurrency}timeout = {timeout}\n\n"
        f'[archive]\nstore = "{store}"\nwarc_max_bytes = {warc_kb * 1024}\n', encoding="utf-8")
    return path


class SharedWorker:
    """`mirror run SITE --db DSN --worker-id ID` started, killed and started again (same id,
    with --join) as a process of its own each time; its output (every incarnation's) in
    `out`, the moments it was killed in `kills` (time.time(), ms, once it was dead: the
    database's clock on this machine)."""

    def __init__(self, wid: str, site: Path, dsn: str, *extra: str) -> None:
        self.id, self.site, self.dsn, self.extra = wid, site, dsn, extra
        self.out = site.parent / f"{wid}.out"
        self.proc: Any = None
        self.kills: list[int] = []
        self.exits: list[int] = []  # exit codes of the incarnations that ended by themselves
        self.started: list[float] = []  # time.monotonic() of each start
        self.started_ms: list[int] = []  # time.time() of each start, ms
        self.killed: list[float] = []  # time.monotonic() of each kill (once dead)
        self._noted = False  # the current incarnation's end is accounted for

    @property
    def mirror_log(self) -> Path:
        return self.site.parent / "archive" / "mirror.log"

    def start(self, join: bool = False) -> None:
        import subprocess

        argv = [sys.executable, "-m", "mirror", "run", str(self.site), "--db", self.dsn,
                "--worker-id", self.id, *self.extra] + (["--join"] if join else [])
        with open(self.out, "ab") as out:
            out.write(f"--- {' '.join(argv[1:])}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._noted = False
        self.started.append(time.monotonic())
        self.started_ms.append(int(time.time() * 1000))

    def running(self) -> bool:
        if self.proc is None:
            return False
        code = self.proc.poll()
        if code is None:
            return True
        if not self._noted:
            self.exits.append(code)
            self._noted = True
        return False

    def kill(self) -> bool:
        """SIGKILL by process id; False when it had ended already."""
        if not self.running():
            return False
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._noted = True  # killed: not an exit of its own
        self.kills.append(int(time.time() * 1000))
        self.killed.append(time.monotonic())
        return True

    def stop(self) -> None:
        """For clean-up: SIGKILL if it still runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def output(self, tail: int = 3000) -> str:
        return self.out.read_text(errors="replace")[-tail:] if self.out.exists() else ""


# -- the host-lease log (logger mirror.crawl.sharedfrontier) ------------------------------

_LEASE_LINE = re.compile(r"mirror\.crawl\.sharedfrontier: (lease|renew|release) ((?:\w+=\S+ ?)+)$")


@dataclass
class Lease:
    """One lease of a host slot (site, slot, epoch) as the worker logged it."""

    site: str
    slot: int
    epoch: int
    owner: str
    taken: int | None = None
    until: int | None = None  # the last until logged (lease or renew)
    released: int | None = None
    renewals: int = 0

    def end(self, starts: list[int]) -> int:
        """When the holder stopped holding it: its release, else the earlier of the last
        `until` it logged (expiry) and the next start of a worker with the same id (which
        clears that id's leases at once: its earlier process was killed). `starts`: the
        owner's starts, time.time() in ms (the database's clock on this machine)."""
        if self.released is not None:
            return self.released
        later = [t for t in starts if self.taken is not None and t > self.taken]
        return min([self.until or 0, *later[:1]])


def read_leases(paths: list[Path]) -> dict[tuple[str, int], Lease]:
    """(site, epoch) -> Lease from the mirror.log files of the workers; epochs rise per
    site, so (site, epoch) names one lease."""
    leases: dict[tuple[str, int], Lease] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            m = _LEASE_LINE.search(line)
            if m is None:
                continue
            kv = dict(item.split("=", 1) for item in m[2].split())
            key = (kv["site"], int(kv["epoch"]))
            lease = leases.setdefault(key, Lease(kv["site"], int(kv["slot"]), int(kv["epoch"]),
                                                 kv["owner"]))
            if lease.owner != kv["owner"] or lease.slot != int(kv["slot"]):
                raise AssertionError(f"two owners or slots log epoch {key}: {line}")
            if m[1] == "lease":
                lease.taken = int(kv["taken"])
                lease.until = max(lease.until or 0, int(kv["until"]))
            elif m[1] == "renew":
                lease.renewals += 1
                lease.until = max(lease.until or 0, int(kv["until"]))
            else:
                lease.released = int(kv["at"])
    return leases


def lease_overlaps(leases: dict[tuple[str, int], Lease],
                   starts: dict[str, list[int]]) -> list[str]:
    """Every pair of leases of one (site, slot) whose [taken, end) intervals overlap."""
    by_slot: dict[tuple[str, int], list[Lease]] = {}
    problems = []
    for lease in leases.values():
        if lease.taken is None:
            problems.append(f"{lease}: renewed or released but its lease line is missing")
            continue
        by_slot.setdefault((lease.site, lease.slot), []).append(lease)
    for slot, held in by_slot.items():
        held.sort(key=lambda x: (x.taken or 0, x.epoch))
        for a, b in zip(held, held[1:], strict=False):
            if (b.taken or 0) < a.end(starts.get(a.owner, [])):
                problems.append(f"{slot}: epoch {a.epoch} ({a.owner}, {a.taken}.."
                                f"{a.end(starts.get(a.owner, []))}) overlaps epoch {b.epoch} "
                                f"({b.owner}, from {b.taken})")
            if b.epoch < a.epoch:
                problems.append(f"{slot}: epoch {b.epoch} taken after epoch {a.epoch}")
    return problems


# -- what is in the store, and in the shared manifest ----------------------------------------


@dataclass
class StoredRecord:
    key: str  # the object's key below the store's prefix (warc/NAME)
    type: str
    uri: str
    offset: int
    record_id: str


def read_store(store_url: str, into: Path) -> list[StoredRecord]:
    """Every record of every WARC object under `store_url`/warc/, the objects downloaded
    into the folder `into` (for warcio check)."""
    from warcio.archiveiterator import ArchiveIterator

    from mirror.store.objstore import open_store

    store = open_store(store_url)
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for key in sorted(store.list("warc/")):
        path = into / key.rsplit("/", 1)[-1]
        path.write_bytes(store.get_bytes(key))
        with open(path, "rb") as f:
            it = ArchiveIterator(f)
            for rec in it:
                out.append(StoredRecord(key, rec.rec_type,
                                        rec.rec_headers.get_header("WARC-Target-URI") or "",
                                        it.get_record_offset(),
                                        rec.rec_headers.get_header("WARC-Record-ID") or ""))
    return out


def query(dsn: str, sql: str, params: Any = None) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


if __name__ == "__main__":
    sys.exit(main())
