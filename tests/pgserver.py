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
from dataclasses import dataclass
from pathlib import Path

#: how long a server may take to accept connections before the fixture gives up
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class PgServer:
    dsn_base: str  # postgresql://postgres@127.0.0.1:PORT
    port: int
    folder: Path
    pid: int

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


@contextmanager
def pg_server(*, fsync: bool = False) -> Iterator[PgServer]:
    """Start a fresh server; stop it (by pid) and delete its folder on exit. `fsync=False`
    for tests (a crash of the machine is not what they test); the bench turns it on."""
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
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed below
    server = _run([str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
                   "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={folder}",
                   "-c", f"fsync={'on' if fsync else 'off'}",
                   "-c", f"synchronous_commit={'on' if fsync else 'off'}",
                   "-c", "full_page_writes=off" if not fsync else "full_page_writes=on",
                   "-c", "max_connections=100"], ids,
                  stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if server.poll() is not None:
                raise RuntimeError("postgres exited: "
                                   + (folder / "server.log").read_text(errors="replace")[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
                if _accepts(f"postgresql://postgres@127.0.0.1:{port}"):
                    break  # listening is not enough: "the database system is starting up"
                raise OSError("starting up")
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("postgres did not start within "
                                       f"{START_TIMEOUT:.0f} s") from None
                time.sleep(0.05)
        yield PgServer(f"postgresql://postgres@127.0.0.1:{port}", port, folder, server.pid)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # "fast" shutdown
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
        log.close()
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
