"""The browser driver alone (mirror/browser, issue 35): pages rendered per second and the
browser's memory, for plain pages and for the app page of tests/test_browser_driver.py (JSON
fetched, a lazy image, three batches of infinite scroll), every request answered from memory
(no server: what is measured is the browser and the driver, not a site).

Usage: python bench/browser_pool.py [--plain 40] [--app 10] [--tabs 2] [--scroll 10]
Prints, per kind: pages, seconds, pages/s, requests answered; then the peak memory of the
browser's processes (sum of RssAnon, sampled every 0.2 s), restarts, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_browser_driver import DictAnswerer  # noqa: E402  (the test's site, from memory)

from mirror.browser import BrowserPool, BrowserSettings, find_browser  # noqa: E402
from mirror.browser.launch import group_rss_mb  # noqa: E402


async def sample_memory(pool: BrowserPool, peak: list[float]) -> None:
    while True:
        if pool.pid is not None:
            peak[0] = max(peak[0], group_rss_mb(pool.pid) or 0.0)
        await asyncio.sleep(0.2)


async def render_all(pool: BrowserPool, path: str, count: int) -> tuple[float, int]:
    answer = DictAnswerer()
    start = time.monotonic()
    await asyncio.gather(*(pool.render(f"http://bench.test{path}?n={n}", answer)
                           for n in range(count)))
    return time.monotonic() - start, len(answer.log)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain", type=int, default=40)
    parser.add_argument("--app", type=int, default=10)
    parser.add_argument("--tabs", type=int, default=2)
    parser.add_argument("--scroll", type=int, default=10)
    args = parser.parse_args()
    executable = find_browser()
    if executable is None:
        sys.exit("no Chromium-family browser found")
    settings = BrowserSettings(executable=executable, tabs=args.tabs, scroll=args.scroll)
    peak = [0.0]
    async with BrowserPool(settings) as pool:
        await pool.render("http://bench.test/plain", DictAnswerer())  # the launch, apart
        sampler = asyncio.create_task(sample_memory(pool, peak))
        for kind, path, count in (("plain", "/plain", args.plain), ("app", "/app", args.app)):
            seconds, requests = await render_all(pool, path, count)
            print(f"{kind}: {count} pages in {seconds:.1f} s, {count / seconds:.2f} pages/s, "
                  f"{requests} requests answered")
        sampler.cancel()
        print(f"browser {pool.version}, tabs {args.tabs}, peak RssAnon {peak[0]:.0f} MB, "
              f"restarts {pool.restarts}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
