"""The browser's requests, answered through mirror (the Answerer of a render).

A page loaded in the browser asks for its document, scripts, JSON, images... Each request is
answered here, never by the network directly:

- the document request: from the exchange mirror just fetched (or, for a 304 that confirms
  an earlier capture, from that capture);
- a URL this run already archived: from the archive (no request);
- any other GET: fetched by mirror under the run's politeness (its host's turn under
  `delay`, robots.txt, dead hosts, 429/503 and Retry-After), with the conditional headers of
  an earlier run's capture, and stored as an ordinary capture with its own URL row (mode
  requisite, via "browser"), committed before the page gets it: a crash after that point
  finds it archived, and the page, fetched and rendered again, is answered from the archive.

Requests mirror does not make fail in the page (the Answerer returns None): a method other
than GET (a POST may change something on the server: a vote, a form, an analytics hit, and
mirror's promise is that it only reads), a URL out of scope (the site's requisite rules, as
for a link), one robots.txt disallows, one on a host known dead, one that fails.

A URL is stored as the browser asked for it, a jQuery-style cache buster (`_=<digits>`)
included: the record tells what was requested, and replayers find it (pywb drops `_=` from
the asked and the stored URL alike; wabac.js's fuzzy lookup searches only archived URLs
that begin with the asked one's `<path>?`; our serve ignores `_`). The page's
`fetch('/api/x.json?_=' + Date.now())` is still the same resource at every load: a request
that differs from a URL of this run's captures only by its `_=` is answered from that
capture (its cache key, `without_cache_buster`), so the site is asked once per run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mirror import crashpoints
from mirror.archive import warcread
from mirror.browser.api import BrowserAnswer, BrowserRequest
from mirror.crawl.fetch import FetchError
from mirror.crawl.politeness import http_error
from mirror.crawl.robots import RobotsRules
from mirror.model import Exchange, LinkKind, NewUrl, UrlItem, Via
from mirror.web.codings import DecodeError, decode_body
from mirror.web.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from mirror.crawl.parsehelper import Page

log = logging.getLogger(__name__)

#: the query parameter jQuery (cache: false) and many apps add to defeat caches
CACHE_BUSTER = "_"
#: headers the answer does not pass on: the body is given decoded and whole
_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})
#: largest body given to the browser (a bigger one is given cut)
MAX_ANSWER_BYTES = 64 << 20
#: how long a request waits for a URL another worker is fetching to be archived
WAIT_OTHER = 30.0


def without_cache_buster(url: str) -> str:
    """`url` without `_=<digits>` query parameters."""
    parts = urlsplit(url)
    if CACHE_BUSTER + "=" not in parts.query:
        return url
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if not (k == CACHE_BUSTER and v.isdigit())]
    return urlunsplit(parts._replace(query=urlencode(kept)))


def answer_of(status: int, headers: tuple[tuple[str, str], ...] | list[tuple[str, str]],
              body: bytes, reason: str = "") -> BrowserAnswer:
    """The answer a browser gets for a stored response: the body decoded of its
    Content-Encoding, the headers that no longer fit it dropped."""
    coding = next((v for k, v in headers if k.lower() == "content-encoding"), None)
    try:
        data, _ = decode_body(body, coding, MAX_ANSWER_BYTES)
    except DecodeError:
        data = body
    kept = [(k, v) for k, v in headers if k.lower() not in _DROPPED]
    return BrowserAnswer(status, kept, data, reason)


def document_answer(ex: Exchange, page: Page) -> BrowserAnswer:
    """The page's document as the browser gets it: the exchange just fetched, or for a 304
    that confirms an archived capture, that capture as discovery read it."""
    if ex.status != page.status and page.body is not None:
        return answer_of(page.status, list(page.headers.items()), page.body)
    answer = _answer_of_exchange(ex)
    ex.body.seek(0)
    return answer


@dataclass
class PageRequests:
    """What one render asked mirror for: the requisites it used (links of the page)."""

    page: UrlItem
    document: BrowserAnswer
    used: dict[str, NewUrl] = field(default_factory=dict)
    refused: int = 0


class BrowserFetcher:
    """Answers renders' requests for one run (see the module's docstring)."""

    def __init__(self, work: Any, session: object) -> None:
        self.work = work  # the run's UrlWork (its store, frontier, outcomes, robots gate)
        self.session = session
        self._inflight: dict[str, asyncio.Future[bool]] = {}
        #: URLs given back to the frontier to be tried again (it fetches them, not a page)
        self._retrying: set[str] = set()

    def answerer(self, requests: PageRequests
                 ) -> Callable[[BrowserRequest], Awaitable[BrowserAnswer | None]]:
        async def answer(request: BrowserRequest) -> BrowserAnswer | None:
            try:
                found = await self._answer(requests, request)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bad request never stops the render, nor the run
                log.exception("browser request %s of %s", request.url, requests.page.url)
                found = None
            if found is None:
                requests.refused += 1
            return found
        return answer

    async def _answer(self, requests: PageRequests,
                      request: BrowserRequest) -> BrowserAnswer | None:
        if request.is_navigation:
            return requests.document if _same_page(request.url, requests.page.url) else None
        if request.method != "GET":
            return None
        new = self._scoped(requests.page, request.url)
        if new is None:
            return None
        if not await self._allowed(new):
            return None
        new = new._replace(url=self._known(new.url))
        found = await self._archived_or_fetched(new)
        if isinstance(found, str):  # archived, as asked or under another cache buster
            requests.used.setdefault(found, new._replace(url=found))
            return self._from_archive(found)
        requests.used.setdefault(new.url, new)
        return found

    def _scoped(self, page: UrlItem, raw: str) -> NewUrl | None:
        """The requisite row of a URL the page asked for, None when out of scope."""
        work = self.work
        try:
            url = normalize(raw, work.cfg.scope.ignore_query)
        except InvalidURL:
            return None
        new = work.parsers.discovery.decide(url, page.depth + 1, work.cfg.crawl.max_redirects,
                                            True, LinkKind.REQUISITE)
        return None if new.skip_reason else new._replace(via=Via.BROWSER)

    async def _allowed(self, new: NewUrl) -> bool:
        """robots.txt and the dead hosts: what the frontier checks before a fetch."""
        work = self.work
        if work.outcomes.dead.reason(new.site) is not None:
            return False
        if not work.cfg.scope.robots:
            return True
        rules: RobotsRules = await work.robots.rules_for(self.session, new.url)
        return rules.allowed(new.url, work.cfg.crawl.user_agent)

    def _known(self, url: str) -> str:
        """The URL this run knows the resource by: `url` when it has no cache buster or the
        run has no other URL for it, else the run's first URL with the same cache key
        (asked by an earlier page load, or left pending by a crash: fetched under that URL,
        the frontier's row and the browser's request are one resource, stored once)."""
        key = without_cache_buster(url)
        if key == url:
            return url
        return next((known for known in self.work.manifest.urls.of_path(
            self.work.run_id, url.split("?")[0]) if without_cache_buster(known) == key), url)

    async def _archived_or_fetched(self, new: NewUrl) -> BrowserAnswer | str | None:
        """The URL of this run's captures that answers `new` (as `_known` names it),
        fetching and storing it if there is none; or the answer to give the page when the
        fetch is to be tried again later; None: failed."""
        work = self.work
        while True:
            if work.manifest.captures.in_run(work.run_id, new.url) is not None:
                return new.url
            if new.url in self._retrying:  # handed to the frontier: not fetched again here
                return None
            pending = self._inflight.get(new.url)
            if pending is None:
                break
            await asyncio.shield(pending)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._inflight[new.url] = done
        try:
            found = await self._fetch_and_store(new)
            done.set_result(found is True)
            if found is True:
                return new.url
            return found if isinstance(found, BrowserAnswer) else None
        finally:
            if not done.done():
                done.set_result(False)
            del self._inflight[new.url]

    async def _fetch_and_store(self, new: NewUrl) -> BrowserAnswer | bool:
        """Fetch and store `new` under the run's politeness: its host's slot (`per_host`)
        held and its turn under `delay` taken, as for any URL of the frontier. The run's
        retry rule applies: an answer or failure to try again (5xx, 429, a reset) with
        tries left is not stored now; the URL goes back to the frontier, which retries it
        under max_tries and Retry-After like any URL, and the page, which cannot wait that
        long, gets the answer the server gave (or fails the request)."""
        work = self.work
        item = work.manifest.urls.ensure(work.run_id, new.url, new.site, Via.BROWSER)
        if item is None:  # the frontier has it (or it failed in this run): wait for it
            return await self._wait_for_other(new.url)
        try:
            return await self._fetched(item)
        except BaseException:  # cancelled with its tab, or a fault: the frontier fetches it
            work.unlease(item)  # (a no-op once stored or handed back)
            work.frontier.notify()
            raise

    async def _fetched(self, item: UrlItem) -> BrowserAnswer | bool:
        work = self.work
        prev = work.store.previous(work.run_id, item)
        try:
            async with work.frontier.slot(item.site):
                ex = await work.fetch_item(self.session, item, prev)
        except FetchError as exc:
            outcomes = work.outcomes
            if not outcomes.host_failed(item.site, exc) or not outcomes.fail_if_dead(item):
                self._later(item, str(exc), exc.retryable)
            return False
        try:
            work.outcomes.dead.answered(item.site)
            wait = work.outcomes.host_feedback(item.site, ex)
            error = http_error(ex.status, ex.truncated)
            if error and item.tries + 1 < work.cfg.crawl.max_tries:
                self._later(item, error, True, wait)
                return _answer_of_exchange(ex)
            _, links = await work.discovered(item, ex, prev)
            work.store.store(work.run_id, item, ex, error, prev, links)
            work.store.commit_group()  # archived before the page uses it
            crashpoints.reached("render:requisite", "requisite")
        finally:
            ex.body.close()
        return True

    def _later(self, item: UrlItem, error: str, retryable: bool, wait: float = 0.0) -> None:
        """The requisite back to the frontier (retried later) or failed for good."""
        self._retrying.add(item.url)
        self.work.outcomes.retry_or_fail(item, error, retryable, wait)

    async def _wait_for_other(self, url: str) -> bool:
        """A URL another worker holds: answered once it is archived (bounded)."""
        work = self.work
        for _ in range(int(WAIT_OTHER * 10)):
            work.store.commit_group()
            if work.manifest.captures.in_run(work.run_id, url) is not None:
                return True
            await asyncio.sleep(0.1)
        return False

    def _from_archive(self, url: str) -> BrowserAnswer | None:
        work = self.work
        stored = work.manifest.captures.in_run(work.run_id, url)
        if stored is None:
            return None
        raw = warcread.read_raw(work.store.warc_path(stored.filename), stored.offset)
        return answer_of(raw.status or stored.status, raw.headers or (), raw.payload)


def _answer_of_exchange(ex: Exchange) -> BrowserAnswer:
    ex.body.seek(0)
    return answer_of(ex.status, ex.response_headers, ex.body.read(MAX_ANSWER_BYTES), ex.reason)


def _same_page(asked: str, page: str) -> bool:
    return asked.split("#", 1)[0] == page or normalize(asked.split("#", 1)[0]) == page
