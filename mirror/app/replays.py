"""Archived pages replay from their own origin: one `mirror serve` app per site, on its own
port, started when the site is first browsed. A hostile archived page can then reach
neither the library app (another port: another origin, and the replay CSP allows only its
own) nor another site's archive."""

from __future__ import annotations

import asyncio

from aiohttp import web

from mirror.app.guard import Secrets
from mirror.config import SiteConfig
from mirror.replay.serve import Site, make_app
from mirror.webapp import HostNames, access_guard, host_guard, start_app


class Replays:
    """The replay servers of one app process, by site id."""

    def __init__(self, host: str, keys: Secrets, extra_hosts: frozenset[str], *,
                 exposed: bool = False) -> None:
        self.host = host
        self.keys = keys
        self.extra_hosts = extra_hosts  # Host names beside the loopback ones (--host)
        self.exposed = exposed  # beyond loopback (or --lan): the token is asked here too
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
        doors = [host_guard(hosts)]
        if self.exposed:
            # cookies ignore ports: the app's cookie reaches its replay servers too, so that
            # beyond loopback the archive is no more open than the app
            doors.append(access_guard(self.keys.access, "open the archive from `mirror ui`"))
        site = Site(cfg.site.name, cfg.scope.ignore_query, cfg.site.start_urls)
        app = make_app(cfg.site.output_dir, site, middlewares=doors)
        runner, base = await start_app(app, self.host, 0)
        port = runner.addresses[0][1]
        hosts.bind(port)
        return runner, hosts.base(base, port)

    async def close(self) -> None:
        for runner, _ in self.servers.values():
            await runner.cleanup()
        self.servers.clear()
