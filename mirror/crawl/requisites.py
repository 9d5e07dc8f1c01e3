"""Requisite chains: a frame in a frame in a frame..., bounded by [scope] max_requisite_depth."""

from __future__ import annotations

from collections.abc import Callable

from mirror.crawl.scope import REQUISITE
from mirror.model import Discovered, NewUrl, UrlItem, Via

RULE = "max_requisite_depth"


def bounded(found: Discovered, item: UrlItem, chain: Callable[[int], int],
            limit: int) -> Discovered:
    """`found` on `item`, with the requisites it leads to skipped under RULE when `item`
    is the `limit`-th requisite of a chain below a page. `chain(limit)` counts the chain's
    requisites up to `item` (itself included, at most `limit`); asked only of a requisite
    that finds requisites, as the chain is walked in the manifest."""
    if limit <= 0 or item.mode != REQUISITE or item.via in (Via.SITEMAP, Via.ROBOTS):
        return found
    if found.target is not None or not any(_chained(u) for u in found.links):
        return found  # a redirect is bounded by max_redirects
    if chain(limit) < limit:
        return found
    return found._replace(links=[u._replace(mode="", skip_reason=RULE) if _chained(u) else u
                                 for u in found.links])


def _chained(url: NewUrl) -> bool:
    return url.mode == REQUISITE and not url.skip_reason
