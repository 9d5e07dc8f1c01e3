"""A hostile test server on 127.0.0.1: slow, huge, malformed and trap-laden routes, each with a
control route that must still be accepted, and a request log with monotonic timestamps.

Use it with `pytest_plugins = ("faultsrv",)` in a test module, then the `fault_server` fixture.
PYTEST_DONT_REWRITE: test modules import it before pytest loads it as a plugin.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import lru_cache
from typing import Any

import brotli
import pytest
import zstandard
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MIB = 1024 * 1024
HTML = "text/html; charset=utf-8"
BOMB_PREFIX = b'<!doctype html><title>bomb</title><a href="/ok">ok</a>\n'


@dataclass(frozen=True)
class Pair:
    """A trap route and its control: the crawl must survive the one and accept the other."""

    name: str
    trap: str  # entry path (raw, as sent)
    control: str
    expect: str  # what the crawl must do with the trap: a skip rule or a stored outcome


PAIRS: tuple[Pair, ...] = (
    # P3 timeouts
    Pair("trickle", "/slow/trickle", "/slow/trickle-ok", "WARC-Truncated: time"),
    Pair("stall-after-headers", "/slow/stall", "/slow/stall-ok", "timeout"),
    Pair("stall-before-headers", "/slow/stall-headers", "/slow/stall-ok", "timeout"),
    Pair("endless-body", "/slow/endless", "/slow/endless-ok", "WARC-Truncated: length or time"),
    # P4 decompression bombs (256 MiB of markup each by default)
    Pair("gzip-bomb", "/bomb/gzip", "/bomb/gzip/ok", "stored as received, parse capped"),
    Pair("deflate-bomb", "/bomb/deflate", "/bomb/deflate/ok", "stored as received, parse capped"),
    Pair("br-bomb", "/bomb/br", "/bomb/br/ok", "stored as received, parse capped"),
    Pair("zstd-bomb", "/bomb/zstd", "/bomb/zstd/ok", "stored as received, parse capped"),
    # P8 malformed HTTP
    Pair("bad-chunking", "/bad/chunking", "/bad/chunking-ok", "failed or truncated, no crash"),
    Pair("length-longer", "/bad/length-long", "/bad/length-ok", "WARC-Truncated: disconnect"),
    Pair("length-shorter", "/bad/length-short", "/bad/length-ok", "10 bytes; no smuggled reply"),
    Pair("early-close", "/bad/early-close", "/bad/early-close-ok", "WARC-Truncated: disconnect"),
    Pair("corrupt-gzip", "/bad/gzip", "/bad/gzip-ok", "stored as received, no links"),
    # P5 redirects and schemes
    Pair("redirect-file", "/redir/file", "/redir/ok", "scheme"),
    Pair("redirect-ftp", "/redir/ftp", "/redir/ok", "scheme"),
    Pair("redirect-javascript", "/redir/javascript", "/redir/ok", "scheme"),
    Pair("redirect-data", "/redir/data", "/redir/ok", "scheme"),
    Pair("redirect-loop", "/redir/loop/a", "/redir/chain/8", "seen once each"),
    Pair("redirect-chain", "/redir/chain/0", "/redir/chain/8", "max_redirects"),
    Pair("link-schemes", "/links/schemes", "/ok", "scheme"),
    # P6 traps
    Pair("calendar", "/cal/2026/11", "/cal/2026/12", "max_depth or max_host_pages"),
    Pair("session-ids", "/session/page;jsessionid=S0?PHPSESSID=P0", "/session/other?page=2",
         "one canonical URL"),
    Pair("segment-repeats", "/rep/a/b/", "/rep-ok/a/b/a/b/", "segment_repeats"),
    Pair("escapes", "/esc/%25", "/esc-ok/a%20b", "url_length"),
    Pair("path-depth", "/deep/1/x/", "/deep-ok/" + "".join(f"{i}/" for i in range(19)),
         "path_depth"),  # the control: 20 segments, each once
    Pair("outlinks", "/many-links/7000", "/many-links/10", "max_outlinks"),
    # P1 politeness
    Pair("429-seconds", "/429/seconds", "/429-ok", "host backoff >= Retry-After"),
    Pair("429-date", "/429/date", "/429-ok", "host backoff >= Retry-After"),
    Pair("503-storm", "/503/storm/0", "/503-ok", "host backoff, retries"),
    # P2 robots.txt (the status class is FaultServer.robots)
    Pair("robots", "/private/secret", "/public", "robots"),
)


@dataclass
class Hit:
    """One request as the server saw it: arrival time (time.monotonic()) and final status."""

    t: float
    method: str
    path: str  # raw path and query, as sent
    status: int | None = None  # None until answered (or when the client gave up)


# -- bombs: built once from a few compressed blocks repeated, so memory stays small ----------


@dataclass(frozen=True)
class Bomb:
    head: bytes
    block: bytes  # compressed form of one MiB of spaces; sent `count` times
    count: int
    tail: bytes

    @property
    def length(self) -> int:
        return len(self.head) + len(self.block) * self.count + len(self.tail)

    def pieces(self, batch: int = 64) -> list[bytes | tuple[bytes, int]]:
        return [self.head, (self.block * batch, self.count // batch),
                self.block * (self.count % batch), self.tail]


def _steady_blocks(step: Callable[[], bytes], head: bytes) -> tuple[bytes, bytes, int]:
    """Compress MiB after MiB until one comes out like the one before.

    Returns (all output so far, the repeating block, MiB consumed).
    """
    previous, used = step(), 1
    head += previous
    while (block := step()) != previous:
        head, previous, used = head + block, block, used + 1
    return head + block, block, used + 1


@lru_cache(maxsize=8)
def bomb(coding: str, mib: int) -> Bomb:
    """A `coding` body that decodes to BOMB_PREFIX plus `mib` (>= 8) MiB of spaces."""
    spaces = b" " * MIB
    if coding in ("gzip", "deflate"):
        return _zlib_bomb(coding, mib, spaces)
    if coding == "br":
        c = brotli.Compressor(quality=5)
        head, block, used = _steady_blocks(lambda: c.process(spaces) + c.flush(),
                                           c.process(BOMB_PREFIX) + c.flush())
        return Bomb(head, block, mib - used, c.finish())
    z = zstandard.ZstdCompressor(level=3, write_checksum=False,
                                 write_content_size=False).compressobj()
    flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
    head, block, used = _steady_blocks(lambda: z.compress(spaces) + z.flush(flush),
                                       z.compress(BOMB_PREFIX) + z.flush(flush))
    return Bomb(head, block, mib - used, z.flush())


def _zlib_bomb(coding: str, mib: int, spaces: bytes) -> Bomb:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; the wrapper is ours
    full = zlib.Z_FULL_FLUSH  # resets the history, so the blocks repeat byte for byte
    head, block, used = _steady_blocks(lambda: c.compress(spaces) + c.flush(full),
                                       c.compress(BOMB_PREFIX) + c.flush(full))
    end = c.flush(zlib.Z_FINISH)
    if coding == "gzip":
        crc = zlib.crc32(BOMB_PREFIX)
        for _ in range(mib):  # the one cost that grows with the size: ~1 s per GiB
            crc = zlib.crc32(spaces, crc)
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        size = len(BOMB_PREFIX) + mib * MIB
        trailer = crc.to_bytes(4, "little") + (size % 2**32).to_bytes(4, "little")
    else:
        header, trailer = b"\x78\xda", _adler32_spaces(mib * MIB).to_bytes(4, "big")
    return Bomb(header + head, block, mib - used, end + trailer)


def _adler32_spaces(n: int) -> int:
    """Adler-32 of BOMB_PREFIX plus n spaces, in closed form (RFC 1950)."""
    a0 = zlib.adler32(BOMB_PREFIX)
    a, b, mod = a0 & 0xFFFF, a0 >> 16, 65521
    b = (b + n * a + 32 * n * (n + 1) // 2) % mod
    a = (a + 32 * n) % mod
    return (b << 16) | a


def pack(coding: str, data: bytes) -> bytes:
    """A small body in `coding` (for the control routes)."""
    if coding == "gzip":
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "br":
        return bytes(brotli.compress(data))
    return bytes(zstandard.ZstdCompressor().compress(data))


# -- raw responses: bytes straight to the socket, for what aiohttp refuses to send -----------


class RawResponse(web.StreamResponse):
    """Writes `parts` (bytes, or a float = seconds to pause) as they are, then closes the
    connection unless keep_alive; aiohttp's own framing is bypassed."""

    def __init__(self, fault: FaultServer, parts: Sequence[bytes | float], status: int,
                 *, keep_alive: bool = False) -> None:
        super().__init__(status=status)
        self._fault = fault
        self._parts = parts
        self._keep_alive = keep_alive

    async def prepare(self, request: web.BaseRequest) -> Any:
        transport = request.transport
        for part in self._parts:
            if transport is None or transport.is_closing():
                return None
            if isinstance(part, float):
                await self._fault.pause(part)
            else:
                transport.write(part)
        if not self._keep_alive and transport is not None:
            transport.close()
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


