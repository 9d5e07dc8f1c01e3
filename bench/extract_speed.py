"""Time HTML link extraction (mirror.web.extract.extract_html) per page.

Prints, for generated pages (bench/sitegen.py) and the demo site's pages, the median and
90th percentile of milliseconds per page (each page's best of --repeat timings, to keep
scheduler noise out), the median page size and the median number of links found.

    python bench/extract_speed.py                      # 50 generated pages + the demo site
    python bench/extract_speed.py --site DIR           # every *.html under DIR instead
    git show HEAD:mirror/web/extract.py > /tmp/before.py
    python bench/extract_speed.py --against /tmp/before.py   # the same, before and after
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import timeit
import warnings
from collections.abc import Callable
from pathlib import Path

from mirror.web.extract import extract_html

BENCH = Path(__file__).resolve().parent
DEMO_SITE = BENCH.parent / "mirror" / "demo" / "site"

Page = tuple[str, bytes]  # (url, body)
Extractor = Callable[[bytes, str, str | None], object]


def html_pages(root: Path) -> list[Page]:
    """Every .html file under root, as if served from http://bench.test/."""
    return [
        ("http://bench.test/" + path.relative_to(root).as_posix(), path.read_bytes())
        for path in sorted(root.rglob("*.html"))
    ]


def time_pages(pages: list[Page], repeat: int, extract: Extractor) -> list[float]:
    """Best-of-repeat seconds per call, one figure per page."""
    times = []
    for url, body in pages:
        timer = timeit.Timer(lambda url=url, body=body: extract(body, url, "text/html"))
        number = max(1, int(0.02 / max(timer.timeit(1), 1e-6)))  # about 20 ms per sample
        times.append(min(timer.repeat(repeat, number)) / number)
    return times


def report(name: str, pages: list[Page], repeat: int, extract: Extractor) -> float:
    """Print one line of figures; return the median seconds per page."""
    times = sorted(time_pages(pages, repeat, extract))
    links = [len(extract_html(body, url, "text/html").links) for url, body in pages]
    sizes = [len(body) for _, body in pages]
    median = statistics.median(times)
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    print(
        f"{name:<18} pages {len(pages):>4}  median {median * 1000:6.3f} ms"
        f"  p90 {p90 * 1000:6.3f} ms  size {statistics.median(sizes) / 1000:5.1f} KB"
        f"  links {statistics.median(links):5.1f}"
    )
    return median


def load_extractor(path: Path) -> Extractor:
    """extract_html of another version of mirror/web/extract.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location("extract_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    extract: Extractor = module.extract_html
    return extract


def generate(pages: int, into: str) -> Path:
    sys.path.insert(0, str(BENCH))
    import sitegen  # type: ignore[import-not-found]

    sitegen.generate(Path(into), pages)
    return Path(into)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--site", type=Path, help="time every *.html under this folder")
    parser.add_argument("--pages", type=int, default=50, help="pages to generate (50)")
    parser.add_argument("--repeat", type=int, default=5, help="timings per page, best kept (5)")
    parser.add_argument("--against", type=Path, help="another extract.py to time as well")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # an older extractor's parser may warn about markup
    before = load_extractor(args.against) if args.against else None
    with tempfile.TemporaryDirectory(prefix="extract-speed-") as tmp:
        sets = [("site", html_pages(args.site))] if args.site else [
            ("generated", html_pages(generate(args.pages, tmp))),
            ("demo", html_pages(DEMO_SITE)),
        ]
        for name, pages in sets:
            now = report(name, pages, args.repeat, extract_html)
            if before is not None:
                then = report(f"{name} (against)", pages, args.repeat, before)
                print(f"{'':<18} {then / now:.1f}x faster than --against")
    return 0


if __name__ == "__main__":
    sys.exit(main())
