"""Running an aiohttp.web application on an address until a signal: shared by the servers."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["Handler", "HostNames", "Middleware", "host_allowed", "host_guard", "is_loopback",
           "loopback_hosts", "start_app", "until_signalled"]


async def start_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve `app`; returns (runner, base URL ending in '/'). Call runner.cleanup()."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{shown}:{bound_port}/"


async def until_signalled() -> None:
    """Return on the first SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def is_loopback(host: str) -> bool:
    """Whether an address to bind (127.0.0.2, ::1, [::1], localhost) is a loopback one."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


class HostNames:
    """The Host headers a server answers to: the loopback names, and `names` (an address
    it was bound to), each with its port, which is known only once it listens (bind)."""

    def __init__(self, names: frozenset[str] = frozenset()) -> None:
        self.names = names
        self.allowed: frozenset[str] = frozenset()

    def __call__(self) -> frozenset[str]:
        return self.allowed

    def bind(self, port: int) -> None:
        self.allowed = loopback_hosts(port) | {f"{n}:{port}" for n in self.names}


def loopback_hosts(port: int) -> frozenset[str]:
    """The Host headers a browser sends for a server on a loopback address and `port`."""
    return frozenset(f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's Host header names this server: a page on another name that
    resolves to 127.0.0.1 (DNS rebinding) must not reach it."""
    return host is not None and host.lower() in allowed


def host_guard(allowed: Callable[[], frozenset[str]]) -> Middleware:
    """A middleware answering 421 to a Host header that is not one of `allowed()` (called
    per request: the port is known only once the server listens)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), allowed()):
            return web.Response(status=421, text="421 Misdirected Request: this server "
                                "answers only to its own address\n")
        return await handler(request)

    return guard
