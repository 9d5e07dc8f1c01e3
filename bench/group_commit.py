"""The manifest's CPU per capture by group size: CaptureStore on synthetic captures.

Each capture is a 20 KB page with ten links and a page text, stored through
CaptureStore.store with a group of 1 (a transaction per capture, as before issue 17) up to
128 captures; the CPU spent in the group commits and in store() as a whole (WARC records
included) is divided by the captures. Best of --repeat runs. No network, no event loop:
groups end by size only.

Usage: python bench/group_commit.py [--captures 2000] [--repeat 2] [--sizes 1,4,16,32,64,128]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import random
import sys
import tempfile
import time
from pathlib import Path

from mirror.archive.warcwriter import Exchange, WarcWriter, default_info, sha1_digest
from mirror.crawl.store import CaptureStore
from mirror.manifest.writer import Manifest, NewUrl
from mirror.model import Discovered, PageText

WORDS = [f"w{i}" for i in range(3000)]


class Timed(CaptureStore):
    """CaptureStore that counts the CPU seconds of its group commits."""

    spent = 0.0

    def commit_group(self) -> bool:
        start = time.process_time()
        try:
            return super().commit_group()
        finally:
            self.spent += time.process_time() - start


def run(size: int, captures: int, rng: random.Random) -> tuple[float, float]:
    """(ms per capture in the commits, ms per capture in store()) for one group size."""
    bodies = [" ".join(rng.choice(WORDS) for _ in range(3000)).encode() for _ in range(50)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest = Manifest(folder / "manifest.sqlite3")
        store = Timed(manifest, folder / "warc", lambda *_: False, group_size=size,
                      writer=WarcWriter(folder / "warc", "b", 10**9,
                                        default_info("d", "b/run-1")))
        urls = [NewUrl(f"http://x/{i}", "x", 0, 5, "page", "start", "link")
                for i in range(captures)]
        run_id = manifest.runs.start("2026-01-01T00:00:00Z", "d", urls)
        in_store = 0.0
        while items := manifest.urls.lease(64, 1e12):
            for item in items:
                i = int(item.url.rsplit("/", 1)[1])
                body = bodies[i % len(bodies)] + str(i).encode()
                ex = Exchange(item.url, "GET", "/", (("Host", "x"),), "1.1", 200, "OK",
                              (("Content-Type", "text/html"),), io.BytesIO(body), len(body),
                              payload_digest=sha1_digest(hashlib.sha1(body)))
                links = [NewUrl(f"http://x/{rng.randrange(captures)}", "x", 1, 5, "page",
                                "link", "link") for _ in range(10)]
                text = PageText(f"page {i}", " ".join(rng.choice(WORDS) for _ in range(300)))
                start = time.process_time()
                store.store(run_id, item, ex, None, None, Discovered(None, links, None, text))
                in_store += time.process_time() - start
        start = time.process_time()
        store.close()
        in_store += time.process_time() - start
        manifest.close()
    return store.spent / captures * 1000, in_store / captures * 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--captures", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--sizes", default="1,4,16,32,64,128")
    args = p.parse_args(argv)
    print("| group size | manifest commit ms/capture | store() ms/capture |")
    print("|--:|--:|--:|")
    for size in (int(s) for s in args.sizes.split(",")):
        commit, stored = min(run(size, args.captures, random.Random(0))
                             for _ in range(args.repeat))
        print(f"| {size} | {commit:.3f} | {stored:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
