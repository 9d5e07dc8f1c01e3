"""Archived pages replay from their own origin: one `mirror serve` app per site, on its own
port, started when the site is first browsed. A hostile archived page can then reach
neither the library app (another port: another origin, and the replay CSP allows only its
own) nor another site's archive."""

from __future__ import annotations

import asyncio

from aiohttp import web

from mirror.app.guard import COOKIE, Secrets, same
from mirror.config import SiteConfig
from mirror.replay.serve import Site, make_app
from mirror.webapp import Handler, HostNames, host_guard, start_app


class Replays:
    """The replay servers of one app process, by site id."""

    def __init__(self, host: str, keys: Secrets, extra_hosts: frozenset[str], *,
                 exposed: bool = False) -> None:
        self.host = host
        self.keys = keys
        self.extra_hosts = extra_hosts  # Host names beside the loopback ones (--host)
        self.exposed = exposed  # bound to more than loopback: the token is asked here too
        self.servers: dict[str, tuple[web.AppRunner, str]] = {}
        self._lock = asyncio.Lock()

    async def base(self, site_id: str, cfg: SiteConfig) -> str:
        """The base URL (ending in '/') of the site's replay server, started if need be."""
        async with self._lock:
            if site_id not in self.servers:
                self.servers[site_id] = await self._start(cfg)
            return self.servers[site_id][1]

    async def _start(self, cfg: SiteConfig) -> tuple[web.AppRunner, str]:
        hosts = HostNames(self.extra_hosts)

        @web.middleware
        async def token(request: web.Request, handler: Handler) -> web.StreamResponse:
            # cookies ignore ports: the app's cookie reaches its replay servers too, so that
            # with --host the archive is no more open than the app
            if self.exposed and not same(request.cookies.get(COOKIE), self.keys.token):
                return web.Response(status=403, text="open the archive from `mirror ui`\n")
            return await handler(request)

        site = Site(cfg.site.name, cfg.scope.ignore_query, cfg.site.start_urls)
        app = make_app(cfg.site.output_dir, site, middlewares=[host_guard(hosts), token])
        runner, base = await start_app(app, self.host, 0)
        port = runner.addresses[0][1]
        hosts.bind(port)
        shown = sorted(self.extra_hosts - {"127.0.0.1", "localhost", "[::1]"})
        if shown:  # a wildcard bind: the address the browser used for the app
            base = f"http://{shown[0]}:{port}/"
        return runner, base

    async def close(self) -> None:
        for runner, _ in self.servers.values():
            await runner.cleanup()
        self.servers.clear()
