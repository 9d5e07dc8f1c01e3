"""A browser for every page (issue 35's comparison for `[browser] mode = "always"`): the way
Browsertrix Crawler, zimit and ArchiveBox's browser capture crawl, reduced to its core.

    python bench/browser_peer.py --plain 1000 --apps 20 [--tabs 2] [--latency S] [--spread]

Those tools need Docker images this machine cannot fetch, so this stands in for them: the same
site (tests/spasite.py) crawled by Playwright driving the same Chromium, `tabs` pages at once,
each page loaded, waited for until the network is idle (Playwright's "networkidle": 500 ms
without a request), scrolled to its end, its links read, the site's own pages followed. It
archives nothing and reuses its tabs from page to page (no new context per page), so it is a
lower bound on what such a tool spends per page. Printed: wall time, pages, pages per
second, peak memory (PSS, as bench/browser.py) of this process (which serves the site in a
thread), Playwright's driver and the browser's processes, load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import spasite  # noqa: E402
from browser import descendants_pss  # noqa: E402  (bench/browser.py's memory measure)

from mirror.browser import find_browser  # noqa: E402

LINKS = "() => Array.from(document.querySelectorAll('a[href]'), a => a.href)"
SCROLL = """async () => { for (let i = 0; i < 10; i++) {
  const e = document.scrollingElement; if (scrollY + innerHeight >= e.scrollHeight - 2) break;
  scrollBy(0, innerHeight); await new Promise(r => setTimeout(r, 200)); } }"""


async def crawl(base: str, executable: Path, tabs: int) -> tuple[int, int]:
    """(pages loaded, peak PSS in bytes of this process and all below it)."""
    from playwright.async_api import async_playwright

    origin = urlsplit(base).netloc
    seen, todo, done = {base}, asyncio.Queue[str](), 0
    todo.put_nowait(base)
    peak = [0]
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(executable),
                                           args=["--no-sandbox", "--disable-gpu"])
        stop = threading.Event()
        pid = os.getpid()  # this process (the site's thread too), Playwright's driver, the browser

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], descendants_pss(pid))
                time.sleep(0.1)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        pages = [await context.new_page() for _ in range(tabs)]
        busy = [0]

        async def worker(page: object) -> None:
            nonlocal done
            while True:
                try:
                    url = await asyncio.wait_for(todo.get(), 5 if busy[0] else 0.5)
                except TimeoutError:
                    if not busy[0]:
                        return
                    continue
                busy[0] += 1
                try:
                    await page.goto(url, wait_until="load", timeout=30000)  # type: ignore[attr-defined]
                    await page.wait_for_load_state("networkidle", timeout=30000)  # type: ignore[attr-defined]
                    await page.evaluate(SCROLL)  # type: ignore[attr-defined]
                    await page.wait_for_load_state("networkidle", timeout=30000)  # type: ignore[attr-defined]
                    links = await page.evaluate(LINKS)  # type: ignore[attr-defined]
                    done += 1
                except Exception as exc:  # noqa: BLE001 - a bad page is counted out
                    print(f"{url}: {exc}", file=sys.stderr)
                    links = []
                finally:
                    busy[0] -= 1
                for link in links:
                    link = urldefrag(link)[0]
                    if urlsplit(link).netloc == origin and link not in seen:
                        seen.add(link)
                        todo.put_nowait(link)

        await asyncio.gather(*(worker(p) for p in pages))
        stop.set()
        watcher.join(1)
        await browser.close()
    return done, peak[0]


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--plain", type=int, default=1000)
    args.add_argument("--apps", type=int, default=20)
    args.add_argument("--tabs", type=int, default=2)
    args.add_argument("--latency", type=float, default=0.0)
    args.add_argument("--spread", action="store_true")
    opts = args.parse_args()
    executable = find_browser()
    if executable is None:
        print("no Chromium-family browser found", file=sys.stderr)
        return 2
    with spasite.serve(plain=opts.plain, apps=opts.apps, lifetime=6 * 3600,
                       latency=opts.latency, spread=opts.spread) as site:
        load0 = os.getloadavg()[0]
        start = time.monotonic()
        pages, peak = asyncio.run(crawl(site.base, executable, opts.tabs))
        wall = time.monotonic() - start
    print(json.dumps({"tool": "playwright, a browser for every page", "wall_s": round(wall, 1),
                      "pages": pages, "pages_per_s": round(pages / wall, 2),
                      "peak_pss_mb": round(peak / 1e6),
                      "load": f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
