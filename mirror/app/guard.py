"""The app's doors: Host check, access token, CSRF token and Origin, security headers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from mirror.webapp import (
    Access,
    Handler,
    Middleware,
    host_allowed,
    loopback_hosts,
    new_token,
    refuse,
    same,
    without_token,
)

__all__ = ["APP_CSP", "COOKIE", "CSRF_FIELD", "CSRF_HEADER", "Secrets", "guard", "origin_ok",
           "without_token"]

COOKIE = "mirror_ui"
#: the access cookie outlives the browser (400 days, the most browsers keep one): the token
#: it holds outlives the app (app/uistate.py), so bookmarks of the app's pages keep working
COOKIE_AGE = 400 * 24 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: the app's own pages: scripts and styles from the app only; archived pages are never
#: shown here (they replay from another origin), so nothing else is allowed
APP_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


@dataclass(frozen=True)
class Secrets:
    """The access token (in the printed address, then a cookie; kept from one start to the
    next by app/uistate.py) and the CSRF token (in every form and in the pages' script; new
    at each start: a page left open across a restart is told to reload, and no token that
    pages carry outlives the process)."""

    token: str = field(default_factory=new_token)
    csrf: str = field(default_factory=new_token)

    @property
    def access(self) -> Access:
        """The access token as the app checks it: the app's cookie (SameSite=Lax: the way
        back from a replay server, another site, is a link that must carry it)."""
        return Access(self.token, COOKIE, COOKIE_AGE, "Lax")


def origin_ok(origin: str | None, referer: str | None, host: str) -> bool:
    """A state-changing request must come from a page of this app: its Origin (or, where a
    browser sends none, its Referer) is http://<the Host it was sent to>."""
    own = f"http://{host}"
    if origin is not None:
        return origin == own
    return referer is not None and (referer == own or referer.startswith(own + "/"))


def elsewhere(request: web.Request, keys: Secrets, allowed: frozenset[str]) -> web.Response:
    """The answer to a request for another Host: 421, or when the app has a name of its own
    and this is its port on 127.0.0.1 with the token (an address printed before the app had
    that name), a 303 to the app's name with it. A cookie an earlier version set on
    127.0.0.1 (the token itself, sent to every port) is expired then."""
    own = sorted(allowed)
    name, _, port = own[0].rpartition(":") if len(own) == 1 else ("", "", "")
    named = name.endswith(".localhost") and port.isdigit()
    at_127 = named and request.host.lower() in loopback_hosts(int(port))
    if at_127 and request.method == "GET" and same(request.query.get("token"), keys.token):
        response = web.Response(status=303, headers={
            "Location": f"http://{own[0]}{request.raw_path}"})
    else:
        response = refuse(421, "This app answers only to its own address: open the address "
                               "that `mirror ui` printed.")
    if named and COOKIE in request.cookies:
        response.del_cookie(COOKIE, path="/")
    return response


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
        return elsewhere(request, keys, hosts())
    assert host is not None
    entry = keys.access.check(request, "This app needs its access token: open the address "
                                       "that `mirror ui` printed (it ends in ?token=...).")
    if entry is not None:
        return entry
    if request.method not in SAFE_METHODS:
        if not origin_ok(request.headers.get("Origin"), request.headers.get("Referer"), host):
            return refuse(403, "Refused: this request did not come from the app's own pages.")
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and request.content_type in ("application/x-www-form-urlencoded",
                                                     "multipart/form-data"):
            sent = str((await request.post()).get(CSRF_FIELD, ""))
        if not same(sent, keys.csrf):
            return refuse(403, "Refused: the form's CSRF token is missing or stale; "
                               "reload the page and try again.")
    return await handler(request)
