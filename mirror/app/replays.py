"""Archived pages replay from their own origin: one `mirror serve` app per site, on its own
port, started when the site is first browsed. A hostile archived page can then reach
neither the library app (another port: another origin, and the replay CSP allows only its
own) nor another site's archive. Each site's replay server takes the port it had at the
last start when it is free, so that its addresses too outlive a restart of the app.

Each asks for a token of its own, made from the app's (webapp.derive): the app's links to
it carry it once (?token=...&to=PATH), and it becomes that server's cookie. On loopback
each has a host name of its own under localhost, so that its cookie reaches no other
server; its pages never learn the app's name (the banner's way back is /_library here, a
redirect): a hostile archived page cannot send the browser to the app's name."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlencode

from aiohttp import web

from mirror.app.guard import Secrets
from mirror.app.uistate import StateFile
from mirror.config import SiteConfig
from mirror.replay.origins import Origins, listen_for_content
from mirror.replay.serve import Site, Source, make_app
from mirror.webapp import (
    Access,
    Handler,
    HostNames,
    Middleware,
    access_guard,
    derive,
    host_guard,
    local_name,
    start_app_preferring,
)

#: the banner's way back to the app, a path of the replay server (see the module's text)
BACK = "/_library"


@dataclass(frozen=True)
class ReplayServer:
    """A site's replay server: its base URL (ending in '/') and the archive it reads, which
    the app's history and compare pages read too."""

    runner: web.AppRunner
    base: str
    source: Source
    token: str = ""  # what its address asks for once (then a cookie)

    def entry(self, path: str = "/") -> str:
        """The address of `path` (starting with '/') here that lets the browser in."""
        if not self.token:
            return self.base.rstrip("/") + path
        return f"{self.base}?" + urlencode({"token": self.token, "to": path})


class Replays:
    """The replay servers of one app process, by site id."""

    def __init__(self, host: str, keys: Secrets, extra_hosts: frozenset[str], *,
                 exposed: bool = False, saved: StateFile | None = None) -> None:
        self.host = host
        self.keys = keys
        self.extra_hosts = extra_hosts  # Host names beside the loopback ones (--host)
        self.exposed = exposed  # known by its addresses (--lan, --host), not names of its own
        self.saved = saved  # where the ports of the last start are kept
        self.library = ""  # the app's base URL, once it listens: the banner's way back
        self.servers: dict[str, ReplayServer] = {}
        self._lock = asyncio.Lock()

    async def server(self, site_id: str, cfg: SiteConfig) -> ReplayServer:
        """The site's replay server, started if need be."""
        async with self._lock:
            if site_id not in self.servers:
                self.servers[site_id] = await self._start(site_id, cfg)
            return self.servers[site_id]

    async def base(self, site_id: str, cfg: SiteConfig) -> str:
        """The base URL (ending in '/') of the site's replay server, started if need be."""
        return (await self.server(site_id, cfg)).base

    async def _start(self, site_id: str, cfg: SiteConfig) -> ReplayServer:
        access = Access(derive(self.keys.token, f"replay:{site_id}"), samesite="Lax")
        names = (self.extra_hosts if self.exposed
                 else frozenset({local_name(self.keys.token, f"replay:{site_id}")}))
        hosts = HostNames(names, loopback=self.exposed)
        doors = [host_guard(hosts), access_guard(access, "open the archive from `mirror ui`")]
        back = f"{self.library}site/{site_id}" if self.library else ""
        if back:
            doors.append(back_door(back))
        site = Site(cfg.site.name, cfg.scope.ignore_query, cfg.site.start_urls,
                    BACK if back else "")
        source = await asyncio.to_thread(Source, cfg.site.output_dir, site.ignore_query)
        origins = Origins()  # its archived pages on a second port, same name and doors
        app = make_app(cfg.site.output_dir, site, middlewares=doors, source=source,
                       origins=origins)
        last = self.saved.state.replay_ports.get(site_id) if self.saved else None
        runner, base = await start_app_preferring(app, self.host, last)
        await listen_for_content(runner, self.host, origins)
        port = runner.addresses[0][1]
        hosts.bind(*origins.banner, *origins.content)
        access.cookie = f"mirror_replay_{port}"  # beyond loopback, one address for them all
        if self.saved is not None and port != last:
            self.saved.state.replay_ports[site_id] = port
            await asyncio.to_thread(self.saved.try_save)
        return ReplayServer(runner, hosts.base(base, port), source, access.token)

    async def close(self) -> None:
        for server in self.servers.values():
            await server.runner.cleanup()
        self.servers.clear()


def back_door(library: str) -> Middleware:
    """/_library: a 303 to `library`, the app's page of the site, which the archived pages
    of this server can then follow but not read (another origin)."""

    @web.middleware
    async def door(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == BACK:
            return web.Response(status=303, headers={"Location": library,
                                                     "Referrer-Policy": "no-referrer"})
        return await handler(request)

    return door
