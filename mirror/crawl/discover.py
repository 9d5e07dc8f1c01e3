"""Discovery: the URLs a stored response leads to, normalised and scoped (pure: no I/O)."""

from __future__ import annotations

import logging
from functools import lru_cache

from mirror.config import SiteConfig
from mirror.crawl import sitemaps
from mirror.crawl.robots import product_token
from mirror.crawl.scope import REQUISITE, Scope
from mirror.model import (
    META_ROBOTS,
    NOTHING,
    PARSE_BUDGET,
    Discovered,
    LinkKind,
    NewUrl,
    UrlItem,
    Via,
)
from mirror.web.codings import DecodeError, decode_body
from mirror.web.extract import Link, extract, page_text
from mirror.web.http import HTML_TYPES, REDIRECT_STATUSES, mime_of
from mirror.web.nesting import too_deep_at
from mirror.web.robotsmeta import (
    HEADER,
    NOFOLLOW,
    header_directives,
    meta_directives,
    robots_value,
)
from mirror.web.urls import InvalidURL, canonical_site, join, normalize

log = logging.getLogger(__name__)

PARSED_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/css"})
#: most bytes of a body read for its links, and most decompressed bytes handed to the
#: link extractor (P4): a page's parse holds a few times this in memory
MAX_PARSE_BYTES = 8_000_000
#: deepest nesting of elements that must be closed (web.nesting) parsed: libxml2 slows
#: down super-linearly past it, and browsers flatten the DOM long before
MAX_NESTING = 1000
#: longest skipped reference (javascript:, data:, a trap URL) kept for the skip report
MAX_SKIPPED_URL = 2083


