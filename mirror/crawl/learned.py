"""The crawl's learned trap patterns: each stored page's figures added to its URL
pattern's (in the capture's transaction), the patterns stopped by their verdict, and the
URLs of a stopped pattern skipped under its rule, before the fetch and when found."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mirror.crawl.scope import PAGE
from mirror.crawl.simhash import NearIndex, fingerprint, from_signed, line_keys, to_signed
from mirror.manifest.writer import Manifest
from mirror.model import Discovered, NewUrl, UrlItem
from mirror.web.patterns import (
    EXACT,
    SHORT,
    Families,
    Figures,
    facet_keys,
    facet_rule,
    matching,
    url_pattern,
    verdict,
    why,
)

log = logging.getLogger(__name__)


def noindex_of(found: Discovered) -> bool:
    """Whether a stored page is marked noindex (<meta name="robots"> or X-Robots-Tag, as
    discovery read them: web.robotsmeta; never while [scope] meta_robots is off)."""
    return "noindex" in (found.robots or "").split(",")


class Learner:
    """Per-pattern figures of the run, the patterns it stopped, and the fingerprints of the
    pages stored (every run's): loaded from the manifest on first use in a run, then kept
    in step with it by `observe`, which writes what it changes in the same transaction."""

    def __init__(self, manifest: Manifest, fetch_patterns: Iterable[str] = ()) -> None:
        self.manifest = manifest
        self.pinned = frozenset(fetch_patterns)  # [scope] fetch_patterns: never stopped
        self.run_id = 0
        self.figures: dict[str, Figures] = {}
        self.stopped: dict[str, str] = {}  # pattern -> rule
        self.index = NearIndex()
        self.templates: dict[str, frozenset[int]] = {}  # host -> its first page's lines
        self.families = Families()
        self.faceted: dict[str, frozenset[str]] = {}  # path pattern -> its filters

    def load(self, run_id: int) -> None:
        """The run's figures and every fingerprint, from the manifest (once per run)."""
        if run_id == self.run_id:
            return
        self.run_id = run_id
        patterns = self.manifest.patterns.read(run_id)
        self.figures = {p: f for p, (f, _) in patterns.items()}
        self.stopped = {p: rule for p, (_, rule) in patterns.items() if rule}
        self.faceted = facet_keys(self.figures)
        self.families = Families()
        for pattern in patterns:
            self.families.add(pattern)
        self.index = NearIndex()
        self.templates = self.manifest.patterns.templates()
        for url_id, signed in self.manifest.patterns.fingerprints():
            self.index.add(from_signed(signed), url_id)

    def observe(self, run_id: int, item: UrlItem, found: Discovered) -> None:
        """A page was stored (called inside its capture's transaction): its fingerprint,
        whether it is a near-duplicate of another URL's page, and its pattern's figures,
        which may stop the pattern."""
        if item.mode != PAGE or found.text is None:
            return
        self.load(run_id)
        duplicate = self.duplicate(item, found.text.body or "")
        pattern = self.pattern_of(item.url)
        links = sum(1 for x in found.links if x.mode == PAGE and not x.skip_reason)
        figures = self.figures.get(pattern, Figures()).seen(
            item.url, noindex=noindex_of(found), duplicate=duplicate, links=links)
        self.figures[pattern] = figures
        if figures.pages == 2 and pattern.count("=") == 1:  # a filter, perhaps
            self.faceted = facet_keys(self.figures)
        rule = self.stopped.get(pattern)
        if rule is None and pattern not in self.pinned:
            rule = verdict(figures)
            if rule is not None:
                self.stopped[pattern] = rule
                log.warning("learned trap pattern %s (%s: %s), e.g. %s; its other URLs are "
                            "skipped (pin it with [scope] fetch_patterns)", pattern, rule,
                            why(rule, figures), ", ".join(figures.samples[:2]))
        self.manifest.patterns.save(run_id, pattern, figures, rule)

    def duplicate(self, item: UrlItem, text: str) -> bool:
        """Whether a page's own text (its lines not on its host's first page: web.patterns
        SHORT, EXACT) is a near-duplicate of another URL's page stored before; its
        fingerprint joins the index."""
        host = item.url.partition("://")[2].partition("/")[0]
        template = self.templates.get(host)
        if not template:  # the host's first page with lines: they are the template
            self.templates[host] = template = line_keys(text)
            self.manifest.patterns.save_template(host, template)
            h, own = fingerprint(text)
        else:
            h, own = fingerprint(text, template)
        if own < SHORT:
            return False
        duplicate = self.index.match(h, item.id, exact=own < EXACT) is not None
        if self.index.add(h, item.id):
            self.manifest.patterns.save_fingerprint(item.id, to_signed(h))
        return duplicate

    def pattern_of(self, url: str) -> str:
        """The pattern a stored page is judged under: its family's once the family is wide
        (web.patterns.Families), else its own, which its families then count."""
        own = url_pattern(url)
        pattern = self.families.of(own)
        if pattern == own and own not in self.figures:
            self.families.add(own)
        return pattern

    def rule_for(self, url: str) -> str | None:
        """The rule of a stopped pattern a URL belongs to (its own or its family), or None."""
        if self.faceted and url_pattern(url) not in self.pinned:
            if facets := facet_rule(url, self.faceted):
                return facets
        if not self.stopped:
            return None
        pattern = matching(url, self.stopped)
        return self.stopped[pattern] if pattern else None

    def sift(self, links: list[NewUrl]) -> list[NewUrl]:
        """Links found on a page, those to pages of a stopped pattern marked skipped under
        its rule (so they are recorded as skipped, not queued and skipped at the fetch)."""
        if not self.stopped and not self.faceted:
            return links
        out = []
        for link in links:
            rule = None if link.skip_reason or link.mode != PAGE else self.rule_for(link.url)
            out.append(link._replace(mode="", skip_reason=rule) if rule else link)
        return out
