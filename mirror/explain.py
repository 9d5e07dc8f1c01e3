"""`mirror explain`: what the crawler would decide for one URL, and why (pure)."""

from __future__ import annotations

from mirror.config import SiteConfig
from mirror.crawl.robots import RobotsRules
from mirror.crawl.scope import Scope
from mirror.crawl.traprules import RULES as TRAP_RULES
from mirror.model import Mode
from mirror.web.patterns import Figures, matching, url_pattern, why
from mirror.web.urls import InvalidURL, normalize

#: the patterns a run stopped: pattern -> (figures, rule) (ManifestReader.patterns.stopped)
Learned = dict[str, tuple[Figures, str]]

#: what each skip rule means, for people
RULES = {
    "host": "its host is not a start URL's host, a www. twin of one, or in [scope] hosts",
    "include": "it matches none of [scope] include",
    "exclude": "it matches [scope] exclude",
    "max_depth": "it is more links away from a start URL than [scope] max_depth",
    "url_length": "it is longer than [scope] max_url_length",
    "path_depth": "its path has more segments than [scope] max_path_depth",
    "segment_repeats": "a path segment repeats more than [scope] max_segment_repeats times",
    "robots": "robots.txt disallows it for this user agent",
    "logout": "a logout link, which would end the crawl's session",
    "meta-robots": "the only pages that link to it say nofollow (<meta name=\"robots\"> or "
                   "X-Robots-Tag); [scope] meta_robots = false follows them",
    "learned:noindex": "its URL pattern was stopped: a block of its pages were all marked "
                       "noindex ([scope] learn_traps; pin it with [scope] fetch_patterns)",
    "learned:facets": "it combines two or more filters of a faceted path (query keys each "
                      "seen alone on pages of the path), which lead to nothing new",
    "learned:duplicate": "its URL pattern was stopped: most of a block of its pages were "
                         "near-duplicates of pages stored before ([scope] learn_traps; pin "
                         "it with [scope] fetch_patterns)",
    "skip_patterns": "its URL pattern is in [scope] skip_patterns",
    "sitemap-budget": "a sitemap listed it after the run's sitemaps had listed [scope] "
                      "max_sitemap_urls URLs (or it is a sitemap left unread once they had)",
} | {f"trap:{rule.name}": (f"{rule.software}: " if rule.software else "") + rule.what
     + " ([scope] traps: remove the name to crawl such URLs)" for rule in TRAP_RULES}


def explain(cfg: SiteConfig, raw: str, depth: int, robots: RobotsRules | None,
            robots_source: str, learned: Learned | None = None) -> list[str]:
    """Lines describing the canonical form, the scope decision as a link and as a page
    requisite at `depth`, the robots.txt verdict (None: not known) and the URL's learned
    pattern (`learned`: the patterns the last run stopped; None: no manifest)."""
    try:
        url = normalize(raw, cfg.scope.ignore_query)
    except InvalidURL as exc:
        return [f"{raw}: never fetched: {exc} (rule: {exc.reason})"]
    lines = [f"canonical  {url}" + ("" if url == raw else f"   (from {raw})")]
    scope = Scope.from_config(cfg)
    for label, requisite in (("as a link", False), ("as a page requisite", True)):
        d = scope.decide(url, depth, requisite)
        if d.allowed:
            what = "crawled as a page" if d.mode == Mode.PAGE else "fetched, links not followed"
            lines.append(f"{label:<20} {what} ({d.reason})")
        else:
            lines.append(f"{label:<20} not fetched: rule {d.reason}: "
                         f"{RULES.get(d.reason, d.reason)}")
    lines.append(_robots_line(cfg, url, robots, robots_source))
    lines.append(_pattern_line(cfg, url, learned))
    return lines


def _pattern_line(cfg: SiteConfig, url: str, learned: Learned | None) -> str:
    pattern = url_pattern(url)
    if pattern in cfg.scope.skip_patterns:
        return f"pattern     {pattern}: never fetched ([scope] skip_patterns)"
    if pattern in cfg.scope.fetch_patterns:
        return f"pattern     {pattern}: always fetched ([scope] fetch_patterns)"
    if not cfg.scope.learn_traps:
        return f"pattern     {pattern} (not learned: [scope] learn_traps = false)"
    pattern = matching(url, learned or {}) or pattern  # its own, or its family's
    found = (learned or {}).get(pattern)
    if found is None:
        return f"pattern     {pattern}: not stopped" + (
            "" if learned is not None else " (no run yet)")
    figures, rule = found
    return (f"pattern     {pattern}: stopped by the last run, rule {rule}: "
            f"{why(rule, figures)}; e.g. {', '.join(figures.samples[:3])}; to fetch it "
            f"anyway add it to [scope] fetch_patterns")


def _robots_line(cfg: SiteConfig, url: str, robots: RobotsRules | None, source: str) -> str:
    if not cfg.scope.robots:
        return "robots.txt  not consulted ([scope] robots = false)"
    if robots is None:
        return f"robots.txt  unknown: {source}"
    verdict = "allows" if robots.allowed(url, cfg.crawl.user_agent) else "disallows"
    delay = robots.crawl_delay(cfg.crawl.user_agent)
    extra = f", Crawl-delay {delay:g}s" if delay else ""
    return f"robots.txt  {verdict} it ({robots.reason}, {source}{extra})"
