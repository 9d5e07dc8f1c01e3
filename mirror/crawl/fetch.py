"""One HTTP exchange -> Exchange; the only crawl-side module that imports aiohttp."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookies import BaseCookie

import aiohttp
from aiohttp.abc import AbstractCookieJar
from aiohttp.typedefs import LooseCookies
from yarl import URL

from mirror.archive.warcwriter import Exchange, sha1_digest
from mirror.config import CrawlSection
from mirror.crawl.cookies import FileCookie, read_cookies_txt, site_filter
from mirror.errors import MirrorError
from mirror.web.http import header_map

log = logging.getLogger(__name__)

CHUNK = 1 << 16
SPOOL_IN_MEMORY = 1 << 20  # bodies larger than this spill to a temporary file
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate"


class FetchError(MirrorError):
    """A fetch that produced no response. `kind` is a stable token for reports and retries."""

    def __init__(self, kind: str, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.kind}: {self.args[0]}"


@dataclass(frozen=True)
class Limits:
    timeout: float  # total deadline per fetch
    connect_timeout: float
    read_timeout: float  # longest silence between two reads
    max_bytes: int

    @classmethod
    def from_config(cls, crawl: CrawlSection) -> Limits:
        return cls(timeout=crawl.timeout, connect_timeout=crawl.connect_timeout,
                   read_timeout=crawl.read_timeout, max_bytes=crawl.max_response_bytes)


Session = aiohttp.ClientSession  # what open_session gives, for modules without aiohttp
_NO_URL = URL()


class SiteCookieJar(aiohttp.CookieJar):
    """aiohttp's cookie jar (RFC 6265) that takes cookies from, and sends them to, the
    site's own hosts only; loopback and other IP hosts included (tests, intranets)."""

    def __init__(self, allowed: Callable[[str], bool]) -> None:
        super().__init__(unsafe=True, quote_cookie=False)  # values sent as a browser does
        self._allowed = allowed

    def update_cookies(self, cookies: LooseCookies, response_url: URL = _NO_URL) -> None:
        if self._allowed(str(response_url)):
            super().update_cookies(cookies, response_url)

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        if self._allowed(str(response_url)):
            super().update_cookies_from_headers(headers, response_url)

    def filter_cookies(self, request_url: URL = _NO_URL) -> BaseCookie[str]:
        if not self._allowed(str(request_url)):
            return BaseCookie()
        return super().filter_cookies(request_url)

    def add_file_cookies(self, cookies: Iterable[FileCookie]) -> int:
        """Put cookies of a cookies.txt in the jar, whatever their domain (they still go to
        the site's hosts only); returns how many."""
        n = 0
        for cookie in cookies:
            super().update_cookies({cookie.name: cookie.morsel()}, URL(cookie.url))
            n += 1
        return n


def site_cookie_jar(crawl: CrawlSection, on_site: Callable[[str], bool]) -> SiteCookieJar | None:
    """The run's jar ([crawl] cookies, cookies_file), or None when cookies are off; made in
    the event loop. `on_site` takes canonical URLs (Scope.on_site). Raises CookieFileError."""
    if not crawl.cookies:
        return None
    loaded = read_cookies_txt(crawl.cookies_file) if crawl.cookies_file is not None else []
    jar = SiteCookieJar(site_filter(on_site))  # needs a running event loop
    if crawl.cookies_file is not None:
        log.info("loaded %d cookies from %s", jar.add_file_cookies(loaded), crawl.cookies_file)
    return jar


