"""Scope decisions: is a canonical URL fetched, as a page or as a page requisite, and why not."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirror.config import SiteConfig
from mirror.urls import InvalidURL, host_of, site_key

PAGE = "page"  # fetched, and its links followed
REQUISITE = "requisite"  # fetched for a page's display, only its own requisites followed


@dataclass(frozen=True)
class Decision:
    allowed: bool
    mode: str  # PAGE | REQUISITE | "" when not allowed
    reason: str  # skip rule ("host", "exclude", ...) or why it is allowed


def _twins(host: str) -> set[str]:
    bare = host[4:] if host.startswith("www.") else host
    return {bare, "www." + bare}


@dataclass(frozen=True)
class Scope:
    sites: frozenset[str]  # host[:port] keys always allowed (start URLs and their www. twins)
    hosts: frozenset[str]  # extra hosts from the config, allowed on any port
    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    max_depth: int
    page_requisites: bool

    @classmethod
    def from_config(cls, cfg: SiteConfig) -> Scope:
        sites: set[str] = set()
        for url in cfg.site.start_urls:
            host, key = host_of(url), site_key(url)
            sites.add(key)
            if key.startswith(host):  # not for a bracketed IPv6 literal
                port = key[len(host):]  # "" or ":8080"
                sites.update(twin + port for twin in _twins(host))
        return cls(
            sites=frozenset(sites),
            hosts=frozenset(host_of(f"http://{h}/") for h in cfg.scope.hosts),
            include=tuple(re.compile(p) for p in cfg.scope.include),
            exclude=tuple(re.compile(p) for p in cfg.scope.exclude),
            max_depth=cfg.scope.max_depth,
            page_requisites=cfg.scope.page_requisites,
        )

    def on_site(self, url: str) -> bool:
        try:
            return site_key(url) in self.sites or host_of(url) in self.hosts
        except InvalidURL:
            return False

    def decide(self, url: str, depth: int, requisite: bool) -> Decision:
        """Decide for a canonical http(s) URL found at `depth` (start URLs are depth 0).

        Exclude wins over everything. On-site URLs that pass include and max_depth are
        pages; anything else needed to display a page is a requisite when requisites are on.
        """
        if any(p.search(url) for p in self.exclude):
            return Decision(False, "", "exclude")
        page_rule = self._page_rule(url, depth)
        if page_rule is None:
            return Decision(True, PAGE, "in scope")
        if requisite and self.page_requisites:
            return Decision(True, REQUISITE, "page requisite")
        return Decision(False, "", page_rule)

    def _page_rule(self, url: str, depth: int) -> str | None:
        """The first rule that keeps `url` from being crawled as a page, or None."""
        if not self.on_site(url):
            return "host"
        if self.include and not any(p.search(url) for p in self.include):
            return "include"
        if depth > self.max_depth:
            return "max_depth"
        return None
