"""One HTTP exchange -> Exchange; the only crawl-side module that imports aiohttp."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass

import aiohttp
from yarl import URL

from mirror.archive.warcwriter import Exchange, sha1_digest
from mirror.config import CrawlSection

log = logging.getLogger(__name__)

CHUNK = 1 << 16
SPOOL_IN_MEMORY = 1 << 20  # bodies larger than this spill to a temporary file
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate"


class FetchError(Exception):
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


def open_session(user_agent: str, connections: int) -> aiohttp.ClientSession:
    """A session that never follows redirects, never decompresses and keeps no cookies.
    Headers of the site file go with each request (secret ones only to the site's hosts)."""
    base = {"User-Agent": user_agent, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, limit_per_host=0),
        headers=base,
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
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
    try:
        async with asyncio.timeout_at(deadline):
            resp = await session.get(
                URL(url, encoded=True), allow_redirects=False, timeout=timeout,
                headers=headers,
            )
    except TimeoutError as exc:
        raise FetchError("timeout", f"no response within {limits.timeout:g}s") from exc
    except aiohttp.ClientError as exc:
        raise _translate(exc) from exc
    except (OSError, ValueError) as exc:
        raise FetchError("connect", str(exc) or type(exc).__name__) from exc
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
    if isinstance(exc, aiohttp.ClientResponseError):
        return FetchError("protocol", exc.message or str(exc))
    if isinstance(exc, aiohttp.InvalidURL):
        return FetchError("url", str(exc), retryable=False)
    return FetchError("network", str(exc) or type(exc).__name__)
