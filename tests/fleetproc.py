"""The fleet as a user starts it, for tests: `mirror worker` processes (stopped by their
process id), site files with a store, and waits on what the fleet's database says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: fast fleet timing for tests: a worker is silent after 3 s, ticks every second
FAST = ("--stall-after", "3", "--tick", "1", "--poll", "0.3")


@dataclass
class WorkerProcess:
    """A running `mirror worker`; its output in `log`."""

    proc: subprocess.Popen[bytes]
    log: Path
    data: Path

    @classmethod
    def start(cls, dsn: str, data: Path, *extra: str, name: str = "",
              env: dict[str, str] | None = None) -> WorkerProcess:
        data.mkdir(parents=True, exist_ok=True)
        log = data.parent / f"{data.name}.log"
        argv = [sys.executable, "-m", "mirror", "worker", "--db", dsn, "--data", str(data),
                *FAST, *extra] + (["--name", name] if name else [])
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1",
                                         **(env or {})})
        return cls(proc, log, data)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a machine that dies."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (a graceful stop), SIGKILL after `timeout`; the exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


def until(predicate: Callable[[], Any], timeout: float, what: str,
          every: float = 0.1, workers: tuple[WorkerProcess, ...] = ()) -> Any:
    """Poll `predicate` until it is true; on time-out, fail saying `what` and the workers'
    output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    said = "\n".join(f"--- {w.log.name}\n{w.output()[-3000:]}" for w in workers)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{said}")


def query(dsn: str, sql: str, params: Any = None) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def runs(dsn: str, site: str | None = None) -> list[dict[str, Any]]:
    where = "WHERE site = %s" if site else ""
    return query(dsn, f"SELECT * FROM mirror_fleet_runs {where} ORDER BY id",
                 (site,) if site else None)


def jobs(dsn: str, status: str | None = None) -> list[dict[str, Any]]:
    where = "AND status = %s" if status else ""
    return query(dsn, "SELECT id, status::text AS status, worker_id, args, attempts FROM "
                      f"procrastinate_jobs WHERE task_name = 'mirror.fleet.run_site' {where} "
                      "ORDER BY id", (status,) if status else None)


def site_file(folder: Path, name: str, start: str, store: str, *,
              every: str = "daily 03:15", **crawl: Any) -> Path:
    """A fleet site file: robots off (the test sites have none), its archive in `store`."""
    lines = ["[site]", f'name = "{name}"', f'start_urls = ["{start}"]', "",
             "[scope]", "robots = false", "sitemaps = false", "", "[archive]",
             f'store = "{store}"']
    lines += [f"{k} = {v}" for k, v in crawl.pop("archive", {}).items()]
    lines += ["", "[crawl]"] + [f"{k} = {v}" for k, v in crawl.items()]
    if every:
        lines += ["", "[schedule]", f'every = "{every}"']
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def mirror(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`mirror ARGS` in a process of its own, its output captured."""
    return subprocess.run([sys.executable, "-m", "mirror", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ})
