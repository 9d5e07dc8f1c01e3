"""Scope decisions: is a canonical URL fetched, as a page or as a page requisite, and why not."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from mirror.config import SiteConfig
from mirror.crawl.traprules import first_trap, is_logout
from mirror.model import Mode
from mirror.web.patterns import PINNED, matching
from mirror.web.urls import canonical_site, host_of, site_key

PAGE = Mode.PAGE
REQUISITE = Mode.REQUISITE

# Skip-rule tokens of the trap limits (P6), stable: reports and tests count by them.
URL_LENGTH = "url_length"
PATH_DEPTH = "path_depth"
SEGMENT_REPEATS = "segment_repeats"
MAX_OUTLINKS = "max_outlinks"
MAX_HOST_PAGES = "max_host_pages"
MAX_HOST_BYTES = "max_host_bytes"
#: rule of logout links while there is a session to keep; CMS traps are "trap:<name>"
LOGOUT = "logout"
TRAP_RULE = "trap:"

T = TypeVar("T")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    mode: str  # PAGE | REQUISITE | "" when not allowed
    reason: str  # skip rule ("host", "exclude", ...) or why it is allowed


@dataclass(frozen=True)
class HostBudget:
    """Per-host budgets for one run (0 = no limit); the crawler keeps the counters."""

    max_pages: int = 0
    max_bytes: int = 0

    def exceeded(self, pages: int, nbytes: int) -> str | None:
        """The rule that stops one more fetch from a host that has had `pages` URLs fetched
        and `nbytes` body bytes received this run, or None while it is within budget."""
        if self.max_pages and pages >= self.max_pages:
            return MAX_HOST_PAGES
        if self.max_bytes and nbytes >= self.max_bytes:
            return MAX_HOST_BYTES
        return None


def cap_outlinks(
    links: Sequence[T], limit: int, keep_first: Callable[[T], bool] | None = None
) -> tuple[list[T], int]:
    """(links kept, number dropped): at most `limit` links (0 = all), in document order.

    Links for which `keep_first` is true (page requisites, say) are kept before the others,
    so a page with thousands of links still gets the images and styles it needs.
    """
    if not limit or len(links) <= limit:
        return list(links), 0
    if keep_first is None:
        return list(links[:limit]), len(links) - limit
    flags = [keep_first(link) for link in links]
    first = [i for i, flag in enumerate(flags) if flag][:limit]
    rest = [i for i, flag in enumerate(flags) if not flag][: limit - len(first)]
    return [links[i] for i in sorted(first + rest)], len(links) - limit


def _path_segments(url: str) -> list[str]:
    """Segments of a canonical URL's path; a trailing '/' adds no segment."""
    path = url.partition("://")[2].partition("?")[0]
    segments = path.split("/")[1:]
    return segments[:-1] if segments and segments[-1] == "" else segments


def trap_rule(url: str, max_url_length: int, max_path_depth: int,
              max_segment_repeats: int) -> str | None:
    """The first trap limit a canonical URL breaks (P6), or None; 0 turns a limit off."""
    if max_url_length and len(url) > max_url_length:
        return URL_LENGTH
    segments = _path_segments(url)
    if max_path_depth and len(segments) > max_path_depth:
        return PATH_DEPTH
    if max_segment_repeats and len(segments) > max_segment_repeats:
        counts = Counter(s for s in segments if s)  # "//" is left to the depth limit
        if counts and max(counts.values()) > max_segment_repeats:
            return SEGMENT_REPEATS
    return None


