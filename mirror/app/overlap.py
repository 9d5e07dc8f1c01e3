"""Which site of a library already covers a URL: its scope would crawl it as a page. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from mirror.config import SiteConfig
from mirror.crawl.scope import PAGE, Scope
from mirror.web.urls import InvalidURL, normalize


def covers(cfg: SiteConfig, url: str) -> bool:
    """Would a run of `cfg` crawl `url` as a page? It is one of the start URLs, or (when
    links are followed at all) on the site's hosts and let through by include, exclude and
    the trap rules, as a link one step from a start URL. Robots rules are not consulted."""
    ignore = tuple(cfg.scope.ignore_query)
    try:
        canon = normalize(url.strip(), ignore)
        starts = {normalize(u, ignore) for u in cfg.site.start_urls}
    except InvalidURL:
        return False
    if canon in starts:
        return True
    if cfg.scope.max_depth < 1:
        return False
    return Scope.from_config(cfg).decide(canon, 1, requisite=False).mode == PAGE


def covering(url: str, sites: Iterable[tuple[str, SiteConfig]]) -> str | None:
    """The id of the first of `sites` ((id, config) pairs) that covers `url`, or None."""
    return next((site_id for site_id, cfg in sites if covers(cfg, url)), None)
