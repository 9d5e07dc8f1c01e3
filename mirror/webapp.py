"""Running an aiohttp.web application on an address until a signal: shared by the servers."""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web


async def start_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve `app`; returns (runner, base URL ending in '/'). Call runner.cleanup()."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{shown}:{bound_port}/"


async def until_signalled() -> None:
    """Return on the first SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
