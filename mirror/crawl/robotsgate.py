"""robots.txt in a crawl: fetched once per origin, archived like any capture, cached (RFC 9309)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from mirror.archive.warcread import RawRecord, read_raw
from mirror.archive.warcwriter import Exchange
from mirror.crawl.fetch import FetchError
from mirror.crawl.parsehelper import Page
from mirror.crawl.robots import (
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    RobotsCache,
    RobotsRules,
    robots_url,
    rules_from_response,
)
from mirror.manifest.writer import Manifest, UrlItem
from mirror.model import NOTHING, Discovered, HostLease, Via
from mirror.web.http import REDIRECT_STATUSES, header_map
from mirror.web.urls import InvalidURL, join, normalize, site_key

log = logging.getLogger(__name__)

#: most bytes of a (compressed) robots.txt body read for parsing
READ_LIMIT = 4 * ROBOTS_MAX_BYTES
#: fetches one URL (robots.txt) with the session the caller gives
Fetch = Callable[[object, str], Awaitable[Exchange]]
Answer = tuple[int, dict[str, str], bytes, bool]  # status, headers, body, truncated


class RobotsArchive(Protocol):
    """Where robots.txt answers come from besides the network, and where they go."""

    def lookup(self, url: str) -> RawRecord | str | None:
        """An archived answer to use instead of fetching `url`, an error text, or None to
        fetch it now (then `keep` is told what came of it)."""

    def keep(self, url: str, answer: Exchange | str) -> None:
        """What fetching `url` gave: an exchange to archive, or why there is none."""


class RobotsGate:
    """The rules for a URL's origin, fetching robots.txt when the cache has none.

    One fetch per robots.txt at a time: concurrent workers wait for the same answer. Each
    answer (redirect hops included) goes to the archive, so a run's archive shows which
    rules it obeyed. `mirror explain` uses the same gate with an archive that looks in every
    run and keeps nothing.
    """

    def __init__(self, fetch: Fetch, archive: RobotsArchive) -> None:
        self.fetch = fetch
        self.archive = archive
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
            rules = self.cache.put(key, await self._fetch(session, key))
            log.info("%s: %s", key, rules.reason)
            future.set_result(rules)
            return rules
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._pending[key]

    async def _fetch(self, session: object, url: str) -> RobotsRules:
        """Follow up to five redirects (RFC 9309 2.3.1.2), archiving each answer."""
        for _ in range(ROBOTS_MAX_REDIRECTS + 1):
            answer = await self._fetch_one(session, url)
            if isinstance(answer, str):
                return rules_from_response(None, None, error=answer)
            status, headers, body, truncated = answer
            target = headers.get("location")
            if status in REDIRECT_STATUSES and target:
                try:
                    url = normalize(join(url, target))
                except InvalidURL as exc:
                    return rules_from_response(None, None, error=str(exc))
                continue
            return rules_from_response(status, body, truncated=truncated,
                                       content_encoding=headers.get("content-encoding"))
        return rules_from_response(399, None)  # too many redirects: allow all

    async def _fetch_one(self, session: object, url: str) -> Answer | str:
        """(status, headers, body, truncated) of one robots.txt answer, or an error text."""
        stored = self.archive.lookup(url)
        if isinstance(stored, str):
            return stored
        if stored is not None:
            return (stored.status or 0, header_map(stored.headers or ()),
                    stored.payload[:READ_LIMIT], "WARC-Truncated" in stored.warc)
        try:
            ex = await self.fetch(session, url)
        except FetchError as exc:
            self.archive.keep(url, str(exc))
            return str(exc)
        try:
            self.archive.keep(url, ex)
            ex.body.seek(0)
            body = ex.body.read(READ_LIMIT)
            return (ex.status, header_map(ex.response_headers), body,
                    bool(ex.truncated) or len(body) < ex.body_length)
        finally:
            ex.body.close()


class RunRobots:
    """robots.txt in a run: leased in the manifest like a URL, archived through `store`
    with what it links to (its sitemaps, found by `discover`, as start-up finds them in a
    robots.txt it adopts); one this run archived before a restart is read back, not
    fetched again. In a shared run (`lease_for`) the worker that fetches it also keeps
    the answer in the manifest (robots_answers), where the run's other workers read it:
    robots.txt is fetched once per host and run, by whichever worker needs it first."""

    def __init__(self, manifest: Manifest, run_id: Callable[[], int],
                 warc_path: Callable[[str], Path],
                 store: Callable[[UrlItem, Exchange, Discovered], None],
                 discover: Callable[[UrlItem, Page], Discovered] | None = None,
                 lease_for: Callable[[str], HostLease | None] | None = None) -> None:
        self.manifest = manifest
        self.lease_for = lease_for  # a shared run: the host lease robots.txt is under
        self.run_id = run_id
        self.warc_path = warc_path
        self.store = store
        self.discover = discover
        self._leased: dict[str, UrlItem | None] = {}

    def lookup(self, url: str) -> RawRecord | str | None:
        site = site_key(url)
        lease = self.lease_for(site) if self.lease_for is not None else None
        item = self.manifest.urls.ensure(self.run_id(), url, site, Via.ROBOTS, lease=lease)
        if item is not None:
            self._leased[url] = item
            return None
        if self.lease_for is not None \
                and (answer := self.manifest.robots_answers.get(self.run_id(), url)) is not None:
            return answer if isinstance(answer, str) else _as_record(answer)
        stored = self.manifest.captures.in_run(self.run_id(), url)
        if stored is None:
            return "robots.txt is being fetched by another worker"
        path = self.warc_path(stored.filename)
        if self.lease_for is not None and not path.exists():
            self._leased[url] = None  # another worker archived it: fetched, not stored
            return None
        return read_raw(path, stored.offset)

    def keep(self, url: str, answer: Exchange | str) -> None:
        item = self._leased.pop(url)
        if self.lease_for is not None:  # for the run's other workers (before the capture)
            self._share(url, answer)
        if item is None:
            return
        if isinstance(answer, str):
            lease = self.lease_for(item.site) if self.lease_for is not None else None
            self.manifest.urls.give_up(self.run_id(), item, answer, lease=lease)
        else:
            self.store(item, answer, self._links(item, answer))

    def _share(self, url: str, answer: Exchange | str) -> None:
        """The answer in the manifest, where the shared run's other workers read it."""
        answers = self.manifest.robots_answers
        if isinstance(answer, str):
            answers.save_error(self.run_id(), url, answer)
            return
        answer.body.seek(0)
        body = answer.body.read(READ_LIMIT)
        answer.body.seek(0)
        answers.save(self.run_id(), url, answer.status, answer.response_headers, body,
                     bool(answer.truncated) or len(body) < answer.body_length)

    def _links(self, item: UrlItem, ex: Exchange) -> Discovered:
        """What the robots.txt answer links to: the page discovery reads is the one
        CaptureStore.page gives at adoption (a body only for a 2xx, read whole)."""
        if self.discover is None:
            return NOTHING
        body = None
        if 200 <= ex.status < 300:
            ex.body.seek(0)
            body = ex.body.read()
            ex.body.seek(0)
        return self.discover(item, Page(ex.status, header_map(ex.response_headers), body,
                                        ex.truncated))


def _as_record(answer: tuple[int, tuple[tuple[str, str], ...], bytes, bool]) -> RawRecord:
    """A robots.txt answer kept in the manifest as the record RobotsGate reads."""
    status, headers, body, truncated = answer
    return RawRecord("response", {"WARC-Truncated": "length"} if truncated else {},
                     status, headers, body)
