"""Running an aiohttp.web application on an address until a signal, and the doors the servers
share: the Host check, an access token that becomes a cookie, the read-only rule."""

from __future__ import annotations

import asyncio
import base64
import hashlib
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

__all__ = ["HEADER_DEADLINE", "Access", "Handler", "HostNames", "Middleware", "READ_METHODS",
           "access_guard",
           "derive", "host_allowed", "host_guard", "host_names", "is_loopback",
           "local_name", "loopback_hosts", "new_token", "read_only_guard", "refuse",
           "resolves_names", "same", "session_value", "shown", "start_app",
           "start_app_preferring", "until_signalled", "within", "without_token"]

READ_METHODS = frozenset({"GET", "HEAD"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# Seconds a connection has to finish its request headers, counted from its opening or from
# its last response; an idle keep-alive connection is closed then too (slow-header clients).
# aiohttp's keep-alive timer does both from 3.14.4 on (it is armed when a connection opens).
HEADER_DEADLINE = 10.0


async def start_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve `app`; returns (runner, base URL ending in '/'). Call runner.cleanup()."""
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=HEADER_DEADLINE)
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

    def __init__(self, names: frozenset[str] = frozenset(), *, loopback: bool = True) -> None:
        self.names = names
        self.loopback = loopback  # False: only `names` (a server known by a name of its own)
        self.allowed: frozenset[str] = frozenset()

    def __call__(self) -> frozenset[str]:
        return self.allowed

    def bind(self, *ports: int) -> None:
        own = frozenset(f"{n}:{port}" for n in self.names for port in ports)
        near = frozenset().union(*(loopback_hosts(port) for port in ports))
        self.allowed = own | near if self.loopback else own

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


def derive(token: str, purpose: str) -> str:
    """A secret made from `token` for one `purpose` (a replay server's token, a host name):
    knowing it tells nothing of `token` or of the secrets made for other purposes."""
    digest = hmac.new(token.encode(), purpose.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:32]  # as long as new_token()'s


def local_name(token: str, purpose: str) -> str:
    """A host name of its own under `localhost` (RFC 6761: browsers resolve every name
    under it to loopback) for the server `purpose` names: cookies ignore ports, so a cookie
    set on 127.0.0.1 reaches every server of the machine, but one set on this name only the
    servers asked for by this name, which no one without `token` knows."""
    digest = hmac.new(token.encode(), b"name:" + purpose.encode(), hashlib.sha256).hexdigest()
    return f"m{digest[:24]}.localhost"


def resolves_names(host: str) -> bool:
    """Whether browsers reach a server bound to `host` at the names under localhost: those
    are 127.0.0.1 and ::1 (not 127.0.0.2, nor an address beyond loopback)."""
    return host.strip("[]").lower() in ("127.0.0.1", "::1", "localhost")


def session_value(token: str, remote: str) -> str:
    """The cookie a browser gets for `token`: bound to its address (`remote`), so that a
    copy sent elsewhere (cookies ignore ports) is worth nothing from another machine; the
    token itself never is a cookie."""
    return derive(token, f"session|{remote}")


def within(target: str) -> bool:
    """Whether `target` is a path on this server (not "//host/..." nor "/\\host")."""
    return (target.startswith("/") and not target.startswith(("//", "/\\"))
            and target.isprintable())


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
    """A secret a browser brings once in an address (?token=...), then as an HttpOnly
    cookie bound to that browser's address (session_value).
    Cookies ignore ports: a server that shares an address with others names its cookie
    after its port, known once it listens (set `cookie` then); on loopback each server has
    a name of its own (local_name), the only sound way to keep a cookie from other ports."""

    token: str = field(default_factory=new_token)
    cookie: str = "mirror"
    max_age: int | None = None  # seconds the cookie lasts; None: until the browser closes
    samesite: str = "Strict"  # Lax where links from another site of ours lead here

    def session(self, request: web.Request) -> str:
        return session_value(self.token, request.remote or "")

    def admits(self, request: web.Request) -> bool:
        return same(request.cookies.get(self.cookie), self.session(request))

    def check(self, request: web.Request, refusal: str) -> web.Response | None:
        """None when the request may go on; else the answer: with the token in a GET's
        address, a 303 that sets the cookie, to ?to= (a path here) or else to the same page
        without the token; without the cookie, a 403 that says `refusal`."""
        if request.method == "GET" and same(request.query.get("token"), self.token):
            path = request.raw_path.partition("?")[0]  # as sent: still percent-encoded
            target = request.query.get("to", "")
            response = web.Response(status=303, headers={
                "Location": target if within(target) else without_token(path,
                                                                        dict(request.query))})
            response.set_cookie(self.cookie, self.session(request), httponly=True,
                                samesite=self.samesite, path="/", max_age=self.max_age)
            return response
        return None if self.admits(request) else refuse(403, refusal)


def access_guard(access: Access, refusal: str) -> Middleware:
    """A middleware that lets through only the browsers holding `access`'s cookie."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        return access.check(request, refusal) or await handler(request)

    return guard
