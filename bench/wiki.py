"""mirror and wget on Debian's MediaWiki (tests/wikisrv.py), side by side (issue 33).

Builds (or reuses) the test wiki, serves it on 127.0.0.1 with `php -S`, runs
`wget -m -p -k -E -np` on it, then `mirror run` with the README's smallest site file, each
bounded in time, and prints for each: requests, the share of requests to edit, history, diff,
old-revision, info and Special: pages (by URL kind), wall time; then mirror's export:
articles browsable on file:// from the exported Main Page.

Usage: python bench/wiki.py [--mirror-timeout 120] [--wget-timeout 600] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import wikirun  # noqa: E402
import wikisrv  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror-timeout", type=float, default=120.0)
    parser.add_argument("--wget-timeout", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--learned-only", action="store_true",
                        help="mirror with meta_robots = false and no built-in trap rules: "
                             "only the learned patterns can end the crawl")
    args = parser.parse_args()
    if (why := wikisrv.missing()) is not None:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-wiki-"))
    try:
        seconds, built = wikisrv.prepared(work / "wiki")
        print(f"wiki {'built' if built else 'copied from the cache'} in {seconds:.1f} s "
              f"({wikisrv.ARTICLES} articles)")
        with wikisrv.serve(work / "wiki", work / "access.log") as wiki:
            wget = wikirun.run_wget(wiki, work / "wget", args.wget_timeout)
            print(wget.summary())
            extra = ("[scope]\nmeta_robots = false\ntraps = []\nlearn_traps = true\n"
                     if args.learned_only else "")
            mirror = wikirun.run_mirror(wiki, work / "mirror", args.mirror_timeout, extra)
            print(mirror.summary())
        wikirun.export(work / "mirror", work / "export")
        pages = wikirun.browsable(work / "export", wiki)
        print(f"mirror: {len(pages)}/{wikisrv.ARTICLES} articles browsable from the export; "
              f"wall {mirror.wall / wget.wall:.1f}x wget's")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
