"""The app's doors: Host check, access token, CSRF token and Origin, security headers."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from aiohttp import web

from mirror.webapp import Handler, Middleware, host_allowed

COOKIE = "mirror_ui"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: the app's own pages: scripts and styles from the app only; archived pages are never
#: shown here (they replay from another origin), so nothing else is allowed
APP_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


@dataclass(frozen=True)
class Secrets:
    """Per process: the access token (in the printed address, then a cookie) and the CSRF
    token (in every form and in the pages' script)."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def origin_ok(origin: str | None, referer: str | None, host: str) -> bool:
    """A state-changing request must come from a page of this app: its Origin (or, where a
    browser sends none, its Referer) is http://<the Host it was sent to>."""
    own = f"http://{host}"
    if origin is not None:
        return origin == own
    return referer is not None and (referer == own or referer.startswith(own + "/"))


def without_token(path: str, query: dict[str, str]) -> str:
    """Where to send a browser that came with the token: the same page without it (never
    "//host/...", which a browser would take for another site)."""
    rest = {k: v for k, v in query.items() if k != "token"}
    path = "/" + path.lstrip("/")
    return path + ("?" + urlencode(rest) if rest else "")


def guard(keys: Secrets, hosts: Callable[[], frozenset[str]]) -> Middleware:
    """Host check (DNS rebinding), access token, then CSRF token and Origin on every
    request that is not GET/HEAD; adds the security headers to every answer."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await _checked(request, handler, keys, hosts)
        response.headers.setdefault("Content-Security-Policy", APP_CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    return check


async def _checked(request: web.Request, handler: Handler, keys: Secrets,
                   hosts: Callable[[], frozenset[str]]) -> web.StreamResponse:
    host = request.headers.get("Host")
    if not host_allowed(host, hosts()):
        return _refuse(421, "This app answers only to its own address.")
    assert host is not None
    if same(request.query.get("token"), keys.token) and request.method == "GET":
        response = web.Response(status=303, headers={
            "Location": without_token(request.path, dict(request.query))})
        response.set_cookie(COOKIE, keys.token, httponly=True, samesite="Strict", path="/")
        return response
    if not same(request.cookies.get(COOKIE), keys.token):
        return _refuse(403, "This app needs its access token: open the address that "
                            "`mirror ui` printed (it ends in ?token=...).")
    if request.method not in SAFE_METHODS:
        if not origin_ok(request.headers.get("Origin"), request.headers.get("Referer"), host):
            return _refuse(403, "Refused: this request did not come from the app's own pages.")
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and request.content_type in ("application/x-www-form-urlencoded",
                                                     "multipart/form-data"):
            sent = str((await request.post()).get(CSRF_FIELD, ""))
        if not same(sent, keys.csrf):
            return _refuse(403, "Refused: the form's CSRF token is missing or stale; "
                                "reload the page and try again.")
    return await handler(request)


def _refuse(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n",
                        headers={"Content-Security-Policy": "default-src 'none'"})
