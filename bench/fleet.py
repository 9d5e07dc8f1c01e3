"""A local test fleet: PostgreSQL (Debian's, initdb into a temp folder), an S3 server (moto,
or SeaweedFS with --seaweed), generated sites served on loopback, and `mirror worker`
processes, all on 127.0.0.1 and stopped by their process ids.

    python bench/fleet.py                  # up until Ctrl-C, with `mirror ui --db` open
    python bench/fleet.py --measure        # kill the worker running a run; print how long
                                           # until another resumes it and what was refetched

--measure prints, for one site run taken over: seconds from the SIGKILL until the fleet
declared the run lost, until another worker started it, and until it finished; captures
restored from the checkpoint and URLs fetched twice. Needs the test and fleet extras.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]

from run_mirror import start_sitesrv, stop_server  # noqa: E402
from sitegen import generate  # noqa: E402


def _mirror(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "mirror", *args], capture_output=True,
                          text=True, timeout=120)
    if done.returncode not in (0, 75):
        raise SystemExit(f"mirror {' '.join(args)}: {done.stdout}{done.stderr}")
    return done


def _rows(dsn: str, sql: str, params: Any = None) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def _site_file(lib: Path, name: str, base: str, store: str, warc_kb: int) -> Path:
    path = lib / f"{name}.toml"
    path.write_text(f'[site]\nname = "{name}"\nstart_urls = ["{base}index.html"]\n\n'
                    "[scope]\nrobots = false\n\n[crawl]\nper_host = 2\n\n"
                    f'[archive]\nstore = "{store}"\nwarc_max_bytes = {warc_kb * 1024}\n\n'
                    '[schedule]\nevery = "hourly"\n', encoding="utf-8")
    return path


class Worker:
    def __init__(self, dsn: str, data: Path, timing: list[str]) -> None:
        self.log = data.with_suffix(".log")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mirror", "worker", "--db", dsn, "--data", str(data),
                 *timing], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _until(what: str, predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measure", action="store_true", help="time a takeover, then stop")
    p.add_argument("--sites", type=int, default=3, help="sites (3; 1 with --measure)")
    p.add_argument("--pages", type=int, default=300, help="pages per site (300)")
    p.add_argument("--latency", type=float, default=0.1, help="seconds per response (0.1)")
    p.add_argument("--kill-after", type=float, default=8.0,
                   help="--measure: seconds into the run at which its worker is killed (8)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--warc-kb", type=int, default=64, help="WARC rotation size (64 KB)")
    p.add_argument("--stall-after", default="30")
    p.add_argument("--tick", default="60")
    p.add_argument("--seaweed", action="store_true", help="SeaweedFS instead of moto")
    args = p.parse_args(argv)
    # SIGTERM stops everything as Ctrl-C does (the ExitStack stops each piece by its pid)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    import pgserver
    import s3server

    timing = ["--stall-after", args.stall_after, "--tick", args.tick, "--poll", "1"]
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-")))
        dsn = pgserver.create_database(stack.enter_context(pgserver.pg_server()), "fleet")
        s3 = stack.enter_context(s3server.seaweed_s3(work) if args.seaweed
                                 else s3server.moto_s3())
        os.environ.update(s3.env)
        bucket = s3.make_bucket("fleet")
        generate(work / "site", args.pages, 0, 2)
        site = start_sitesrv(work / "site", work, args.latency)
        stack.callback(stop_server, site)
        lib = work / "library"
        lib.mkdir()
        count = 1 if args.measure else args.sites
        files = [_site_file(lib, f"site{i}", site.base_url, f"{bucket}/site{i}", args.warc_kb)
                 for i in range(count)]
        _mirror("schedule", "apply", str(lib), "--db", dsn)
        workers = [Worker(dsn, work / f"w{i}", timing) for i in range(args.workers)]
        for w in workers:
            stack.callback(w.stop)
        for path in files:
            _mirror("schedule", "run-now", str(path), "--db", dsn)
        if args.measure:
            return _measure(dsn, workers, site, args)
        print(f"fleet database: {dsn}\nS3: {s3.endpoint} ({bucket})\nlibrary: {lib}\n"
              f"workers' logs: {', '.join(str(w.log) for w in workers)}\n"
              "mirror ui --db opens; Ctrl-C stops everything", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "mirror", "ui", str(lib), "--db", dsn])
        except KeyboardInterrupt:
            pass
    return 0


def _measure(dsn: str, workers: list[Worker], site: Any, args: argparse.Namespace) -> int:
    started = _until("the run to start", lambda: next(
        (r for r in _rows(dsn, "SELECT * FROM mirror_fleet_runs") if r["state"] == "running"),
        None), 600)
    time.sleep(max(started["started_at"].timestamp() + args.kill_after - time.time(), 0))
    first = _rows(dsn, "SELECT * FROM mirror_fleet_runs WHERE id = %s", (started["id"],))[0]
    if first["state"] != "running":
        raise SystemExit("the run ended before --kill-after: give it more --pages or --latency")
    pid = _rows(dsn, "SELECT pid FROM mirror_fleet_workers WHERE worker_id = %s",
                (first["worker_id"],))[0]["pid"]
    victim = next(w for w in workers if w.proc.pid == pid)
    killed = time.time()
    victim.stop(kill=True)
    lost = _until("the run to be declared lost", lambda: next(
        (r for r in _rows(dsn, "SELECT * FROM mirror_fleet_runs WHERE state = 'lost'")), None),
        600)
    second = _until("another worker to finish it", lambda: next(
        (r for r in _rows(dsn, "SELECT * FROM mirror_fleet_runs WHERE attempt = 2 AND "
                               "finished_at IS NOT NULL")), None), 900)
    for w in workers:
        w.stop()
    stop_server(site)  # it writes its request log as it stops
    from run_mirror import request_target

    fetched = Counter(request_target(line)[1] for line in site.log.read_text().splitlines()
                      if line.strip())
    print(f"stall-after {args.stall_after} s, tick {args.tick} s, {args.pages} pages, "
          f"WARC files of {args.warc_kb} KB")
    print(f"  declared lost   {lost['finished_at'].timestamp() - killed:6.1f} s after SIGKILL")
    print(f"  resumed         {second['started_at'].timestamp() - killed:6.1f} s after SIGKILL"
          f" ({second['restored']['captures']} captures restored; "
          f"{(first['progress'] or {}).get('done', '?')} done at the last heartbeat)")
    print(f"  finished        {second['finished_at'].timestamp() - killed:6.1f} s after SIGKILL"
          f" ({second['state']}, exit {second['exit_code']})")
    print(f"  fetched twice   {sum(n - 1 for n in fetched.values())} URLs")
    return 0 if second["state"] == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())
