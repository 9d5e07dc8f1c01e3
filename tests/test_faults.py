"""The fault server behaves as its routes promise; the crawl of all of it (lead: integration)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from faultsrv import BOMB_PREFIX, MIB, PAIRS, FaultServer
from yarl import URL

from mirror.crawl.politeness import parse_retry_after
from mirror.crawl.robots import rules_from_response
from mirror.web.codings import DecodeError, decode_body

pytest_plugins = ("faultsrv",)  # the fault_server fixture

UA = "mirror/0.1.0"


async def get(fault: FaultServer, path: str, *, read: float = 2.0,
              **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, raw body) of one request with its own connection; no redirects."""
    timeout = aiohttp.ClientTimeout(total=5, sock_read=read)
    async with aiohttp.ClientSession(auto_decompress=False, timeout=timeout) as session:
        async with session.get(URL(fault.url(path), encoded=True), allow_redirects=False,
                               **kwargs) as resp:
            return resp.status, dict(resp.headers), await resp.read()


def hrefs(body: bytes) -> list[str]:
    return re.findall(r'href="([^"]*)"', body.decode())


async def test_index_links_every_trap_and_control(fault_server: FaultServer) -> None:
    status, _, body = await get(fault_server, "/")
    assert status == 200
    links = set(hrefs(body))
    for pair in PAIRS:
        assert {pair.trap, pair.control} <= links, pair.name
    assert len({p.name for p in PAIRS}) == len(PAIRS)


async def test_request_log_has_monotonic_times_and_statuses(fault_server: FaultServer) -> None:
    for path in ("/ok", "/nothing-here", "/esc/%25"):
        await get(fault_server, path)
    assert [(h.method, h.path, h.status) for h in fault_server.log] == [
        ("GET", "/ok", 200), ("GET", "/nothing-here", 404), ("GET", "/esc/%25", 200)]
    times = [h.t for h in fault_server.log]
    assert times == sorted(times)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
async def test_bombs_are_small_on_the_wire_and_huge_decoded(fault_server: FaultServer,
                                                             coding: str) -> None:
    fault_server.bomb_mib = 16
    status, headers, body = await get(fault_server, f"/bomb/{coding}")
    assert status == 200 and headers["Content-Encoding"] == coding
    assert len(body) < MIB // 8
    decoded, cut = decode_body(body, coding, MIB)
    assert cut and decoded.startswith(BOMB_PREFIX) and len(decoded) == MIB
    full, cut = decode_body(body, coding, 17 * MIB)  # the whole bomb decodes cleanly
    assert not cut and len(full) == len(BOMB_PREFIX) + 16 * MIB
    status, _, body = await get(fault_server, f"/bomb/{coding}/ok")  # the control
    decoded, cut = decode_body(body, coding, MIB)
    assert status == 200 and not cut and hrefs(decoded) == ["/ok"]


async def test_malformed_responses(fault_server: FaultServer) -> None:
    for trap in ("/bad/chunking", "/bad/length-long", "/bad/early-close"):
        with pytest.raises(aiohttp.ClientError):  # ClientPayloadError or, when the bad
            # chunk arrives with the headers, ClientResponseError(400) from start()
            await get(fault_server, trap)
    for control in ("/bad/chunking-ok", "/bad/early-close-ok", "/bad/length-ok"):
        status, _, body = await get(fault_server, control)
        assert status == 200 and body.startswith(b"<")
    status, _, body = await get(fault_server, "/bad/length-short")
    assert body == b"<p>short.\n"
    with pytest.raises(DecodeError):
        decode_body((await get(fault_server, "/bad/gzip"))[2], "gzip", MIB)
    decoded, _ = decode_body((await get(fault_server, "/bad/gzip-ok"))[2], "gzip", MIB)
    assert hrefs(decoded) == ["/ok"]


@pytest.mark.parametrize(("path", "location"), [
    ("/redir/file", "file:///etc/passwd"),
    ("/redir/ftp", "ftp://127.0.0.1/pub/file"),
    ("/redir/javascript", "javascript:alert(document.cookie)"),
    ("/redir/data", "data:text/html,<script>alert(1)</script>"),
    ("/redir/ok", "/ok"),
    ("/redir/loop/a", "/redir/loop/b"),
    ("/redir/loop/b", "/redir/loop/a"),
    ("/redir/chain/3", "/redir/chain/4"),
    ("/redir/chain/10", "/ok"),
])
async def test_redirects(fault_server: FaultServer, path: str, location: str) -> None:
    status, headers, _ = await get(fault_server, path)
    assert 300 <= status < 400 and headers["Location"] == location


