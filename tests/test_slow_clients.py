"""Slow clients and slow servers: a peer that drips its headers holds nothing for long.

Each of mirror's own servers (`mirror ui`, the app's replay servers, `mirror serve`, `serve
--lan`, the demo site server) drops a connection that does not finish its request headers
within webapp.HEADER_DEADLINE, or stays idle that long after an answer, and answers other
clients meanwhile. The crawler gives up on a server that drips its response headers at its
[crawl] timeout, and the run goes on."""

from __future__ import annotations

import asyncio
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import offline_site as site_def
import pytest
from aiohttp import web
from uiproc import UiProcess, site_file

from mirror.model import ExitCode
from mirror.webapp import HEADER_DEADLINE

BOUND = HEADER_DEADLINE + 20  # a test timeout (a server that holds on fails), not a timing
START = 20.0  # seconds for a server to print its address
ADDRESS = re.compile(r"(http://[^\s?]+/)")


def launch(*args: str) -> UiProcess:
    """`python -m *args`, up to the first URL it prints (read with a deadline)."""
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    served = UiProcess(Path(args[-1]), proc, "", "")
    assert proc.stdout is not None
    pipe, pending, deadline = proc.stdout.fileno(), b"", time.monotonic() + START
    while not served.base:
        left = deadline - time.monotonic()
        chunk = os.read(pipe, 65536) if left > 0 and select.select([pipe], [], [], left)[0] \
            else b""
        if not chunk:
            served.stop()
            raise AssertionError(f"no address printed: {served.lines} {pending!r}")
        *complete, pending = (pending + chunk).split(b"\n")
        served.lines += [line.decode() for line in complete]
        found = [m[1] for line in served.lines if (m := ADDRESS.search(line))]
        served.base = found[0] if found else ""
    return served


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of one site, `h`, with an archive; its site file serves `mirror serve`."""
    folder = tmp_path_factory.mktemp("library")
    site_file(folder, "h", "http://history.test/")
    site_def.write_history(folder / "archive" / "h")
    return folder


@pytest.fixture(scope="module")
def servers(library: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, UiProcess]]:
    """Every kind of server mirror runs, each in a process of its own (the app's replay
    server lives in the app's process: it is started by opening the site's archive)."""
    started: dict[str, UiProcess] = {}
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<p>hello</p>\n")
    config = str(library / "h.toml")
    try:
        started["ui"] = UiProcess.start(library)
        started["serve"] = launch("mirror", "serve", "--port", "0", config)
        started["serve --lan"] = launch("mirror", "serve", "--lan", "--host", "127.0.0.1",
                                        "--port", "0", config)
        started["sitesrv"] = launch("mirror.demo.sitesrv", str(root))
        yield started
    finally:
        for served in started.values():
            served.stop()


async def replay_base(ui: UiProcess) -> str:
    """Open the archive of `h` from the app: its replay server starts; its address."""
    async with ui.session() as session, session.get(
            ui.base + "site/h/browse?url=http://history.test/", allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=30)) as answer:
        assert answer.status == 303, await answer.text()
        return answer.headers["Location"].partition("?")[0]


def port_of(base: str) -> int:
    return int(base.rstrip("/").rsplit(":", 1)[1])


def netloc(base: str) -> bytes:
    """The Host header of `base`: the server's own name (each answers only to its names)."""
    return base.removeprefix("http://").rstrip("/").encode()


async def held_until_closed(port: int, opening: bytes, drip: bytes) -> bytes:
    """Connect, send `opening`, then `drip` every half second until the server closes the
    connection; what the server sent. Raises TimeoutError past BOUND."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def read_to_the_end() -> None:
        while chunk := await reader.read(65536):
            received.extend(chunk)

    async def dripping() -> None:
        writer.write(opening)
        while drip:
            await asyncio.sleep(0.5)
            writer.write(drip)
            await writer.drain()

    dripper = asyncio.create_task(dripping())
    try:
        await asyncio.wait_for(read_to_the_end(), BOUND)
    except ConnectionResetError:
        pass
    finally:
        dripper.cancel()
        await asyncio.gather(dripper, return_exceptions=True)
        writer.close()
    return bytes(received)


async def answered(base: str) -> int:
    """A plain request's status: the server still answers others."""
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as client, client.get(base) as answer:
        return answer.status


async def test_every_server_drops_slow_and_idle_connections(
        servers: dict[str, UiProcess]) -> None:
    bases = {name: served.base for name, served in servers.items()}
    bases["app replay"] = await replay_base(servers["ui"])
    clients = {  # (what is sent first, what is dripped after, every half second)
        "partial headers": (b"GET / HTTP/1.1\r\nHost: %s\r\n", b"X-Drip: a\r\n"),
        "a request line, one byte at a time": (b"G", b"E"),
        "silent": (b"", b""),
        "idle after an answer": (b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n", b""),
    }
    holds = [held_until_closed(port_of(base), opening.replace(b"%s", netloc(base)), drip)
             for base in bases.values() for opening, drip in clients.values()]
    held = asyncio.gather(*holds, return_exceptions=True)
    await asyncio.sleep(1)  # the slow clients are on: the others are answered meanwhile
    statuses = {name: await answered(base) for name, base in bases.items()}
    results = dict(zip([(s, c) for s in bases for c in clients], await held, strict=True))
    assert all(status < 500 for status in statuses.values()), statuses
    still_open = [key for key, result in results.items() if isinstance(result, BaseException)]
    assert still_open == [], still_open  # TimeoutError: the server held the connection
    for (server, client), sent in results.items():
        if client == "idle after an answer":
            assert sent.startswith(b"HTTP/1.1 "), (server, sent[:200])
        else:
            assert not sent.startswith(b"HTTP/1.1 2"), (server, client, sent[:200])


class DrippedHeaders(web.StreamResponse):
    """A status line, then a header line every 0.2 s (faster than any read timeout), for
    up to a minute: a response whose headers never end."""

    async def prepare(self, request: web.BaseRequest) -> Any:
        transport = request.transport
        assert transport is not None
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
        for _ in range(300):
            if transport.is_closing():
                break
            transport.write(b"X-Drip: a\r\n")
            await asyncio.sleep(0.2)
        transport.close()
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


async def test_the_crawler_gives_up_on_dripped_response_headers(make_site: Any,
                                                                crawl: Any) -> None:
    site = await make_site()

    async def drip(request: web.Request) -> web.StreamResponse:
        return DrippedHeaders()

    site.page("/", '<a href="/drip">drip</a> <a href="/after">after</a>')
    site.handler("/drip", drip)
    site.page("/after", "<p>after</p>")
    c = await crawl([site.base], crawl={"timeout": 1.5, "read_timeout": 1, "max_tries": 1,
                                        "workers": 1})
    assert c.states() == {site.base: "done", site.base + "after": "done",
                          site.base + "drip": "failed"}
    with c.db() as db:
        (reason,) = db.execute("SELECT reason FROM urls WHERE url = ?",
                               (site.base + "drip",)).fetchone()
    assert "timeout" in reason
    assert c.result.exit_code == ExitCode.FAILED_URLS
