"""The run's sitemap URL budget ([scope] max_sitemap_urls): how many URLs all the sitemaps
of a run may list. What a sitemap lists past it is counted (the rule sitemap-budget in the
report), never stored; once it is spent, the sitemaps still to fetch are skipped under the
same rule. A robots.txt pointing to an index of 40 sitemaps of 50,000 URLs each so costs
the run the budget's URLs, not two million."""

from __future__ import annotations

import logging
from typing import TypeVar

from mirror.manifest.writer import Manifest
from mirror.model import Discovered, UrlItem

log = logging.getLogger(__name__)

T = TypeVar("T")


def within(urls: list[T], left: int | None) -> tuple[list[T], int]:
    """The first `left` of `urls` (None: all of them), and how many are left out."""
    if left is None or len(urls) <= left:
        return urls, 0
    return urls[:left], len(urls) - left


class SitemapBudget:
    """The budget of one run, counted in the manifest (sitemap_reads): a resumed run, and
    the workers of a shared run, spend the same one."""

    def __init__(self, manifest: Manifest, limit: int) -> None:
        self.manifest = manifest
        self.limit = limit  # 0: no limit

    def spent(self, run_id: int) -> bool:
        return self.limit > 0 and self.manifest.sitemaps.urls_taken(run_id) >= self.limit

    def take(self, run_id: int, item: UrlItem, found: Discovered) -> Discovered:
        """What sitemap `item` lists, cut to what is left of the budget; the read is
        recorded (how many it listed, how many were past the budget)."""
        if found.target is not None:  # a redirect: one URL, the sitemap itself elsewhere
            return found
        left = None
        if self.limit > 0:
            left = max(0, self.limit - self.manifest.sitemaps.urls_taken(run_id, but=item.id))
        kept, beyond = within(found.links, left)
        self.manifest.sitemaps.record_read(run_id, item.id, len(found.links), beyond)
        if beyond:
            log.warning("sitemap %s lists %d URLs: the last %d are past the run's "
                        "[scope] max_sitemap_urls (%d) and not crawled",
                        item.url, len(found.links), beyond, self.limit)
        return found._replace(links=kept)