def cms_trap(url: str, traps: frozenset[str] | tuple[str, ...], keep_session: bool,
             requisite: bool = False) -> str | None:
    """The rule that skips a canonical URL as a known CMS trap (crawl/traprules.py) or a
    logout link, or None.

    Logout links are skipped under LOGOUT while there is a session to keep (keep_session),
    else under "trap:login" when that trap is on. `requisite`: found as a page requisite,
    for which only the login trap and the logout rule hold.
    """
    path, _, query = url.partition("://")[2].partition("#")[0].partition("?")
    path = "/" + path.partition("/")[2]
    if is_logout(path, query):
        if keep_session:
            return LOGOUT
        if "login" in traps:
            return TRAP_RULE + "login"
    name = first_trap(path, query, traps, requisite)
    return TRAP_RULE + name if name else None


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
    max_url_length: int = 2083  # trap limits (P6), 0 = off; defaults as in config.py
    max_path_depth: int = 20
    max_segment_repeats: int = 2
    max_outlinks: int = 6000
    budget: HostBudget = field(default_factory=HostBudget)
    traps: tuple[str, ...] = ()  # [scope] traps: the CMS traps skipped, see cms_trap()
    keep_session: bool = False  # a login or cookies to keep: logout links are skipped
    skip_patterns: frozenset[str] = frozenset()  # [scope] skip_patterns (web/patterns.py)

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
            max_url_length=cfg.scope.max_url_length,
            max_path_depth=cfg.scope.max_path_depth,
            max_segment_repeats=cfg.scope.max_segment_repeats,
            max_outlinks=cfg.scope.max_outlinks,
            budget=HostBudget(cfg.scope.max_host_pages, cfg.scope.max_host_bytes),
            traps=cfg.scope.traps,
            keep_session=_has_session(cfg),
            skip_patterns=frozenset(cfg.scope.skip_patterns),
        )

    def on_site(self, url: str) -> bool:
        """Is a canonical URL on the site's own hosts (start URLs, www. twins, [scope] hosts)?"""
        if not url.startswith(("http://", "https://")):
            return False
        site, host = canonical_site(url)
        return site in self.sites or host in self.hosts

    def decide(self, url: str, depth: int, requisite: bool) -> Decision:
        """Decide for a canonical http(s) URL found at `depth` (start URLs are depth 0).

        Exclude wins over everything, then the trap limits (url_length, path_depth,
        segment_repeats), which apply to requisites too: a stylesheet can import itself down
        an ever deeper path. On-site URLs that pass include and max_depth are pages; anything
        else needed to display a page is a requisite when requisites are on. A URL that would
        be fetched is last checked against the CMS traps and the logout rule (cms_trap), so
        those count only URLs the crawl would otherwise have fetched.
        """
        if any(p.search(url) for p in self.exclude):
            return Decision(False, "", "exclude")
        if self.skip_patterns and matching(url, self.skip_patterns):
            return Decision(False, "", PINNED)
        trap = trap_rule(url, self.max_url_length, self.max_path_depth, self.max_segment_repeats)
        if trap:
            return Decision(False, "", trap)
        page_rule = self._page_rule(url, depth)
        if page_rule is None:
            decision = Decision(True, PAGE, "in scope")
        elif requisite and self.page_requisites:
            decision = Decision(True, REQUISITE, "page requisite")
        else:
            return Decision(False, "", page_rule)
        cms = cms_trap(url, self.traps, self.keep_session, requisite)
        return Decision(False, "", cms) if cms else decision

    def cap_outlinks(
        self, links: Sequence[T], keep_first: Callable[[T], bool] | None = None
    ) -> tuple[list[T], int]:
        """cap_outlinks() with this scope's max_outlinks."""
        return cap_outlinks(links, self.max_outlinks, keep_first)

    def _page_rule(self, url: str, depth: int) -> str | None:
        """The first rule that keeps `url` from being crawled as a page, or None."""
        if not self.on_site(url):
            return "host"
        if self.include and not any(p.search(url) for p in self.include):
            return "include"
        if depth > self.max_depth:
            return "max_depth"
        return None


def _has_session(cfg: SiteConfig) -> bool:
    """Is there a session a logout link would end: a login, a cookies file or a Cookie header?"""
    return bool(cfg.login.url or (cfg.crawl.cookies and cfg.crawl.cookies_file)
                or any(name.lower() == "cookie" for name, _ in cfg.crawl.headers))
