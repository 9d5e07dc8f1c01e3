"""robots.txt in a crawl: fetched once per origin, archived like any capture, cached (RFC 9309)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from mirror import reader
from mirror.archive import header_map
from mirror.fetch import FetchError, fetch
from mirror.robots import (
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    RobotsCache,
    RobotsRules,
    robots_url,
    rules_from_response,
)
from mirror.urls import InvalidURL, join, normalize, site_key

if TYPE_CHECKING:
    from mirror.crawler import Crawler

log = logging.getLogger(__name__)

#: most bytes of a (compressed) robots.txt body read for parsing
READ_LIMIT = 4 * ROBOTS_MAX_BYTES
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class RobotsGate:
    """The rules for a URL's origin, fetching robots.txt when the cache has none.

    One fetch per robots.txt at a time: concurrent workers wait for the same answer. Each
    response (redirect hops included) is archived through the crawler, so a run's archive
    shows which rules it obeyed.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.cache = RobotsCache()
        self._pending: dict[str, asyncio.Future[RobotsRules]] = {}

    async def rules_for(self, session: object, url: str) -> RobotsRules:
        key = robots_url(url)
        rules = self.cache.get(key)
        if rules is not None and not self.cache.needs_refresh(key):
            return rules
        pending = self._pending.get(key)
        if pending is not None:  # someone is fetching it: old rules stay in force meanwhile
            return rules if rules is not None else await asyncio.shield(pending)
        future: asyncio.Future[RobotsRules] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            fresh, retry_in = await self._fetch(session, key)
            rules = self.cache.put(key, fresh, retry_in=retry_in)
            log.info("%s: %s", key, rules.reason)
            future.set_result(rules)
            return rules
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._pending[key]

    async def _fetch(self, session: object, url: str) -> tuple[RobotsRules, float | None]:
        """Follow up to five redirects (RFC 9309 2.3.1.2), archiving each answer."""
        for _ in range(ROBOTS_MAX_REDIRECTS + 1):
            answer = await self._fetch_one(session, url)
            if isinstance(answer, str):
                return rules_from_response(None, None, error=answer), None
            status, headers, body, truncated = answer
            target = headers.get("location")
            if status in REDIRECTS and target:
                try:
                    url = normalize(join(url, target))
                except InvalidURL as exc:
                    return rules_from_response(None, None, error=str(exc)), None
                continue
            rules = rules_from_response(status, body, truncated=truncated,
                                        content_encoding=headers.get("content-encoding"))
            return rules, None
        return rules_from_response(399, None), None  # too many redirects: allow all

    async def _fetch_one(
        self, session: object, url: str
    ) -> str | tuple[int, dict[str, str], bytes, bool]:
        """(status, headers, body, truncated) of one robots.txt answer, or an error text."""
        crawler = self.crawler
        item = crawler.manifest.ensure_url(crawler.run_id, url, site_key(url), "robots")
        if item is None:  # fetched earlier in this run (before a restart): read it back
            stored = crawler.manifest.capture_in_run(crawler.run_id, url)
            if stored is None:
                return "robots.txt is being fetched by another worker"
            raw = reader.read_raw(crawler.warc_path(stored.filename), stored.offset)
            headers = header_map(raw.headers or ())
            return raw.status or 0, headers, raw.payload[:READ_LIMIT], False
        try:
            ex = await fetch(session, url, crawler.limits,  # type: ignore[arg-type]
                             crawler.cfg.headers_for(crawler.scope.on_site(url)))
        except FetchError as exc:
            crawler.manifest.give_up(crawler.run_id, item, str(exc))
            return str(exc)
        try:
            crawler.store_out_of_band(item, ex)
            ex.body.seek(0)
            body = ex.body.read(READ_LIMIT)
            headers = header_map(ex.response_headers)
            return ex.status, headers, body, bool(ex.truncated) or len(body) < ex.body_length
        finally:
            ex.body.close()
