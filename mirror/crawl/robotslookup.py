"""The robots.txt rules that apply to one URL, for `explain`: archived, else fetched now."""

from __future__ import annotations

from typing import Any

from mirror.archive.warcread import RawRecord, read_raw
from mirror.config import SiteConfig
from mirror.crawl.fetch import Limits, fetch, open_session
from mirror.crawl.robots import RobotsRules, robots_url
from mirror.crawl.robotsgate import RobotsGate
from mirror.crawl.scope import Scope
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestReader
from mirror.web.urls import InvalidURL, normalize


async def robots_rules(cfg: SiteConfig, raw: str, *,
                       offline: bool) -> tuple[RobotsRules | None, str]:
    """(the rules for a URL, where they come from): the archived copy (of any run), else
    fetched now through the crawl's own robots gate (redirects followed), archived nowhere.
    Offline, nothing is fetched: an unarchived robots.txt gives None."""
    try:
        target = robots_url(normalize(raw, cfg.scope.ignore_query))
    except InvalidURL:
        return None, "not an http(s) URL"
    archived = ArchivedRobots(ArchiveLayout(cfg.site.output_dir))
    if offline and archived.lookup(target) is None:
        return None, f"{target} is not in the archive (offline)"
    rules = await _gate_rules(cfg, target, archived)
    return rules, archived.source or f"fetched {target} now"


class ArchivedRobots:
    """robots.txt answers from the archive, any run (the latest); nothing is archived."""

    def __init__(self, layout: ArchiveLayout) -> None:
        self.layout = layout
        self.source = ""
        self._seen: dict[str, RawRecord | None] = {}

    def lookup(self, url: str) -> RawRecord | None:
        if url not in self._seen:
            self._seen[url] = self._read(url)
        return self._seen[url]

    def _read(self, url: str) -> RawRecord | None:
        if not self.layout.manifest.exists():
            return None
        manifest = ManifestReader(self.layout.manifest)
        try:
            stored = manifest.captures.in_run(None, url)
        finally:
            manifest.close()
        if stored is None:
            return None
        self.source = self.source or f"archived {stored.warc_date}"
        return read_raw(self.layout.warc / stored.filename, stored.offset)

    def keep(self, url: str, answer: object) -> None:
        pass


async def _gate_rules(cfg: SiteConfig, target: str, archived: ArchivedRobots) -> RobotsRules:
    limits = Limits.from_config(cfg.crawl)
    on_site = Scope.from_config(cfg).on_site

    async def fetch_one(session: Any, url: str) -> Any:
        return await fetch(session, url, limits, cfg.headers_for(on_site(url)))

    async with open_session(cfg.crawl.user_agent, 1) as session:
        return await RobotsGate(fetch_one, archived).rules_for(session, target)