def open_session(user_agent: str, connections: int,
                 cookie_jar: AbstractCookieJar | None = None,
                 sent: Callable[[str], None] | None = None) -> aiohttp.ClientSession:
    """A session that never follows redirects and never decompresses; it keeps cookies in
    `cookie_jar` (site_cookie_jar), none without one. Headers of the site file go with each
    request (secret ones only to the site's hosts). `sent` is told the URL of each request
    when its headers are handed to aiohttp (politeness counts from then: a new connection,
    or a busy event loop, can hold a request back after its turn came), and again on the
    event loop's next turn: aiohttp tells its trace before it writes a bodiless request's
    headers, in the same step of the task, so the second count is after the bytes went
    out even when the process was descheduled in between (a loaded machine)."""
    base = {"User-Agent": user_agent, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
    traces = []
    if sent is not None:
        async def headers_sent(_session: object, _ctx: object,
                               params: aiohttp.TraceRequestHeadersSentParams) -> None:
            url = str(params.url)
            sent(url)
            asyncio.get_running_loop().call_soon(sent, url)

        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(headers_sent)
        traces.append(trace)
    return aiohttp.ClientSession(
        trace_configs=traces,
        connector=aiohttp.TCPConnector(limit=connections, limit_per_host=0),
        headers=base,
        auto_decompress=False,
        cookie_jar=cookie_jar if cookie_jar is not None else aiohttp.DummyCookieJar(),
        trust_env=False,
        max_line_size=65536,
        max_field_size=65536,
    )


async def fetch(
    session: aiohttp.ClientSession, url: str, limits: Limits,
    headers: dict[str, str] | None = None,
) -> Exchange:
    """GET `url` (already canonical) and return the exchange with the raw, de-chunked body.

    A body cut by the size cap, the total deadline or a disconnect is returned with
    `truncated` set; failures before a response head raise FetchError.
    """
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=limits.connect_timeout, sock_read=limits.read_timeout
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.timeout
    with _translated(limits):
        async with asyncio.timeout_at(deadline):
            resp = await session.get(
                URL(url, encoded=True), allow_redirects=False, timeout=timeout,
                headers=headers,
            )
    try:
        peer = _peer_ip(resp)
        body, length, truncated, digest = await _read_body(resp, deadline, limits.max_bytes)
    finally:
        resp.release()
    return Exchange(
        url=url,
        method="GET",
        target=resp.request_info.url.raw_path_qs or "/",
        request_headers=tuple(resp.request_info.headers.items()),
        http_version=f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1",
        status=resp.status,
        reason=resp.reason or "",
        response_headers=tuple(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers
        ),
        body=body,
        body_length=length,
        truncated=truncated,
        peer_ip=peer,
        payload_digest=digest,
    )


@dataclass(frozen=True)
class FormAnswer:
    """The last answer to send_form(), after the redirects it followed; not archived."""

    url: str
    statuses: tuple[int, ...]  # each answer's status, the first one first
    headers: dict[str, str]  # the last answer's, names lower-cased (first value wins)
    body: bytes  # the last answer's body as received (content-coded), cut at max_bytes


async def send_form(
    session: aiohttp.ClientSession, url: str, method: str, fields: Sequence[tuple[str, str]],
    limits: Limits, headers: dict[str, str] | None = None, max_redirects: int = 10,
) -> FormAnswer:
    """Send form fields to `url` (POST: a urlencoded body; GET: the query), following
    redirects, with the session's cookies. Failures before an answer raise FetchError."""
    timeout = aiohttp.ClientTimeout(total=limits.timeout, sock_connect=limits.connect_timeout,
                                    sock_read=limits.read_timeout)
    post = method.upper() == "POST"
    with _translated(limits):
        async with asyncio.timeout(limits.timeout), session.request(
            method.upper(), URL(url), data=list(fields) if post else None,
            params=None if post else list(fields), headers=headers, timeout=timeout,
            allow_redirects=max_redirects > 0, max_redirects=max(max_redirects, 1),
        ) as resp:
            body = bytearray()
            async for chunk in resp.content.iter_chunked(CHUNK):
                body += chunk[:limits.max_bytes - len(body)]
                if len(body) >= limits.max_bytes:
                    break
            return FormAnswer(
                url=str(resp.url), statuses=(*(r.status for r in resp.history), resp.status),
                headers=header_map(resp.headers.items()),
                body=bytes(body))


@contextmanager
def _translated(limits: Limits) -> Iterator[None]:
    """Failures before an answer, as FetchError (aiohttp's never leave this module)."""
    try:
        yield
    except TimeoutError as exc:
        raise FetchError("timeout", f"no response within {limits.timeout:g}s") from exc
    except aiohttp.ClientError as exc:
        raise _translate(exc) from exc
    except (OSError, ValueError) as exc:
        raise FetchError("connect", str(exc) or type(exc).__name__) from exc


async def _read_body(
    resp: aiohttp.ClientResponse, deadline: float, max_bytes: int
) -> tuple[tempfile.SpooledTemporaryFile[bytes], int, str | None, str]:
    body: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)
    hasher = hashlib.sha1()  # the payload digest, known before the record is written
    length = 0
    truncated: str | None = None
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in resp.content.iter_chunked(CHUNK):
                room = max_bytes - length
                body.write(chunk[:room])
                hasher.update(chunk[:room])
                length += min(len(chunk), room)
                if len(chunk) > room:
                    truncated = "length"
                    break
    except TimeoutError:
        truncated = "time"
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, OSError) as exc:
        log.debug("body of %s cut short: %s", resp.url, exc)
        truncated = "disconnect"
    body.seek(0)
    return body, length, truncated, sha1_digest(hasher)


def _peer_ip(resp: aiohttp.ClientResponse) -> str | None:
    conn = resp.connection
    if conn is None or conn.transport is None:
        return None
    peer = conn.transport.get_extra_info("peername")
    return str(peer[0]) if peer else None


def _translate(exc: aiohttp.ClientError) -> FetchError:
    """Map aiohttp's exception tree onto our few kinds, at this one boundary."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError | aiohttp.SocketTimeoutError):
        return FetchError("timeout", str(exc) or "timed out")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return FetchError("dns", str(exc))
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return FetchError("tls", str(exc), retryable=False)
    if isinstance(exc, aiohttp.ClientConnectorError):
        err = exc.os_error
        reason = os.strerror(err.errno) if err.errno else str(err) or type(err).__name__
        return FetchError("connect", f"cannot connect to {exc.host}:{exc.port}: {reason}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return FetchError("disconnect", "server closed the connection before responding")
    if isinstance(exc, aiohttp.ClientOSError) and exc.errno == errno.ECONNRESET:
        return FetchError("reset", "the server reset the connection")
    if isinstance(exc, aiohttp.ClientResponseError):
        return FetchError("protocol", exc.message or str(exc))
    if isinstance(exc, aiohttp.InvalidURL):
        return FetchError("url", str(exc), retryable=False)
    return FetchError("network", str(exc) or type(exc).__name__)
