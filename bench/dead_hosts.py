"""How long a run stays open after a site's last page when its requisites live on dead hosts.

A local site (aiohttp on 127.0.0.1) has a home page with 20 images on hosts that cannot
answer: 12 on three names under the reserved .invalid TLD (no such name), 4 on a loopback
port with nothing listening (connection refused), 4 on a server that accepts and resets
(SO_LINGER 0), and two more pages. `mirror run` (default settings, robots.txt on) crawls it
in a process of its own; the figure is the time from the site's last request to the
process's exit, median of --repeat runs.

Usage: python bench/dead_hosts.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_mirror import run_mirror_async  # noqa: E402


async def resetting_server() -> tuple[asyncio.Server, str]:
    def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


async def one_run(work: Path) -> tuple[float, float, int]:
    """(seconds from the last site request to the exit, the run's wall time, exit code)."""
    resetter, reset_base = await resetting_server()
    refused = closed_port()
    dead = [f"http://cdn{i % 3}.bench.invalid/a{i}.png" for i in range(12)]
    dead += [f"{refused}b{i}.png" for i in range(4)] + [f"{reset_base}c{i}.png" for i in range(4)]
    last_request = [0.0]

    async def handle(request: web.Request) -> web.StreamResponse:
        last_request[0] = time.monotonic()
        if request.path == "/":
            images = "".join(f'<img src="{u}">' for u in dead)
            return web.Response(text=f'<html><body>{images}<a href="/a">a</a></body></html>',
                                content_type="text/html")
        if request.path in ("/a", "/b"):
            return web.Response(text='<html><body><a href="/b">b</a></body></html>',
                                content_type="text/html")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    site = work / "site.toml"
    site.write_text(f'[site]\nname = "dead"\nstart_urls = ["http://127.0.0.1:{port}/"]\n'
                    f'output_dir = "{work / "archive"}"\n')
    started = time.monotonic()
    try:
        code = await run_mirror_async(site)
    finally:
        await runner.cleanup()
        resetter.close()
        await resetter.wait_closed()
    ended = time.monotonic()
    return ended - last_request[0], ended - started, code


async def main(repeat: int) -> None:
    tails, walls = [], []
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="mirror-dead-") as tmp:
            tail, wall, code = await one_run(Path(tmp))
        print(f"run {i + 1}: exit {code}, {tail:.2f} s after the last page "
              f"({wall:.2f} s in all)", file=sys.stderr)
        tails.append(tail)
        walls.append(wall)
    print(f"20 requisites on dead hosts: the run ends {statistics.median(tails):.2f} s "
          f"after the site's last page (median of {repeat}; max {max(tails):.2f} s); "
          f"whole run {statistics.median(walls):.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
