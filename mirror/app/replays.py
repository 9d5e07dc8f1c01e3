"""Archived pages replay from their own origin: one `mirror serve` app per site, on its own
port, started when the site is first browsed. A hostile archived page can then reach
neither the library app (another port: another origin, and the replay CSP allows only its
own) nor another site's archive. Each site's replay server takes the port it had at the
last start when it is free, so that its addresses too outlive a restart of the app."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from mirror.app.guard import Secrets
from mirror.app.uistate import StateFile
from mirror.config import SiteConfig
from mirror.replay.serve import Site, Source, make_app
from mirror.webapp import HostNames, access_guard, host_guard, start_app_preferring


@dataclass(frozen=True)
class ReplayServer:
    """A site's replay server: its base URL (ending in '/') and the archive it reads, which
    the app's history and compare pages read too."""

    runner: web.AppRunner
    base: str
    source: Source


class Replays:
    """The replay servers of one app process, by site id."""

    def __init__(self, host: str, keys: Secrets, extra_hosts: frozenset[str], *,
                 exposed: bool = False, saved: StateFile | None = None) -> None:
        self.host = host
        self.keys = keys
        self.extra_hosts = extra_hosts  # Host names beside the loopback ones (--host)
        self.exposed = exposed  # beyond loopback (or --lan): the token is asked here too
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
        hosts = HostNames(self.extra_hosts)
        doors = [host_guard(hosts)]
        if self.exposed:
            # cookies ignore ports: the app's cookie reaches its replay servers too, so that
            # beyond loopback the archive is no more open than the app
            doors.append(access_guard(self.keys.access, "open the archive from `mirror ui`"))
        back = f"{self.library}site/{site_id}" if self.library else ""
        site = Site(cfg.site.name, cfg.scope.ignore_query, cfg.site.start_urls, back)
        source = await asyncio.to_thread(Source, cfg.site.output_dir, site.ignore_query)
        app = make_app(cfg.site.output_dir, site, middlewares=doors, source=source)
        last = self.saved.state.replay_ports.get(site_id) if self.saved else None
        runner, base = await start_app_preferring(app, self.host, last)
        port = runner.addresses[0][1]
        hosts.bind(port)
        if self.saved is not None and port != last:
            self.saved.state.replay_ports[site_id] = port
            await asyncio.to_thread(self.saved.try_save)
        return ReplayServer(runner, hosts.base(base, port), source)

    async def close(self) -> None:
        for server in self.servers.values():
            await server.runner.cleanup()
        self.servers.clear()
