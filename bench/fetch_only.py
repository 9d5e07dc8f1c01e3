"""The ceiling for a crawler on this machine: fetch a fixed list of URLs with aiohttp and do
nothing else (no parsing, no WARC, no manifest), `--workers` requests at a time.

bench/compare.py runs it as the tool "fetch-only" on the URLs the mirror run of the same
round requested, against the same server, so the latency target can be read against what
any asyncio client reaches here: the server's own overhead and a shared, noisy CPU cap
both alike. Bodies are read whole and hashed, as a crawler must.

Usage: python bench/fetch_only.py URLS_FILE [--workers 16]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import time
from pathlib import Path

import aiohttp

CHUNK = 1 << 16


async def fetch_all(urls: list[str], workers: int) -> int:
    """Fetch every URL once, `workers` at a time; returns how many failed."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    failed = 0
    connector = aiohttp.TCPConnector(limit=workers)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

        async def worker() -> None:
            nonlocal failed
            while not queue.empty():
                url = queue.get_nowait()
                try:
                    async with session.get(url, allow_redirects=False) as resp:
                        digest = hashlib.sha1()
                        async for chunk in resp.content.iter_chunked(CHUNK):
                            digest.update(chunk)
                except (aiohttp.ClientError, OSError) as exc:
                    failed += 1
                    print(f"{url}: {exc}", file=sys.stderr)

        await asyncio.gather(*(worker() for _ in range(workers)))
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("urls", type=Path, help="file with one URL per line")
    parser.add_argument("--workers", type=int, default=16, help="requests at a time (16)")
    args = parser.parse_args(argv)
    urls = args.urls.read_text(encoding="utf-8").split()
    start = time.perf_counter()
    failed = asyncio.run(fetch_all(urls, args.workers))
    took = time.perf_counter() - start
    print(f"{len(urls)} URLs in {took:.2f} s ({len(urls) / took:.0f}/s), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
