"""Running an aiohttp.web application on an address until a signal, and the doors the servers
share: the Host check, an access token that becomes a cookie, the read-only rule."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import secrets
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["Access", "Handler", "HostNames", "Middleware", "READ_METHODS", "access_guard",
           "host_allowed", "host_guard", "host_names", "is_loopback", "loopback_hosts",
           "new_token", "read_only_guard", "refuse", "same", "shown", "start_app",
           "start_app_preferring", "until_signalled", "without_token"]

READ_METHODS = frozenset({"GET", "HEAD"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


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
    return runner, f"http://{shown(bound_host)}:{bound_port}/"


async def start_app_preferring(app: web.Application, host: str, port: int | None
                               ) -> tuple[web.AppRunner, str]:
    """start_app on `port` when it is free, else on any free port (None: any)."""
    if port:
        try:
            return await start_app(app, host, port)
        except OSError:  # taken since: another port will do
            pass
    return await start_app(app, host, 0)


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


def shown(host: str) -> str:
    """An address as a URL or a Host header spells it: an IPv6 one in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_names(host: str) -> frozenset[str]:
    """The Host names (without port) a browser may use for the bound address beside the
    loopback ones: the address given, or for a wildcard (0.0.0.0, ::) this machine's names
    and addresses."""
    try:
        wildcard = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        wildcard = False
    if not wildcard:
        return frozenset({shown(host).lower()})
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    return frozenset(shown(n).lower() for n in names if n)


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

    def base(self, bound: str, port: int) -> str:
        """The base URL to give out: `bound` (start_app's), or on one of `names` when the
        server was bound beyond loopback (for a wildcard, the browser needs a real name)."""
        public = sorted(self.names - set(LOOPBACK_NAMES))
        return f"http://{public[0]}:{port}/" if public else bound


def loopback_hosts(port: int) -> frozenset[str]:
    """The Host headers a browser sends for a server on a loopback address and `port`."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's Host header names this server: a page on another name that
    resolves to 127.0.0.1 (DNS rebinding) must not reach it."""
    return host is not None and host.lower() in allowed


def refuse(status: int, message: str, **headers: str) -> web.Response:
    """A short plain-text refusal that loads nothing."""
    return web.Response(status=status, text=message + "\n",
                        headers={"Content-Security-Policy": "default-src 'none'", **headers})


def host_guard(allowed: Callable[[], frozenset[str]]) -> Middleware:
    """A middleware answering 421 to a Host header that is not one of `allowed()` (called
    per request: the port is known only once the server listens)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), allowed()):
            return refuse(421, "421 Misdirected Request: this server answers only to its "
                               "own address")
        return await handler(request)

    return guard


@web.middleware
async def read_only_guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuses every request that is not GET or HEAD, whatever it carries (cookie, CSRF
    token): nothing of a read-only server changes anything."""
    if request.method not in READ_METHODS:
        return refuse(405, "405 Method Not Allowed: read-only, served on the local network; "
                           "nothing can be changed from here", Allow="GET, HEAD")
    return await handler(request)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def same(a: str | None, b: str) -> bool:
    """Whether a secret sent (maybe none) is `b`, in constant time."""
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def without_token(path: str, query: dict[str, str]) -> str:
    """Where to send a browser that came with the token: the same page without it (never
    "//host/...", which a browser would take for another site)."""
    rest = {k: v for k, v in query.items() if k != "token"}
    path = "/" + path.lstrip("/")
    return path + ("?" + urlencode(rest) if rest else "")


@dataclass
class Access:
    """A secret a browser brings once in the printed address (?token=...), then as an
    HttpOnly, SameSite=Strict cookie. Cookies ignore ports: a server that shares a machine
    with others names its cookie after its port, known once it listens (set `cookie` then)."""

    token: str = field(default_factory=new_token)
    cookie: str = "mirror"
    max_age: int | None = None  # seconds the cookie lasts; None: until the browser closes

    def admits(self, request: web.Request) -> bool:
        return same(request.cookies.get(self.cookie), self.token)

    def check(self, request: web.Request, refusal: str) -> web.Response | None:
        """None when the request may go on; else the answer: with the token in a GET's
        address, a 303 to the same page without it that sets the cookie; without the
        cookie, a 403 that says `refusal`."""
        if request.method == "GET" and same(request.query.get("token"), self.token):
            path = request.raw_path.partition("?")[0]  # as sent: still percent-encoded
            response = web.Response(status=303, headers={
                "Location": without_token(path, dict(request.query))})
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict",
                                path="/", max_age=self.max_age)
            return response
        return None if self.admits(request) else refuse(403, refusal)


def access_guard(access: Access, refusal: str) -> Middleware:
    """A middleware that lets through only the browsers holding `access`'s cookie."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        return access.check(request, refusal) or await handler(request)

    return guard
