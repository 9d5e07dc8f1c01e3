"""Measure an incremental backup: run 1 of a generated site, change some pages, run 2.

Prints wall time, WARC bytes written and records of each run, and what the second run's
report says changed. The site is served by mirror.demo.sitesrv, which answers conditional
requests (ETag / Last-Modified -> 304) like a typical static file server.

Usage: python bench/incremental.py --pages 2000 --changed 0.05
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from run_mirror import start_sitesrv, stop_server  # noqa: E402
from sitegen import generate  # noqa: E402


def warc_bytes(archive: Path) -> int:
    return sum(p.stat().st_size for p in (archive / "warc").glob("*.warc.gz"))


def run(toml: Path, work: Path) -> tuple[float, dict[str, object]]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mirror", "run", str(toml), "--quiet"],
                          cwd=work, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 3):
        raise SystemExit(f"mirror run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    reports = sorted((work / "archive" / "reports").glob("*.json"), key=lambda p: int(p.stem))
    return wall, json.loads(reports[-1].read_text())


def change_pages(site: Path, share: float, seed: int) -> int:
    pages = sorted(p for p in site.rglob("*.html") if p.name != "index.html")
    chosen = random.Random(seed).sample(pages, int(len(pages) * share))
    for page in chosen:
        text = page.read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", "<p>Updated since the last backup.</p></body>"),
                        encoding="utf-8")
    return len(chosen)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--changed", type=float, default=0.05, help="share of pages changed")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirror-incr-") as tmp:
        work = Path(tmp)
        site = work / "site"
        generate(site, args.pages, seed=args.seed)
        server = start_sitesrv(site, work, 0.0)
        try:
            toml = work / "site.toml"
            toml.write_text(f'[site]\nname = "incr"\nstart_urls = ["{server.base_url}index.html"]'
                            '\noutput_dir = "archive"\n[crawl]\nworkers = 16\nper_host = 16\n')
            wall1, rep1 = run(toml, work)
            bytes1 = warc_bytes(work / "archive")
            changed = change_pages(site, args.changed, args.seed)
            time.sleep(1.1)  # a distinct timestamp for the second run
            wall2, rep2 = run(toml, work)
            bytes2 = warc_bytes(work / "archive") - bytes1
        finally:
            stop_server(server)
    print(f"{args.pages} pages, {changed} changed between the runs")
    print(f"{'':8}{'wall s':>8}{'WARC bytes':>14}{'captures':>10}")
    print(f"{'run 1':8}{wall1:>8.1f}{bytes1:>14,}{rep1['captures']:>10}")
    print(f"{'run 2':8}{wall2:>8.1f}{bytes2:>14,}{rep2['captures']:>10}")
    print(f"run 2 wrote {bytes2 / bytes1:.1%} of run 1's bytes in {wall2 / wall1:.0%} of its time")
    print("run 2 changes:", rep2["changes"]["counts"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
