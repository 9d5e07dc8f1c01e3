"""Compare the gzip codecs mirror can write WARC records with, on a generated site's files.

Each file is compressed as one gzip member (as a WARC record is). Prints MB/s and the
compressed size as a fraction of the input, for the standard library's zlib and for ISA-L
(`isal`, mirror's default where a wheel exists).

Usage: python bench/compress_speed.py SITE_FOLDER [--files 500]
"""

from __future__ import annotations

import argparse
import time
import zlib
from pathlib import Path


def codecs() -> list[tuple[str, object, int]]:
    found: list[tuple[str, object, int]] = [("zlib", zlib, level) for level in (1, 6, 9)]
    try:
        from isal import isal_zlib
    except ImportError:
        return found
    return found + [("isal", isal_zlib, level) for level in (0, 1, 2, 3)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", type=Path)
    parser.add_argument("--files", type=int, default=500)
    args = parser.parse_args(argv)
    paths = sorted(p for p in args.site.rglob("*.html") if p.is_file())[: args.files]
    data = [p.read_bytes() for p in paths]
    total = sum(map(len, data))
    if not total:
        parser.error(f"no .html files under {args.site}")
    print(f"{len(data)} files, {total / 1e6:.1f} MB")
    print("| codec | level | MB/s | size / input | ms per file |\n|---|--:|--:|--:|--:|")
    for name, module, level in codecs():
        start, out = time.perf_counter(), 0
        for chunk in data:
            c = module.compressobj(level, zlib.DEFLATED, 31)  # type: ignore[attr-defined]
            out += len(c.compress(chunk)) + len(c.flush())
        took = time.perf_counter() - start
        print(f"| {name} | {level} | {total / took / 1e6:.0f} | {out / total:.3f}"
              f" | {took / len(data) * 1000:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
