"""A minimal Scrapy mirror for bench/compare.py: follow links and page requisites, save bodies.

Stays on the start URL's host; follows <a>, <link>, <img src/srcset> and <script src> in
HTML and @import / url() in CSS; writes each 200 response's body under OUT/<path>, with
"?query" appended to the file name like wget does. Redirects, the duplicate filter and
everything else are Scrapy's defaults. Needs Scrapy, which the project does not depend on.

Usage: python bench/scrapy_spider.py START_URL OUT [--concurrency 32]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess

CSS_URL = re.compile(rb"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""")
HTML_LINKS = "//a/@href | //link/@href | //img/@src | //script/@src"


def file_path(out: Path, url: str) -> Path:
    parts = urlsplit(url)
    path = unquote(parts.path).lstrip("/") or "index.html"
    if path.endswith("/"):
        path += "index.html"
    if parts.query:
        path += "?" + parts.query
    return out / path


class MirrorSpider(scrapy.Spider):
    name = "mirror_bench"

    def __init__(self, start_url: str, out: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start_url]
        self.allowed_domains = [urlsplit(start_url).hostname or ""]
        self.out = Path(out)

    def parse(self, response):  # type: ignore[no-untyped-def]
        target = file_path(self.out, response.url)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(response.body)
        for link in self.links(response):
            yield response.follow(link, callback=self.parse)

    def links(self, response) -> list[str]:  # type: ignore[no-untyped-def]
        content_type = response.headers.get(b"Content-Type", b"").lower()
        if b"text/css" in content_type:
            return [(a or b).decode() for a, b in CSS_URL.findall(response.body)]
        if b"html" not in content_type:
            return []
        found = response.xpath(HTML_LINKS).getall()
        for srcset in response.xpath("//img/@srcset").getall():
            found += [item.split()[0] for item in srcset.split(",") if item.strip()]
        return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("start_url")
    parser.add_argument("out", type=Path)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    process = CrawlerProcess(
        settings={
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
            "DOWNLOAD_DELAY": 0,
            "AUTOTHROTTLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "DEPTH_LIMIT": 0,
        }
    )
    process.crawl(MirrorSpider, start_url=args.start_url, out=str(args.out))
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
