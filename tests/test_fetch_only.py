"""bench/fetch_only.py, the ceiling compare.py reads the latency target against: every URL
of its list fetched exactly once, at most `workers` at a time, failures counted."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

from aiohttp import web

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "fetch_only.py"


def load_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fetch_only", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_fetches_each_url_once_with_bounded_concurrency(aiohttp_server) -> None:
    log: list[str] = []
    in_flight = peak = 0

    async def handle(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        log.append(request.path_qs)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        if request.path == "/moved":
            return web.Response(status=301, headers={"Location": "/p0"})
        return web.Response(body=b"x" * 70_000)  # more than one read

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    paths = [f"/p{i}" for i in range(30)] + ["/moved", "/q?a=1"]
    urls = [str(server.make_url(p)) for p in paths]
    failed = await asyncio.wait_for(load_script().fetch_all(urls, 4), 30)
    assert failed == 0
    assert sorted(log) == sorted(paths)  # the redirect is not followed
    assert 1 < peak <= 4


async def test_counts_failures_and_goes_on() -> None:
    dead = "http://127.0.0.1:9/"  # discard port: nothing listens
    failed = await asyncio.wait_for(load_script().fetch_all([dead, dead], 2), 30)
    assert failed == 2
