"""The real web's dead ends: hosts that do not resolve, refuse, or reset fail fast and once
each; retries end by time; every request, robots.txt too, waits its turn under `delay`."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from conftest import TestSite

from mirror.crawl.politeness import DeadHosts, host_failure, out_of_time
from mirror.model import ExitCode
from mirror.run.report import unreachable_line


@pytest.mark.parametrize(("kind", "message", "reason"), [
    ("dns", "Cannot connect to host x.invalid:80 [Name or service not known]",
     "name does not resolve"),
    ("connect", "cannot connect to 127.0.0.1:9: Connection refused", "connection refused"),
    ("tls", "certificate verify failed", "TLS handshake failed"),
    ("reset", "the server reset the connection", "connection reset"),
    ("disconnect", "server closed the connection before responding",
     "connection closed before any answer"),
    ("timeout", "no response within 60s", None),  # slow is not dead
    ("protocol", "bad status line", None),  # it answered something
])
def test_which_errors_say_a_host_is_unreachable(kind: str, message: str,
                                                reason: str | None) -> None:
    assert host_failure(kind, message) == reason


def test_dead_hosts_count_hard_failures_whole_and_soft_ones_a_third() -> None:
    dead = DeadHosts(after=1)
    assert dead.failed("a.invalid", "name does not resolve")
    assert dead.reason("a.invalid") == "name does not resolve"
    assert not dead.failed("b:80", "connection reset", soft=True)
    assert not dead.failed("b:80", "connection reset", soft=True)
    dead.answered("b:80")  # an answer in between: a live host that drops connections
    assert not dead.failed("b:80", "connection reset", soft=True)
    assert not dead.failed("b:80", "connection reset", soft=True)
    assert dead.failed("b:80", "connection reset", soft=True)
    twice = DeadHosts(after=2)
    assert not twice.failed("c", "connection refused") and twice.failed("c", "x")
    assert twice.reason("c") == "x"
    never = DeadHosts(after=0)
    assert not any(never.failed("d", "connection refused") for _ in range(10))


def test_the_retry_budget_runs_from_the_first_failure() -> None:
    assert not out_of_time(100.0, 150.0, 20.0, 180.0)
    assert out_of_time(100.0, 250.0, 40.0, 180.0)
    assert out_of_time(100.0, 100.0, 0.5, 0.0)  # a budget of 0: no retry at all


@pytest.fixture
async def resetting_server() -> AsyncIterator[str]:
    """Accepts TCP connections and resets each at once (SO_LINGER 0): a host that is up
    and useless."""

    def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.close()
        await server.wait_closed()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"  # nothing listens there now


async def test_requisites_on_dead_hosts_fail_fast_and_do_not_hold_the_run(
        make_site: Any, crawl: Any, resetting_server: str) -> None:
    site: TestSite = await make_site()
    refused = closed_port()
    dead = [f"http://cdn{i % 3}.mirror-test.invalid/a{i}.png" for i in range(10)]
    dead += [f"{refused}b{i}.png" for i in range(5)]
    dead += [f"{resetting_server}c{i}.png" for i in range(5)]
    images = "".join(f'<img src="{u}">' for u in dead)
    site.page("/", f'<html><body>{images}<a href="/next">next</a></body></html>')
    site.page("/next", "<html><body>the last page</body></html>")
    started = time.monotonic()
    c = await crawl([site.base], scope={"robots": True}, crawl={"max_tries": 4})
    took = time.monotonic() - started
    assert c.result.exit_code == ExitCode.FAILED_URLS
    assert took < 10, f"the run took {took:.1f}s after its pages"
    with c.db() as db:
        failed = dict(db.execute("SELECT url, reason FROM urls WHERE state='failed' "
                                 "AND via != 'robots'"))
        tries = dict(db.execute("SELECT url, tries FROM urls WHERE state='failed'"))
        robots = db.execute("SELECT COUNT(*) FROM urls WHERE via='robots'").fetchone()[0]
    assert set(failed) == set(dead)
    assert robots == 1 + 3 + 2  # the site's, three .invalid hosts, two 127.0.0.1 ports
    for url in dead[:10]:
        assert failed[url] == "host unreachable: name does not resolve", url
    for url in dead[10:15]:
        assert failed[url] == "host unreachable: connection refused", url
    for url in dead[15:]:
        assert failed[url].startswith("host unreachable: connection reset"), failed[url]
    # each dead host cost one robots.txt try, and its URLs none
    assert sum(tries.values()) <= 3 + 2 + len(dead)
    assert c.states()[site.base + "next"] == "done"
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    hosts = {(h["host"], h["reason"]): h["urls"] for h in report["unreachable_hosts"]}
    refused_host = refused.split("//")[1].rstrip("/")
    assert hosts[("cdn0.mirror-test.invalid", "name does not resolve")] == 4
    assert hosts[(refused_host, "connection refused")] == 5
    assert len(hosts) == 5
    line = unreachable_line([(h["host"], h["reason"], h["urls"])
                             for h in report["unreachable_hosts"]])
    assert line.startswith("5 hosts unreachable: ")
    assert "name does not resolve (cdn0.mirror-test.invalid, cdn1.mirror-test.invalid, " \
           "cdn2.mirror-test.invalid)" in line and f"connection refused ({refused_host})" in line


async def test_a_url_failing_for_too_long_fails_though_tries_are_left(
        make_site: Any, crawl: Any) -> None:
    site: TestSite = await make_site()

    async def busy(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, headers={"Retry-After": "1"}, text="busy")

    site.page("/", '<html><body><a href="/busy">busy</a></body></html>')
    site.handler("/busy", busy)
    started = time.monotonic()
    c = await crawl([site.base], crawl={"max_tries": 100, "max_retry_time": 2.5})
    assert time.monotonic() - started < 8
    assert 2 <= site.count("/busy") <= 4
    with c.db() as db:
        (reason,) = db.execute("SELECT reason FROM urls WHERE url=?",
                               (site.base + "busy",)).fetchone()
    assert "HTTP 503" in reason and "max_retry_time" in reason
    assert c.result.exit_code == ExitCode.FAILED_URLS


async def test_every_request_robots_txt_too_starts_delay_after_the_one_before(
        aiohttp_server: Any, crawl: Any) -> None:
    starts: list[tuple[float, str]] = []

    @web.middleware
    async def timed(request: web.Request, handler: Any) -> web.StreamResponse:
        starts.append((time.monotonic(), request.path))
        return await handler(request)

    async def page(request: web.Request) -> web.StreamResponse:
        n = int(request.match_info.get("n") or 0)
        links = "".join(f'<a href="/p{i}">p</a><img src="/i{i}.png">' for i in range(n, n + 3))
        return web.Response(text=f"<html><body>{links}</body></html>",
                            content_type="text/html")

    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app = web.Application(middlewares=[timed])
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/", page)
    app.router.add_get("/p{n}", page)
    async def image(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"png", content_type="image/png")

    app.router.add_get("/i{n}.png", image)
    server = await aiohttp_server(app, host="127.0.0.1")
    delay = 0.1
    await crawl([str(server.make_url("/"))], scope={"robots": True, "max_depth": 2},
                crawl={"per_host": 2, "delay": delay})
    assert starts[0][1] == "/robots.txt" and len(starts) > 10
    gaps = [b[0] - a[0] for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) >= delay * 0.95, [round(g, 3) for g in gaps]