def _head(status: str, *headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: text/html", *headers, "", ""]
    return "\r\n".join(lines).encode()


def page(title: str, *links: str) -> str:
    items = "".join(f'<li><a href="{href}">{href}</a></li>\n' for href in links)
    return f"<!doctype html><title>{title}</title><ul>\n{items}</ul>\n"


# -- the server ------------------------------------------------------------------------------


@dataclass
class FaultServer:
    """Routes by raw path prefix; knobs are plain attributes, set them before the crawl."""

    base: str = ""
    log: list[Hit] = field(default_factory=list)
    robots: str = "rules"  # rules, gzip, redirect, redirect-loop, 404, 401, 429, 500, 503,
    #                        timeout, close, empty
    crawl_delay: float | None = None  # a Crawl-delay line in the "rules" robots.txt
    bomb_mib: int = 256  # decoded size of each bomb, far past any parse cap
    trickle_bytes: int = 200  # sent at 2 bytes/s
    retry_after: int = 2  # seconds, for both 429 routes
    fail_times: int = 2  # 429s before a 429 route answers 200
    storm_hits: int = 6  # 503s, over all /503/storm/ pages, before the storm ends
    _failures: dict[str, int] = field(default_factory=dict)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    # -- helpers for tests ----------------------------------------------------------------
    def hits(self, prefix: str = "/") -> list[Hit]:
        return [h for h in self.log if h.path.startswith(prefix)]

    def count(self, path: str) -> int:
        return sum(h.path == path for h in self.log)

    def url(self, path: str) -> str:
        return self.base.rstrip("/") + path

    def close(self) -> None:
        """End every trickle, stall and endless body so that the server can stop."""
        self._closing.set()

    async def pause(self, seconds: float) -> bool:
        """Sleep; False (early) when the server is closing."""
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return True
        return False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        hit = Hit(time.monotonic(), request.method, request.raw_path)
        self.log.append(hit)
        path = request.raw_path
        handler = self._exact().get(path.partition("?")[0])
        if handler is None:
            handler = next((h for p, h in self._prefixes() if path.startswith(p)), None)
        response = await handler(request) if handler else web.Response(
            status=404, text="not found", content_type="text/html")
        hit.status = response.status
        return response

    def _exact(self) -> dict[str, Handler]:
        ok = self._html("ok")
        return {
            "/": self._index, "/ok": ok, "/public": ok, "/private/secret": ok,
            "/robots.txt": self._robots, "/robots-real.txt": self._robots_real,
            "/slow/trickle": self._trickle, "/slow/stall": self._stall,
            "/slow/stall-headers": self._stall_headers, "/slow/endless": self._endless,
            "/slow/trickle-ok": ok, "/slow/stall-ok": ok, "/slow/endless-ok": self._big_ok,
            "/bad/chunking": self._bad_chunking, "/bad/chunking-ok": self._good_chunking,
            "/bad/length-long": self._length_long, "/bad/length-short": self._length_short,
            "/bad/length-ok": ok, "/bad/early-close": self._early_close,
            "/bad/early-close-ok": self._good_chunking, "/bad/gzip": self._corrupt_gzip,
            "/bad/gzip-ok": self._packed("gzip"),
            "/redir/file": self._to("file:///etc/passwd"),
            "/redir/ftp": self._to("ftp://127.0.0.1/pub/file"),
            "/redir/javascript": self._to("javascript:alert(document.cookie)"),
            "/redir/data": self._to("data:text/html,<script>alert(1)</script>"),
            "/redir/ok": self._to("/ok"), "/redir/loop/a": self._to("/redir/loop/b"),
            "/redir/loop/b": self._to("/redir/loop/a"), "/links/schemes": self._schemes,
            "/session/other": ok, "/429/seconds": self._too_many,
            "/429/date": self._too_many, "/429-ok": ok, "/503-ok": ok,
        }

    def _prefixes(self) -> list[tuple[str, Handler]]:
        return [
            ("/bomb/", self._bomb), ("/redir/chain/", self._chain), ("/cal/", self._calendar),
            ("/session/page", self._session), ("/rep/", self._repeat), ("/rep-ok/", self._leaf),
            ("/esc/", self._escapes), ("/esc-ok/", self._leaf), ("/deep/", self._deep),
            ("/deep-ok/", self._leaf), ("/many-links/", self._many), ("/many/", self._leaf),
            ("/503/storm/", self._storm),
        ]

    # -- plain pages ------------------------------------------------------------------------
    def _html(self, title: str, *links: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(text=page(title, *links), content_type="text/html")
        return handler

    async def _leaf(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=page("leaf"), content_type="text/html")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        links = [p for pair in PAIRS for p in (pair.trap, pair.control)]
        return web.Response(text=page("faults", *dict.fromkeys(links)), content_type="text/html")

    async def _big_ok(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"<p>finite</p>\n" * 20_000, content_type="text/html")

    # -- P3: slow ---------------------------------------------------------------------------
    async def _trickle(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": HTML})
        resp.content_length = self.trickle_bytes
        await resp.prepare(request)
        for _ in range(self.trickle_bytes // 2):
            await resp.write(b"<p")
            if not await self.pause(1.0):
                break
        return resp

    async def _stall(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": HTML})
        resp.content_length = 100
        await resp.prepare(request)
        await self.pause(3600.0)
        return resp

    async def _stall_headers(self, request: web.Request) -> web.StreamResponse:
        await self.pause(3600.0)
        return web.Response(text="too late", content_type="text/html")

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": HTML})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b"<p>endless</p>\n" * 4096
        try:
            while not self._closing.is_set():
                await resp.write(chunk)
        except ConnectionError:
            pass
        return resp

    # -- P4: bombs --------------------------------------------------------------------------
    async def _bomb(self, request: web.Request) -> web.StreamResponse:
        coding, _, rest = request.raw_path.removeprefix("/bomb/").partition("/")
        if coding not in ("gzip", "deflate", "br", "zstd"):
            return web.Response(status=404)
        if rest == "ok":
            return await self._packed(coding)(request)
        body = bomb(coding, self.bomb_mib)
        resp = web.StreamResponse(headers={"Content-Type": HTML, "Content-Encoding": coding})
        resp.content_length = body.length
        await resp.prepare(request)
        try:
            for piece in body.pieces():
                data, times = piece if isinstance(piece, tuple) else (piece, 1)
                for _ in range(times):
                    await resp.write(data)
        except ConnectionError:
            pass
        return resp

    def _packed(self, coding: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            body = pack(coding, page(f"{coding} ok", "/ok").encode())
            return web.Response(body=body, headers={"Content-Type": HTML,
                                                    "Content-Encoding": coding})
        return handler

    # -- P8: malformed ----------------------------------------------------------------------
    async def _bad_chunking(self, request: web.Request) -> web.StreamResponse:
        head = _head("200 OK", "Transfer-Encoding: chunked")
        return RawResponse(self, [head + b"5\r\n<p>ok\r\nZZ\r\ngarbage\r\n0\r\n\r\n"], 200)

    async def _good_chunking(self, request: web.Request) -> web.StreamResponse:
        head = _head("200 OK", "Transfer-Encoding: chunked")
        return RawResponse(self, [head + b"5\r\n<p>ok\r\n9\r\n</p>done.\r\n0\r\n\r\n"], 200,
                           keep_alive=True)

    async def _length_long(self, request: web.Request) -> web.StreamResponse:
        head = _head("200 OK", "Content-Length: 1000")
        return RawResponse(self, [head + b"<p>" + b"x" * 97], 200)

    async def _length_short(self, request: web.Request) -> web.StreamResponse:
        # Ten bytes promised, a whole forged response after them: a client that reuses the
        # connection would read it as the answer to its next request.
        forged = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Type: text/html\r\n\r\nSMUGGLED"
        head = _head("200 OK", "Content-Length: 10")
        return RawResponse(self, [head + b"<p>short.\n" + forged], 200, keep_alive=True)

    async def _early_close(self, request: web.Request) -> web.StreamResponse:
        head = _head("200 OK", "Transfer-Encoding: chunked")
        return RawResponse(self, [head + b"100\r\n<p>" + b"y" * 50], 200)

    async def _corrupt_gzip(self, request: web.Request) -> web.StreamResponse:
        good = pack("gzip", page("corrupt", "/ok").encode())
        body = good[:10] + bytes(b ^ 0x5A for b in good[10:-8]) + good[-8:]
        return web.Response(body=body, headers={"Content-Type": HTML, "Content-Encoding": "gzip"})

    # -- P5: redirects ----------------------------------------------------------------------
    def _to(self, location: str, status: int = 302) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": location})
        return handler

    async def _chain(self, request: web.Request) -> web.StreamResponse:
        n = int(request.raw_path.rsplit("/", 1)[1] or 0)
        target = "/ok" if n >= 10 else f"/redir/chain/{n + 1}"
        return web.Response(status=301, headers={"Location": target})

    async def _schemes(self, request: web.Request) -> web.StreamResponse:
        hrefs = ("javascript:alert(1)", "ftp://127.0.0.1/x", "file:///etc/passwd",
                 "data:text/html,hi", "mailto:a@example.com", "/ok")
        return web.Response(text=page("schemes", *hrefs), content_type="text/html")

    # -- P6: traps --------------------------------------------------------------------------
    async def _calendar(self, request: web.Request) -> web.StreamResponse:
        year, month = (int(x) for x in request.raw_path.split("/")[2:4])
        nxt = (year + month // 12, month % 12 + 1)
        prev = (year - (month == 1), (month - 2) % 12 + 1)
        links = (f"/cal/{nxt[0]}/{nxt[1]:02d}", f"/cal/{prev[0]}/{prev[1]:02d}")
        return web.Response(text=page(f"{year}-{month}", *links), content_type="text/html")

    async def _session(self, request: web.Request) -> web.StreamResponse:
        n = len(self.log)  # a fresh session id on every visit
        again = f"/session/page;jsessionid={n:032X}?PHPSESSID={n:x}"
        return web.Response(text=page("session", again, "/session/other?page=2"),
                            content_type="text/html")

    async def _repeat(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=page("repeat", "a/b/"), content_type="text/html")

    async def _escapes(self, request: web.Request) -> web.StreamResponse:
        segment = request.raw_path.removeprefix("/esc/")
        twice = segment.replace("%", "%25") * 2  # escaped again, and doubled, on every hop
        return web.Response(text=page("escapes", f"/esc/{twice}"), content_type="text/html")

    async def _deep(self, request: web.Request) -> web.StreamResponse:
        n = request.raw_path.count("/")
        return web.Response(text=page("deep", f"{n}/x{n}/"), content_type="text/html")

    async def _many(self, request: web.Request) -> web.StreamResponse:
        n = min(int(request.raw_path.rsplit("/", 1)[1] or 0), 100_000)
        return web.Response(text=page("many", *(f"/many/{i}" for i in range(n))),
                            content_type="text/html")

    # -- P1: politeness ---------------------------------------------------------------------
    async def _too_many(self, request: web.Request) -> web.StreamResponse:
        path = request.raw_path
        self._failures[path] = self._failures.get(path, 0) + 1
        if self._failures[path] > self.fail_times:
            return web.Response(text=page("finally"), content_type="text/html")
        wait: str = str(self.retry_after)
        if path.startswith("/429/date"):
            when = datetime.now(UTC) + timedelta(seconds=self.retry_after + 1)
            wait = format_datetime(when, usegmt=True)  # +1: dates have whole seconds
        return web.Response(status=429, text="slow down", headers={"Retry-After": wait})

    async def _storm(self, request: web.Request) -> web.StreamResponse:
        self._failures["storm"] = self._failures.get("storm", 0) + 1
        if self._failures["storm"] > self.storm_hits:
            n = int(request.raw_path.rsplit("/", 1)[1] or 0)
            return web.Response(text=page("calm", f"/503/storm/{n + 1}" if n < 9 else "/ok"),
                                content_type="text/html")
        return web.Response(status=503, text="storm")

    # -- P2: robots.txt ---------------------------------------------------------------------
    def robots_text(self) -> str:
        delay = f"Crawl-delay: {self.crawl_delay}\n" if self.crawl_delay is not None else ""
        return f"User-agent: *\nDisallow: /private/\n{delay}\nUser-agent: otherbot\nDisallow: /\n"

    async def _robots_real(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=self.robots_text(), content_type="text/plain")

    async def _robots(self, request: web.Request) -> web.StreamResponse:
        mode = self.robots
        if mode == "rules":
            return await self._robots_real(request)
        if mode == "gzip":
            return web.Response(body=pack("gzip", self.robots_text().encode()),
                                headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
        if mode == "redirect":
            return web.Response(status=301, headers={"Location": "/robots-real.txt"})
        if mode == "redirect-loop":
            return web.Response(status=302, headers={"Location": "/robots.txt"})
        if mode == "timeout":
            await self.pause(3600.0)
        if mode in ("timeout", "close"):
            return RawResponse(self, [], 0)
        if mode == "empty":
            return web.Response(text="", content_type="text/plain")
        return web.Response(status=int(mode), text=f"robots {mode}")


@pytest.fixture
async def fault_server(aiohttp_server: Any) -> AsyncIterator[FaultServer]:
    """A FaultServer on 127.0.0.1; slow handlers are released at teardown."""
    fault = FaultServer()
    server = await aiohttp_server(fault.app(), host="127.0.0.1")
    fault.base = str(server.make_url("/"))
    yield fault
    fault.close()