@pytest.mark.parametrize(("path", "links"), [
    ("/cal/2026/11", ["/cal/2026/12", "/cal/2026/10"]),
    ("/cal/2026/12", ["/cal/2027/01", "/cal/2026/11"]),
    ("/cal/2027/01", ["/cal/2027/02", "/cal/2026/12"]),
    ("/rep/a/b/", ["a/b/"]),
    ("/esc/%25", ["/esc/%2525%2525"]),
    ("/esc/%2525%2525", ["/esc/" + "%252525" * 4]),
    ("/deep/1/x/", ["4/x4/"]),
    ("/many-links/3", ["/many/0", "/many/1", "/many/2"]),
    ("/links/schemes", ["javascript:alert(1)", "ftp://127.0.0.1/x", "file:///etc/passwd",
                        "data:text/html,hi", "mailto:a@example.com", "/ok"]),
])
async def test_trap_pages_link_onwards(fault_server: FaultServer, path: str,
                                       links: list[str]) -> None:
    status, _, body = await get(fault_server, path)
    assert status == 200 and hrefs(body) == links


async def test_session_ids_rotate(fault_server: FaultServer) -> None:
    first = hrefs((await get(fault_server, "/session/page;jsessionid=S0?PHPSESSID=P0"))[2])
    second = hrefs((await get(fault_server, "/session/page"))[2])
    assert first[0] != second[0] and first[1] == second[1] == "/session/other?page=2"
    assert all(";jsessionid=" in h and "PHPSESSID=" in h for h in (first[0], second[0]))


@pytest.mark.parametrize("path", ["/429/seconds", "/429/date"])
async def test_429_with_retry_after_then_success(fault_server: FaultServer, path: str) -> None:
    for _ in range(fault_server.fail_times):
        status, headers, _ = await get(fault_server, path)
        wait = parse_retry_after(headers["Retry-After"], datetime.now(UTC), 600)
        assert status == 429 and wait is not None
        assert fault_server.retry_after <= wait <= fault_server.retry_after + 1
    assert (await get(fault_server, path))[0] == 200
    assert (await get(fault_server, "/429-ok"))[0] == 200


async def test_503_storm_ends(fault_server: FaultServer) -> None:
    statuses = [(await get(fault_server, f"/503/storm/{i % 3}"))[0] for i in range(8)]
    assert statuses == [503] * fault_server.storm_hits + [200] * (8 - fault_server.storm_hits)


async def test_slow_routes_cost_only_the_clients_deadline(fault_server: FaultServer) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    for trap in ("/slow/stall", "/slow/stall-headers", "/slow/trickle"):  # 2 bytes a second
        with pytest.raises(TimeoutError):
            await get(fault_server, trap, read=0.3)
    assert loop.time() - started < 5
    for control in ("/slow/stall-ok", "/slow/trickle-ok", "/slow/endless-ok"):
        assert (await get(fault_server, control))[0] == 200


async def test_endless_body_never_ends(fault_server: FaultServer) -> None:
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.get(fault_server.url("/slow/endless")) as resp:
            received = 0
            async for chunk in resp.content.iter_chunked(MIB):
                received += len(chunk)
                if received > 8 * MIB:
                    break
    assert received > 8 * MIB


# (robots mode, expected reason) -- fetched as the crawler must: 3xx followed up to 5 hops
ROBOTS_CASES = [
    ("rules", "parsed"),
    ("gzip", "parsed"),
    ("redirect", "parsed"),
    ("redirect-loop", "redirects: allow all"),
    ("empty", "parsed"),
    ("404", "4xx: allow all"),
    ("401", "4xx: allow all"),
    ("429", "429: disallow all"),
    ("500", "5xx: disallow all"),
    ("503", "5xx: disallow all"),
    ("timeout", "unreachable: disallow all"),
    ("close", "unreachable: disallow all"),
]


async def fetch_robots(fault: FaultServer) -> Any:
    path = "/robots.txt"
    try:
        for _ in range(6):  # the first answer and at most five redirects
            status, headers, body = await get(fault, path, read=0.3)
            if not (300 <= status < 400 and "Location" in headers):
                break
            path = headers["Location"]
    except (TimeoutError, aiohttp.ClientError) as exc:
        return rules_from_response(None, None, error=type(exc).__name__)
    return rules_from_response(status, body, content_encoding=headers.get("Content-Encoding"))


