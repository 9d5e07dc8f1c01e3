"""Two origins for one replay server (O2): its own pages and the banner on one port, the
archived pages on another. An archived page shown below the banner is then a frame of
another origin: it can neither read nor change the banner (nor remove the sandbox the
banner gives its frame), and the banner's policy keeps that frame inside the archive.

The second port answers only for archived bytes (/<ts>mp_/..., /<ts>id_/... and the paths
a script builds from the site's root); everything else goes back to the first. A browser
that opens an archived page there as a page of its own (Sec-Fetch-Dest: document: a
popup, a link to _top, the address typed) is sent to the same capture under the banner.

The first port sends a browser's requests for archived bytes to the second (a page, a
frame, a worker, an image: any Sec-Fetch-Dest but `empty`), so no archived page ever
runs in the banner's origin. Clients that send no Sec-Fetch-Dest (curl, scripts, other
replayers' tools) and a script's fetch() (`empty`: its answer is data, never a document)
get the archived bytes there as they ask: `/<ts>id_/<url>` is the capture as archived on
either port.
Both ports share the host name, so the access cookie (cookies ignore ports) and the
SameSite rules cover them alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from mirror.replay.pages import attr, parse_target, replay_path
from mirror.webapp import Handler, Middleware, shown

#: the framed archived page may script itself, submit forms into the archive, open a
#: window and navigate the page above it, but only when the person using it clicks
SANDBOX = ("allow-scripts allow-same-origin allow-forms allow-popups allow-modals "
           "allow-downloads allow-top-navigation-by-user-activation")
#: the request key under which the banner's handlers find the archived pages' origin
CONTENT = web.RequestKey("mirror.content_origin", str)
_ANCESTORS = "frame-ancestors 'self'"


@dataclass
class Origins:
    """The ports of the two origins, known once they listen; `own` the paths of the
    replay server's own pages (which never are archived content)."""

    own: frozenset[str] = frozenset()
    banner: frozenset[int] = field(default_factory=frozenset)
    content: frozenset[int] = field(default_factory=frozenset)

    def is_content(self, request: web.Request) -> bool:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        return sock is not None and sock[1] in self.content

    def middleware(self) -> Middleware:
        @web.middleware
        async def split(request: web.Request, handler: Handler) -> web.StreamResponse:
            if self.is_content(request):
                return await self._content(request, handler)
            return self._to_content(request) or await self._banner(request, handler)

        return split

    async def _banner(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        request[CONTENT] = origin(request, min(self.content))
        response = await handler(request)
        target = parse_target(request.raw_path)
        if target is not None and target.mode in ("page", "raw"):  # else a redirect
            response.headers["Vary"] = "Sec-Fetch-Dest"
        return response

    def _to_content(self, request: web.Request) -> web.Response | None:
        """Archived bytes a browser asks of the banner's origin: from the other one."""
        target = parse_target(request.raw_path)
        if target is None or target.mode not in ("page", "raw"):
            return None
        if request.headers.get("Sec-Fetch-Dest", "empty") == "empty":
            return None  # not a browser loading it as a page, frame, worker or resource
        moved = _moved(origin(request, min(self.content)) + request.raw_path)
        moved.headers["Vary"] = "Sec-Fetch-Dest"
        return moved

    async def _content(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        banner = origin(request, min(self.banner))
        path = request.raw_path.partition("?")[0]
        target = parse_target(request.raw_path)
        if path in self.own or (target is not None and target.mode not in ("page", "raw")):
            return _moved(banner + request.raw_path)
        if (target is not None and target.mode == "page"
                and request.headers.get("Sec-Fetch-Dest") == "document"):
            return _moved(banner + replay_path(target.timestamp, target.url))
        response = await handler(request)
        policy = response.headers.get("Content-Security-Policy", "")
        if _ANCESTORS in policy:  # framed only by the banner and by archived pages
            response.headers["Content-Security-Policy"] = policy.replace(
                _ANCESTORS, f"{_ANCESTORS} {banner}")
        return response


def origin(request: web.Request, port: int) -> str:
    """The origin of `port` on the host name the browser used for this request (the same
    name: the same cookies, the same site)."""
    return f"{request.scheme}://{shown(request.url.host or '127.0.0.1')}:{port}"


def framed_policy(policy: str, content: str) -> str:
    """A banner or compare page's policy whose frames are archived pages of `content`."""
    return policy.replace("frame-src 'self'", f"frame-src {content}")


def archived_frame(content: str, path: str, title: str, extra: str = "") -> str:
    """An <iframe> of the archived page at `path`: from `content` and sandboxed when the
    archived pages have an origin of their own (a frame of the same origin as the page
    above it could take its sandbox away), else from here as it is."""
    sandbox = f' sandbox="{SANDBOX}"' if content else ""
    return (f'<iframe{extra} src="{attr(content + path)}"{sandbox} '
            f'title="{attr(title)}"></iframe>')


def _moved(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location,
                                             "Content-Security-Policy": "default-src 'none'"})


async def listen_for_content(runner: web.AppRunner, host: str, origins: Origins) -> None:
    """Open the archived pages' port beside the one `runner` listens on."""
    origins.banner = frozenset(a[1] for a in runner.addresses)
    await web.TCPSite(runner, host, 0).start()
    origins.content = frozenset(a[1] for a in runner.addresses) - origins.banner


__all__ = ["CONTENT", "SANDBOX", "Origins", "archived_frame", "framed_policy",
           "listen_for_content", "origin"]
