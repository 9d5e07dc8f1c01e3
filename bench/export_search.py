"""What the page texts cost the exports of a generated site: `mirror export --to` (time, and
the size of its search index) and `--wacz` (time, and its size with and without the texts).

Generates the site (bench/sitegen.py) unless --site holds it, serves it with
mirror.demo.sitesrv, crawls it with `mirror run`, then exports in this process. With
--browser (Playwright and a system Chromium), also times search.html from file://: loading
its index and answering a query.

Usage: python bench/export_search.py [--pages 2000] [--site DIR] [--browser] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from run_mirror import (  # noqa: E402
    in_work_folder,
    prepare_site,
    run_mirror,
    start_sitesrv,
    stop_server,
    write_site_toml,
)

from mirror.replay.captures import CaptureIndex  # noqa: E402
from mirror.replay.export import export_folder  # noqa: E402
from mirror.replay.sitesearch import INDEX_SCRIPT, SEARCH_PAGE, page_text_limit  # noqa: E402
from mirror.replay.wacz import write_wacz  # noqa: E402
from mirror.web.extract import extract_html  # noqa: E402
from mirror.web.http import HTML_TYPES  # noqa: E402

CHROMIUM = os.environ.get("MIRROR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
QUERY = "river garden"  # two words of sitegen's vocabulary: many pages have both


def extraction_seconds(archive: CaptureIndex) -> float:
    """Seconds extract_html takes on every HTML page of the export: the search's extra work
    (reading the records is not counted: the export reads them anyway)."""
    spent = 0.0
    for cap in archive.latest():
        status, mime = archive.status_and_mime(cap)
        if mime in HTML_TYPES and status and 200 <= status < 300:
            record = archive.read(cap)
            body = record.decoded()[0]
            started = time.perf_counter()
            extract_html(body, cap.url, record.content_type)
            spent += time.perf_counter() - started
    return spent


def pages_jsonl_without_text(wacz: Path) -> tuple[int, int]:
    """(deflated size of pages.jsonl as written, deflated size with every `text` left out)."""
    with zipfile.ZipFile(wacz) as zf:
        info = zf.getinfo("pages/pages.jsonl")
        squeeze = zlib.compressobj(6, zlib.DEFLATED, -15)
        size = 0
        with zf.open(info) as f:
            for line in f:
                entry = json.loads(line)
                entry.pop("text", None)
                size += len(squeeze.compress(json.dumps(entry, ensure_ascii=False).encode()
                                             + b"\n"))
        return info.compress_size, size + len(squeeze.flush())


async def time_search_page(export: Path) -> tuple[float, float, int]:
    """(seconds to load search.html with its index, seconds to answer QUERY, pages found)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                   args=["--no-sandbox", "--disable-gpu"])
        page = await browser.new_page()
        started = time.perf_counter()
        await page.goto((export / SEARCH_PAGE).as_uri())
        # functions, not expressions: the page's CSP forbids the eval() an expression needs
        await page.wait_for_function("() => document.getElementById('results').dataset.query"
                                     " === ''")
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        await page.fill("#q", QUERY)
        await page.wait_for_function("(q) => document.getElementById('results').dataset.query"
                                     " === q", arg=QUERY, polling=10)
        answered = time.perf_counter() - started
        status = await page.inner_text("#status")
        await browser.close()
    return loaded, answered, int(status.split()[0]) if status[0].isdigit() else 0


def bench(args: argparse.Namespace, work: Path) -> None:
    site = args.site.resolve() if args.site else work / "site"
    prepare_site(site, args.pages, args.seed)
    server = start_sitesrv(site, work, 0.0)
    try:
        run_mirror(write_site_toml(work, server.base_url, 16, 16), work, 1800)
    finally:
        stop_server(server)
    archive = CaptureIndex.load(work / "archive")

    done = export_folder(archive, work / "export")
    index = work / "export" / INDEX_SCRIPT
    indexed = index.read_text(encoding="utf-8").count("\n") - 1
    print(f"export --to: {done.files} files, {done.pages} pages in {done.seconds:.1f} s, of "
          f"which {extraction_seconds(archive):.1f} s extracting the texts")
    print(f"  {INDEX_SCRIPT}: {index.stat().st_size:,} bytes, {indexed} pages, "
          f"at most {page_text_limit(indexed):,} characters of text a page")

    started = time.perf_counter()
    packed = write_wacz(archive, work / "site.wacz", title="bench")
    seconds = time.perf_counter() - started
    with_text, without_text = pages_jsonl_without_text(packed.path)
    print(f"export --wacz: {packed.pages} pages in {seconds:.1f} s, {packed.bytes:,} bytes; "
          f"without the texts {packed.bytes - with_text + without_text:,} bytes")
    print(f"  pages/pages.jsonl deflated: {with_text:,} bytes; without the texts "
          f"{without_text:,} bytes")

    if args.browser:
        loaded, answered, found = asyncio.run(time_search_page(work / "export"))
        print(f"search.html in Chromium: loaded in {loaded:.2f} s; {QUERY!r}: {found} pages "
              f"in {answered:.2f} s (the first search folds every text)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages to generate (2000)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (0)")
    parser.add_argument("--site", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--browser", action="store_true", help="time search.html in Chromium")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)

    def body(work: Path) -> int:
        bench(args, work)
        return 0

    return in_work_folder("export_search", args.keep, body)


if __name__ == "__main__":
    sys.exit(main())
