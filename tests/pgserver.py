"""A real PostgreSQL server for tests: Debian's `postgresql` binaries, `initdb` into a
temporary folder, listening on 127.0.0.1 only (a free port) and on a socket in that folder,
trust authentication. Stopped by its postmaster's process id.

initdb and postgres refuse to run as root: when the tests run as root (CI), the server runs
as the `postgres` user the Debian package creates, in a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: how long a server may take to accept connections before the fixture gives up
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class PgServer:
    dsn_base: str  # postgresql://postgres@127.0.0.1:PORT
    port: int
    folder: Path
    pid: int  # the first postmaster's (a restart makes another: postmaster.proc.pid)
    postmaster: Any = field(default=None, compare=False, repr=False)

    def dsn(self, db: str = "postgres") -> str:
        return f"{self.dsn_base}/{db}"


def find_bin_dir() -> Path | None:
    """The folder of initdb/pg_ctl/postgres: $MIRROR_TEST_PG_BIN, else Debian's newest
    /usr/lib/postgresql/<v>/bin, else one on PATH."""
    if env := os.environ.get("MIRROR_TEST_PG_BIN"):
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def why_not() -> str | None:
    """None when a server can be started here; else the reason (for a skip)."""
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        return "no PostgreSQL server binaries (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def _run(args: list[str], ids: tuple[int, int] | None, **kw: object) -> subprocess.Popen[bytes]:
    def drop() -> None:
        if ids is not None:
            os.setgid(ids[1])
            os.setuid(ids[0])
    return subprocess.Popen(args, preexec_fn=drop if ids else None,  # noqa: PLW1509
                            env={**os.environ, "LC_ALL": "C.UTF-8"}, **kw)  # type: ignore[call-overload]


class Postmaster:
    """The server's process: started, stopped in a shutdown mode (as `pg_ctl stop -m`
    does: SIGINT for "fast", SIGQUIT for "immediate"), started again on the same port and
    data folder (a restart, as `pg_ctl restart -m MODE`)."""

    SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT, "smart": signal.SIGTERM}

    def __init__(self, argv: list[str], ids: tuple[int, int] | None, folder: Path,
                 port: int) -> None:
        self.argv, self.ids, self.folder, self.port = argv, ids, folder, port
        self.log = open(folder / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        proc = _run(self.argv, self.ids, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError("postgres exited: " + (self.folder / "server.log")
                                   .read_text(errors="replace")[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self._ready():
                    return proc
                time.sleep(0.05)
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError("postgres did not start within "
                                       f"{START_TIMEOUT:.0f} s") from None
                time.sleep(0.05)

    def _ready(self) -> bool:
        """The server takes a session (it accepts connections before it has recovered:
        "the database system is starting up")."""
        try:
            import psycopg
        except ImportError:  # no driver here: accepting is as far as can be told
            return True
        try:
            psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
                            connect_timeout=5).close()
        except psycopg.OperationalError:
            return False
        return True

    def stop(self, mode: str = "fast") -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(self.SIGNALS[mode])
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def start(self) -> None:
        """Start the server again after stop() (same port, same data folder)."""
        if self.proc.poll() is None:
            raise RuntimeError("the server is running already")
        self.proc = self._start()

    def restart(self, mode: str = "fast") -> float:
        """Stop in `mode` and start again; the seconds from the signal to accepting."""
        began = time.monotonic()
        self.stop(mode)
        self.proc = self._start()
        return time.monotonic() - began


@contextmanager
def pg_server(*, fsync: bool = False, durable_commit: bool | None = None
              ) -> Iterator[PgServer]:
    """Start a fresh server; stop it (by pid) and delete its folder on exit. `fsync=False`
    for tests (a crash of the machine is not what they test); the bench turns it on.
    `durable_commit` (default: as fsync) is synchronous_commit: a test that stops the
    server with -m immediate needs it on, or COMMITs already answered may be lost (the
    machine does not crash: fsync may stay off). The server is `.postmaster` (restart)."""
    reason = why_not()
    if reason:
        raise RuntimeError(reason)
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    ids = _as_server_user()
    folder = Path(tempfile.mkdtemp(prefix="mirror-pg-"))
    if ids:
        os.chown(folder, *ids)
    data = folder / "data"
    init = _run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                 "--auth=trust", "-E", "UTF8", "--no-sync"], ids,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = init.communicate(timeout=120)
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {err.decode(errors='replace')}")
    port = _free_port()
    sync = fsync if durable_commit is None else durable_commit
    argv = [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={folder}",
            "-c", f"fsync={'on' if fsync else 'off'}",
            "-c", f"synchronous_commit={'on' if sync else 'off'}",
            "-c", "full_page_writes=off" if not fsync else "full_page_writes=on",
            "-c", "max_connections=100"]
    postmaster: Postmaster | None = None
    try:
        postmaster = Postmaster(argv, ids, folder, port)
        yield PgServer(f"postgresql://postgres@127.0.0.1:{port}", port, folder,
                       postmaster.proc.pid, postmaster)
    finally:
        if postmaster is not None:
            postmaster.stop("fast")
            postmaster.log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _accepts(dsn: str) -> bool:
    """Whether the server takes a connection (not only listens)."""
    import psycopg  # the fleet extra

    try:
        psycopg.connect(dsn, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def create_database(server: PgServer, name: str) -> str:
    """A new empty database on the server; its DSN."""
    import psycopg  # the fleet extra

    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.dsn(name)
