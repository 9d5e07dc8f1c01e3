"""A TCP proxy between a PostgreSQL client and its server (loopback) that cuts a connection
around a COMMIT: after forwarding the client's COMMIT and before forwarding the server's
answer (the transaction committed, the client cannot know), or before forwarding the COMMIT
(it never reaches the server). Which COMMITs: `every`-th one, `times` times at most.

The answer is cut once the server has said ReadyForQuery (the statement is over). A COMMIT
is seen in the client's bytes as a simple-query message ('Q', length, "COMMIT\\0")
or an extended-protocol Parse of it; the proxy does not otherwise read the protocol (the
server's SSL refusal, startup and the rest pass through unread). Stopped by close()."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

COMMIT = b"COMMIT\x00"
#: the server's ReadyForQuery message (its transaction status byte follows)
READY = b"Z\x00\x00\x00\x05"


@dataclass
class CommitCutter:
    """Which COMMITs are cut, and how: "answer" (after forwarding it) or "request".
    `after`: only a COMMIT that follows a message holding these bytes counts (a statement's
    text, as in its Parse or Query message: the COMMIT of its transaction)."""

    every: int = 1
    times: int = 1
    where: str = "answer"
    after: bytes = b""
    armed: bool = False
    seen: int = 0
    cut: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, data: bytes) -> bool:
        """Whether the client's message `data` is a COMMIT to cut."""
        with self.lock:
            if self.after and self.after in data:
                self.armed = True
            if COMMIT not in data or (self.after and not self.armed):
                return False
            self.armed = False
            self.seen += 1
            if self.cut < self.times and self.seen % self.every == 0:
                self.cut += 1
                return True
            return False


class CommitProxy:
    def __init__(self, upstream_port: int, cutter: CommitCutter) -> None:
        self.upstream, self.cutter = ("127.0.0.1", upstream_port), cutter
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, name="commit-proxy", daemon=True).start()

    def dsn(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._open += [client, server]
            doomed = threading.Event()  # the server's next bytes are not forwarded
            threading.Thread(target=self._up, args=(client, server, doomed),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, doomed),
                             daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket,
            doomed: threading.Event) -> None:
        """Client -> server; a COMMIT chosen by the cutter dooms the connection."""
        while data := _recv(client):
            if self.cutter.decide(data):
                if self.cutter.where == "request":
                    _close(client, server)
                    return
                doomed.set()
            try:
                server.sendall(data)
            except OSError:
                break
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket,
              doomed: threading.Event) -> None:
        """Server -> client; a doomed connection's answers are dropped up to the server's
        ReadyForQuery (the statement is over: committed, in autocommit or by COMMIT), then
        both sockets are closed."""
        while data := _recv(server):
            if doomed.is_set():
                if READY in data:
                    break
                continue
            try:
                client.sendall(data)
            except OSError:
                break
        _close(client, server)

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for sock in self._open:
            _close(sock)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