class Discovery:
    """Turns one response into NewUrl rows: its redirect target, or its links and
    requisites, or the sitemaps a robots.txt points to, or what a sitemap lists; each
    through the one normaliser and the scope rules."""

    def __init__(self, cfg: SiteConfig, scope: Scope) -> None:
        self.cfg = cfg
        self.scope = scope
        # a reference's normal form and scope decision depend on its depth only through
        # "deeper than max_depth": cached on that, pages at every depth share the answers
        self._scoped = lru_cache(maxsize=1 << 13)(self._scope)  # bounded: a few MB
        self.agent = product_token(cfg.crawl.user_agent)  # what a <meta name> may name

    def wants_body(self, status: int, headers: dict[str, str], truncated: str | None,
                   item: UrlItem | None = None) -> bool:
        """Whether `discover` reads links from this response's body (else it needs none).
        Without `item`, only a page's body is known to be wanted, not a sitemap's."""
        if _parses(status, mime_of(headers.get("content-type")), truncated):
            return True
        return (item is not None and 200 <= status < 300
                and (is_sitemap(item) or item.via == Via.ROBOTS) and self._reads_sitemaps(item))

    def discover(
        self, item: UrlItem, status: int, body: bytes | None, truncated: str | None,
        headers: dict[str, str],
    ) -> Discovered:
        """(canonical redirect target or None, URLs found) for one stored response.
        `body` is the raw body as received when `wants_body` says so, else None."""
        if item.via == Via.ROBOTS:  # its redirects are followed by the robots gate
            return Discovered(None, self.robots_links(item, status, body, truncated, headers))
        if is_sitemap(item):
            return self.sitemap_links(item, status, body, headers)
        if status in REDIRECT_STATUSES and "location" in headers:
            return self.redirect(item, headers["location"])
        mime = mime_of(headers.get("content-type"))
        said = self._header_robots(status, headers)
        if body is None or mime is None or not _parses(status, mime, truncated):
            return Discovered(None, [], robots=robots_value(said)) if said else NOTHING
        try:
            text, cut = decode_body(body, headers.get("content-encoding"), MAX_PARSE_BYTES)
        except DecodeError as exc:
            log.warning("cannot decode %s for links: %s", item.url, exc)
            return NOTHING
        if cut:  # past MAX_PARSE_BYTES, or a compressed stream that ends early
            log.warning("links of %s taken from a partial body (%d bytes decoded)",
                        item.url, len(text))
        note = None
        if mime in HTML_TYPES and (deep := too_deep_at(text, MAX_NESTING)) is not None:
            log.warning("%s nests deeper than %d elements: links taken from its first %d "
                        "bytes (%s)", item.url, MAX_NESTING, deep, PARSE_BUDGET)
            text = text[:deep]
            note = f"{PARSE_BUDGET}: markup nested deeper than {MAX_NESTING} elements, " \
                   f"links read from the first {deep} bytes"
        found = extract(text, item.url, mime, headers.get("content-type"))
        words = page_text(found) if mime in HTML_TYPES else None
        if found.metas and self.cfg.scope.meta_robots:
            said |= meta_directives(found.metas, self.agent)
        return Discovered(None, self.links(item, found.links, NOFOLLOW in said),
                          note or found.needs_browser, words, robots_value(said))

    def _header_robots(self, status: int, headers: dict[str, str]) -> frozenset[str]:
        """The X-Robots-Tag directives of a 2xx answer, when [scope] meta_robots is on."""
        if not self.cfg.scope.meta_robots or not 200 <= status < 300:
            return frozenset()
        return header_directives(headers.get(HEADER), self.agent)

    def links(self, item: UrlItem, found: tuple[Link, ...],
              nofollow: bool = False) -> list[NewUrl]:
        """The NewUrl rows of a page's links; with `nofollow` (the page says so), its links
        but its requisites are skipped under META_ROBOTS (unless a scope rule skips them
        first), so the report counts them."""
        # requisites are never crawled further: only their own requisites are followed
        links = [x for x in found if item.mode != REQUISITE or x.kind == LinkKind.REQUISITE]
        kept, dropped = self.scope.cap_outlinks(links, keep_first=_is_requisite)
        urls = [self.decide(x.url, item.depth + 1, self.cfg.crawl.max_redirects,
                            x.kind == LinkKind.REQUISITE, x.kind) for x in kept]
        if nofollow:
            urls = [_not_followed(u) if u.kind == LinkKind.LINK and not u.skip_reason else u
                    for u in urls]
        if dropped:
            log.warning("%s has %d links; the last %d were not followed (max_outlinks)",
                        item.url, len(links), dropped)
            kept_set = set(kept)
            urls += [self.decide(x.url, item.depth + 1, 0, False, x.kind)._replace(
                         mode="", skip_reason="max_outlinks")
                     for x in links if x not in kept_set]
        return urls

    def redirect(self, item: UrlItem, location: str) -> Discovered:
        # a requisite that redirects (an on-site image moved to a CDN) is still a requisite
        requisite = item.mode == REQUISITE or item.via == Via.REQUISITE
        new = self.decide(join(item.url, location), item.depth, item.redirects_left - 1,
                          requisite, LinkKind.REDIRECT)
        if item.redirects_left <= 0 and not new.skip_reason:
            log.warning("redirect limit reached at %s -> %s", item.url, new.url)
            new = new._replace(mode="", skip_reason="max_redirects")
        return Discovered(new.url, [new])

    def robots_links(self, item: UrlItem, status: int, body: bytes | None,
                     truncated: str | None, headers: dict[str, str]) -> list[NewUrl]:
        """The sitemaps of an on-site robots.txt answer (sitemaps.robots_sitemaps)."""
        if not self._reads_sitemaps(item):
            return []
        found = sitemaps.robots_sitemaps(status, body, headers.get("content-encoding"),
                                         truncated is not None)
        return [self._sitemap(item.url, raw, self.cfg.crawl.max_redirects, LinkKind.LINK)
                for raw in found]

    def sitemap_links(self, item: UrlItem, status: int, body: bytes | None,
                      headers: dict[str, str]) -> Discovered:
        """A sitemap's redirect target, or what it lists: the sitemaps of an index; the
        pages of a urlset or text sitemap, found at depth 1 (with their lastmod). Every URL
        goes through the scope rules; a broken sitemap gives what was read before the damage."""
        if status in REDIRECT_STATUSES and "location" in headers:
            new = self._sitemap(item.url, headers["location"], item.redirects_left - 1,
                                LinkKind.REDIRECT)
            if item.redirects_left <= 0 and not new.skip_reason:
                log.warning("redirect limit reached at %s -> %s", item.url, new.url)
                new = new._replace(mode="", skip_reason="max_redirects")
            return Discovered(new.url, [new])
        if body is None or not self._reads_sitemaps(item):
            return NOTHING
        if mime_of(headers.get("content-type")) in PARSED_TYPES:
            log.info("%s is not a sitemap (%s)", item.url, headers.get("content-type"))
            return NOTHING
        read = sitemaps.parse(body, headers.get("content-encoding"))
        if read.problem:
            log.warning("sitemap %s: %s", item.url, read.problem)
        if read.is_index:
            return Discovered(None, [
                self._sitemap(item.url, e.loc, self.cfg.crawl.max_redirects, LinkKind.LINK)
                for e in read.entries])
        return Discovered(None, [self._page(item.url, e) for e in read.entries])

    def _reads_sitemaps(self, item: UrlItem) -> bool:
        """Sitemaps are on, and this robots.txt is the site's own (a sitemap: any)."""
        return self.cfg.scope.sitemaps and (item.via != Via.ROBOTS
                                            or self.scope.on_site(item.url))

    def _sitemap(self, base: str, raw: str, redirects_left: int, kind: str) -> NewUrl:
        """A sitemap to fetch: like a requisite (fetched, never crawled as a page), at
        depth 0, wherever the scope allows it (a robots.txt may name another host's)."""
        try:
            url = normalize(join(base, raw), self.cfg.scope.ignore_query)
        except InvalidURL as exc:
            return NewUrl(raw[:MAX_SKIPPED_URL], "", 0, 0, "", Via.SITEMAP, kind,
                          skip_reason=exc.reason)
        decision = self.scope.decide(url, 0, True)
        if not decision.allowed:
            return NewUrl(url[:MAX_SKIPPED_URL], canonical_site(url)[0], 0, 0, "", Via.SITEMAP,
                          kind, skip_reason=decision.reason)
        return NewUrl(url, canonical_site(url)[0], 0, redirects_left, REQUISITE, Via.SITEMAP,
                      kind)

    def _page(self, base: str, entry: sitemaps.Entry) -> NewUrl:
        """A page a sitemap lists: a link found at depth 1, as if on a start page."""
        try:
            raw = join(base, entry.loc)
        except InvalidURL as exc:
            return NewUrl(entry.loc[:MAX_SKIPPED_URL], "", 1, 0, "", Via.SITEMAP, LinkKind.LINK,
                          skip_reason=exc.reason)
        new = self.decide(raw, 1, self.cfg.crawl.max_redirects, False, LinkKind.LINK)
        return new._replace(via=Via.SITEMAP, lastmod=None if new.skip_reason else entry.lastmod)

    def decide(
        self, raw: str, depth: int, redirects_left: int, requisite: bool, kind: str
    ) -> NewUrl:
        """Normalise and scope one found reference; skipped URLs are kept with their rule."""
        via = Via.REQUISITE if requisite else (
            Via.REDIRECT if kind == LinkKind.REDIRECT else Via.LINK)
        url, site, mode, reason, valid = self._scoped(raw, requisite,
                                                      depth > self.scope.max_depth)
        return NewUrl(url, site, depth, redirects_left if valid else 0, mode, via, kind,
                      skip_reason=reason)

    def _scope(self, raw: str, requisite: bool,
               too_deep: bool) -> tuple[str, str, str, str | None, bool]:
        """(url, site, mode, skip rule, valid) of a reference found deeper than max_depth
        or not; an invalid one is kept (cut to a sane length) so the report counts it."""
        try:
            url = normalize(raw, self.cfg.scope.ignore_query)
        except InvalidURL as exc:
            return raw[:MAX_SKIPPED_URL], "", "", exc.reason, False
        depth = self.scope.max_depth + 1 if too_deep else 0
        decision = self.scope.decide(url, depth, requisite)
        if not decision.allowed:
            url = url[:MAX_SKIPPED_URL]  # an over-long trap URL is counted, not kept whole
        return (url, canonical_site(url)[0], decision.mode,
                None if decision.allowed else decision.reason, True)


def _parses(status: int, mime: str | None, truncated: str | None) -> bool:
    """A complete-enough 2xx HTML, XHTML or CSS body: one links are read from."""
    return 200 <= status < 300 and mime in PARSED_TYPES and truncated != "time"


def is_sitemap(item: UrlItem) -> bool:
    """A sitemap to read (a page a sitemap lists is via it too, but is crawled as a page)."""
    return item.via == Via.SITEMAP and item.mode == REQUISITE


def _not_followed(new: NewUrl) -> NewUrl:
    return new._replace(mode="", skip_reason=META_ROBOTS)


def _is_requisite(link: Link) -> bool:
    return link.kind == LinkKind.REQUISITE
