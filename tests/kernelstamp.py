"""The multi-host site of tests/multihost.py served by a raw HTTP/1.1 server that takes each
request's arrival time from the kernel, not from when a handler started: politeness is
proven against these stamps (tests/test_fleet_politeness.py, tests/test_shared_crawl.py).

Every socket has SO_TIMESTAMPNS on (set on the listening sockets, which accepted ones
inherit), and each read is a recvmsg() whose SCM_TIMESTAMPNS ancillary data is the time
the kernel received the data read (CLOCK_REALTIME, ns; for TCP, the last segment the read
consumed: a small GET is one segment). A request is stamped with the read that brought
its first bytes: a connection's first request with its first read, each later request of
a keep-alive connection with the read that began it. So a server left unscheduled for a
while on a busy machine stamps nothing late: `arrived` is when the bytes reached the
socket. `ended` is taken just before the response's last write (a lower bound of when the
answer was out: an overlap found with it is real).

    python tests/kernelstamp.py --pages 2000 --log LOG.json --ready READY.json

The same arguments, ready file and request log as tests/multihost.py (its fields, times in
time.time() seconds; `earliest` equals `arrived`, the stamp being exact), plus the field
`kernel`: whether the stamp came from the kernel (False only if a read had no stamp).
KernelStampHost is MultiHost with this server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from multihost import (  # noqa: E402
    HOSTS,
    ROBOTS,
    MultiHost,
    bind_same_port,
    page_host,
    page_path,
    page_url,
    render,
)

#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS; asm-generic, x86 and arm); Python's socket
#: module does not name it
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SCM_TIMESTAMPNS = getattr(socket, "SCM_TIMESTAMPNS", SO_TIMESTAMPNS)
_TIMESPEC = struct.Struct("qq")  # struct timespec: tv_sec, tv_nsec (64-bit)
ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
READ_SIZE = 65536
FIELDS = ["arrived", "ended", "arrived_wall", "ended_wall", "path", "user_agent", "worker",
          "peer_port", "earliest", "kernel"]


def kernel_stamp(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The SCM_TIMESTAMPNS of a recvmsg() (seconds since the epoch), None if it has none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec + nsec / 1e9
    return None


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(version, path, headers with lower-case names) of a request head."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    path, version = (parts[1], parts[2]) if len(parts) == 3 else ("/", "HTTP/1.0")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return version, path, headers


def response(status: int, body: bytes, content_type: str, keep: bool) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: {'keep-alive' if keep else 'close'}"
            "\r\n\r\n")
    return head.encode("latin-1") + body


class Connection:
    """One accepted connection: reads stamped by the kernel, requests answered in order."""

    def __init__(self, server: StampServer, sock: socket.socket, host: str) -> None:
        self.server, self.sock, self.host = server, sock, host
        self.buffer = b""
        #: [offset in buffer, the kernel's stamp] of each read still (partly) buffered
        self.reads: list[tuple[int, float | None]] = []
        self.peer = sock.getpeername()[1]
        self.writing = False

    def readable(self) -> None:
        try:
            data, ancillary, _flags, _addr = self.sock.recvmsg(READ_SIZE, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, ancillary = b"", []
        if not data:
            self.close()
            return
        self.reads.append((len(self.buffer), kernel_stamp(ancillary)))
        self.buffer += data
        if not self.writing:
            asyncio.ensure_future(self.answer())

    async def answer(self) -> None:
        self.writing = True
        try:
            while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
                stamp = self.reads[0][1]  # the read that brought the request's first byte
                head, self.buffer = self.buffer[:end], self.buffer[end + 4:]
                self.consumed(end + 4)
                kernel = stamp is not None
                arrived = stamp if stamp is not None else time.time()
                if not await self.one(head, arrived, kernel):
                    self.close()
                    return
        finally:
            self.writing = False

    def consumed(self, n: int) -> None:
        """`n` bytes of the buffer are used: the reads wholly in them are forgotten, the
        one they end in (if any bytes of it are left) begins the next request."""
        left = [(offset - n, stamp) for offset, stamp in self.reads]
        keep = [i for i, (offset, _) in enumerate(left) if offset <= 0]
        first = keep[-1] if keep else 0
        self.reads = [(max(offset, 0), stamp) for offset, stamp in left[first:]]
        if not self.buffer:
            self.reads = []

    async def one(self, head: bytes, arrived: float, kernel: bool) -> bool:
        """Answer one request; whether the connection stays open."""
        version, path, headers = parse_head(head)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        body = self.server.bodies.get((self.host, path))
        if path == "/robots.txt":
            data = response(200, ROBOTS, "text/plain", keep)
        elif body is not None:
            data = response(200, body, "text/html; charset=utf-8", keep)
        else:
            data = response(404, b"not found", "text/html", keep)
        ended = time.time()
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except OSError:
            return False
        self.server.log[self.host].append([
            arrived, ended, arrived, ended, path, headers.get("user-agent", ""),
            headers.get("x-mirror-worker", ""), self.peer, arrived, kernel])
        return keep

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.sock.fileno()) if self.sock.fileno() >= 0 else None
        self.server.conns.discard(self)
        self.sock.close()


class StampServer:
    """The site's pages on every host, each host a listening socket with SO_TIMESTAMPNS."""

    def __init__(self, pages: int, port: int, hosts: tuple[str, ...], seed: int) -> None:
        self.bodies = {(page_host(i, len(hosts)), page_path(i)): render(i, pages, port,
                                                                        len(hosts), seed)
                       for i in range(pages)}
        self.log: dict[str, list[list[Any]]] = {h: [] for h in hosts}
        self.conns: set[Connection] = set()

    def listen(self, sock: socket.socket, host: str) -> None:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # inherited by accepted ones
        asyncio.get_running_loop().add_reader(sock.fileno(), self.accept, sock, host)

    def accept(self, listening: socket.socket, host: str) -> None:
        try:
            sock, _ = listening.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self, sock, host)
        self.conns.add(conn)
        asyncio.get_running_loop().add_reader(sock.fileno(), conn.readable)

    def dump(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"fields": FIELDS, "hosts": self.log}), encoding="utf-8")
        os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    hosts = HOSTS[:args.hosts]
    socks = bind_same_port(hosts, args.port)
    port = socks[0].getsockname()[1]
    server = StampServer(args.pages, port, hosts, args.seed)
    for host, sock in zip(hosts, socks, strict=True):
        server.listen(sock, host)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.dump, args.log)
    ready = {"pid": os.getpid(), "port": port, "hosts": list(hosts),
             "start": page_url(0, port, len(hosts))}
    tmp = args.ready.with_name(args.ready.name + ".tmp")
    tmp.write_text(json.dumps(ready), encoding="utf-8")
    os.replace(tmp, args.ready)
    try:
        await stop.wait()
    finally:
        server.dump(args.log)
        for conn in list(server.conns):
            conn.close()
        for sock in socks:
            loop.remove_reader(sock.fileno())
            sock.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--hosts", type=int, default=len(HOSTS), choices=range(1, len(HOSTS) + 1))
    p.add_argument("--port", type=int, default=0, help="0: one free on every host")
    p.add_argument("--seed", type=int, default=0, help="of the same-host links")
    p.add_argument("--latency", type=float, default=0.0, help="not supported: must be 0")
    p.add_argument("--log", type=Path, required=True, help="request log (JSON) on exit")
    p.add_argument("--ready", type=Path, required=True, help="written once serving")
    args = p.parse_args(argv)
    if args.latency:
        p.error("--latency is not supported by the kernel-stamped server")
    asyncio.run(serve(args))
    return 0


class KernelStampHost(MultiHost):
    """MultiHost served by this module: request arrivals stamped by the kernel."""

    script = __file__


if __name__ == "__main__":
    sys.exit(main())