@pytest.mark.parametrize(("mode", "reason"), ROBOTS_CASES, ids=[c[0] for c in ROBOTS_CASES])
async def test_robots_status_classes(fault_server: FaultServer, mode: str, reason: str) -> None:
    fault_server.robots = mode
    rules = await fetch_robots(fault_server)
    assert rules.reason == reason
    parsed_rules = mode in ("rules", "gzip", "redirect")
    blanket_allow = reason.endswith("allow all") and not reason.endswith("disallow all")
    assert rules.allowed(fault_server.url("/private/secret"), UA) is (
        blanket_allow or mode == "empty")
    assert rules.allowed(fault_server.url("/public"), UA) is (
        parsed_rules or blanket_allow or mode == "empty")


# -- the crawl of all of it: for the lead to enable once robots, politeness and traps are wired


async def test_crawl_of_the_fault_server(fault_server: FaultServer, crawl: Any) -> None:
    import resource
    import time

    fault_server.robots = "rules"
    fault_server.retry_after = 1
    started = time.monotonic()
    c = await crawl(
        [fault_server.base],
        scope={"max_depth": 30, "max_outlinks": 100, "max_host_pages": 2000, "robots": True},
        # per_host 1: a request already under way when a 429 arrives would otherwise land
        # inside the backoff window through no fault of the crawler
        crawl={"workers": 4, "per_host": 1, "timeout": 2.0, "read_timeout": 1.0,
               "connect_timeout": 1.0, "max_response_bytes": 4 * MIB, "max_tries": 2,
               "max_redirects": 5, "max_retry_after": 5.0},
    )
    assert time.monotonic() - started < 60  # bounded whatever the server does
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 600 * 1024  # KiB on Linux
    assert c.result.exit_code in (0, 3)
    fetched = {h.path.partition("?")[0] for h in fault_server.log}
    skipped = c.skipped()
    rules = set(skipped.values())

    # every control is fetched and stored (as a response, or a revisit of the same bytes)
    records = c.records()
    stored = {r["uri"] for r in records if r["type"] in ("response", "revisit")}
    for pair in PAIRS:
        assert fault_server.url(pair.control) in stored or pair.control in fetched, pair.name

    # P2: robots.txt obeyed and archived
    assert "/private/secret" not in fetched
    assert skipped[fault_server.url("/private/secret")] == "robots"
    assert fault_server.url("/robots.txt") in stored

    # P5: other schemes recorded, never followed; chains end
    assert {"scheme", "max_redirects"} <= rules
    assert fault_server.count("/redir/loop/a") == fault_server.count("/redir/loop/b") == 1

    # P6: every trap ends, by its rule, and the controls beside them were accepted
    assert {"segment_repeats", "url_length", "path_depth"} <= rules
    assert fault_server.url("/rep-ok/a/b/a/b/") in stored
    assert fault_server.url("/esc-ok/a%20b") in stored
    assert len([h for h in fault_server.hits("/session/page")]) == 1  # ids stripped
    assert fault_server.count("/session/other?page=2") == 1
    assert len(fault_server.hits("/many/")) == 100  # max_outlinks; /many-links/10 adds none
    assert max(h.path.count("/") for h in fault_server.hits("/deep/")) <= 21  # 20 + trailing

    # P1: nothing reaches the host inside a Retry-After window
    for path in ("/429/seconds", "/429/date"):
        answered = [h for h in fault_server.log if h.path == path and h.status == 429]
        assert answered, path
        for hit in answered:
            later = [h.t for h in fault_server.log if h.t > hit.t]
            assert not later or min(later) - hit.t >= fault_server.retry_after - 0.05
    assert fault_server.count("/503/storm/0") >= 2  # retried after the storm

    # P3/P4/P8: cut or failed, never crashing, never an invalid record
    truncated = {r["uri"]: r["headers"].get_header("WARC-Truncated") for r in records
                 if r["type"] == "response"}
    assert truncated.get(fault_server.url("/slow/trickle")) == "time"
    assert truncated.get(fault_server.url("/slow/endless")) in ("length", "time")
    for coding in ("gzip", "deflate", "br", "zstd"):
        assert fault_server.url(f"/bomb/{coding}") in stored
    for r in records:
        assert r["payload"] != b"SMUGGLED", r["uri"]
    c.assert_verifies()
