"""Generate a deterministic static test site for the benchmarks.

The site has N HTML pages (10-30 KB of plain English-like text each) in a few section
directories. Every page is reachable from /index.html: page i links to its parent and its
children in a tree of fan-out 4, plus random pages, for about ten page links each. Links mix
relative and absolute paths; some carry ?sort=asc (a new URL for the crawler, same bytes) or
?utm_source=... (dropped by the crawler's ignore_query). Shared CSS files @import each other
and use url() images; pages use images with src and srcset and a favicon. Some links go to
redirect sources (written to _redirects, with a few chains) and some to missing pages (404).
change_pages() rewrites a seeded share of the pages, for incremental runs (bench/chaos.py).

Usage: python bench/sitegen.py DIR --pages 2000 --seed 0 [--page-kb 20]
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import random
import struct
import sys
import time
import zlib
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

SECTIONS = ("docs", "guides", "blog", "news", "support", "products")
FANOUT = 4  # children per page in the spanning tree; depth ~ log4(pages)
PAGE_LINKS = 10  # links from one page to other pages, tree links included
STATS_FILE = "_sitegen.json"
DEFAULT_PAGE_KB = 20  # pages of 10-30 KB; smaller for big sites (bench/bigsite.py)

WORDS = """
the of and to in is that it for as with was on be by this are from at or an have not
which but all they were more one has their can been other when there will would about
into some time what out only its also after first new these two may any most over such
use used could where many each well because then those through between system garden
water light river stone field house winter summer season harvest bridge market city
morning evening road station village library archive record letter history question
answer method result table window door book page story paper word number service open
close early late small large simple careful quiet bright heavy common local public slow
quick modern ancient several every people worker student teacher keeper traveller farmer
builder writer reader visitor owner neighbour engineer cook gardener sailor mapmaker
measure build follow carry gather keep write read visit repair change move travel plant
grow store remember explain describe compare notice collect prepare return continue
""".split()

CAPTIONS = ("Overview", "Background", "Details", "Notes", "Examples", "History", "Practice")


@dataclass
class Plan:
    """Everything decided before any file is written."""

    paths: list[str]  # page i's path, no leading slash; paths[0] == "index.html"
    titles: list[str]
    links: list[list[str]] = field(default_factory=list)  # hrefs per page, page links first
    redirects: dict[str, tuple[int, str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # img/*.png used by pages
    retina: set[str] = field(default_factory=set)  # images that also have an @2x file
    used: set[str] = field(default_factory=set)  # images some page shows (only these are written)


def href(rng: random.Random, page: str, target: str) -> str:
    """A link from page to target (both root-relative, no leading slash): relative or absolute."""
    if rng.random() < 0.5:
        return "/" + target
    return posixpath.relpath(target, posixpath.dirname(page) or ".")


def plan_site(pages: int, rng: random.Random) -> Plan:
    titles, paths = ["Home"], ["index.html"]
    for i in range(1, pages):
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        titles.append(f"{a.capitalize()} {b} {i}")
        section = SECTIONS[i % len(SECTIONS)]
        paths.append(f"{section}/part-{i // 200}/{a}-{b}-{i}.html")
    plan = Plan(paths, titles)
    n_images = max(12, pages // 8)
    plan.images = [f"img/photo-{k:04d}.png" for k in range(n_images)]
    plan.retina = {p for k, p in enumerate(plan.images) if k % 3 == 0}
    for i in range(pages):
        plan.links.append(page_links(plan, i, rng))
    add_odd_links(plan, rng)
    return plan


def page_links(plan: Plan, i: int, rng: random.Random) -> list[str]:
    pages = len(plan.paths)
    targets = [(i - 1) // FANOUT] if i else []
    targets += [c for c in range(i * FANOUT + 1, i * FANOUT + FANOUT + 1) if c < pages]
    while len(targets) < min(PAGE_LINKS, pages - 1):
        t = rng.randrange(pages)
        if t != i and t not in targets:
            targets.append(t)
    hrefs = []
    for t in targets:
        link = href(rng, plan.paths[i], plan.paths[t])
        roll = rng.random()
        if roll < 0.02:
            link += "?sort=asc"
        elif roll < 0.04:
            link += "?utm_source=newsletter&utm_medium=email"
        elif roll < 0.09:
            link += "#" + rng.choice(CAPTIONS).lower()
        hrefs.append(link)
    return hrefs


def add_odd_links(plan: Plan, rng: random.Random) -> None:
    """Redirect sources (some chained) and missing pages, each linked from a random page."""
    pages = len(plan.paths)
    for k in range(max(4, pages // 40)):
        source, status = f"go/r{k}", rng.choice((301, 301, 302, 307, 308))
        if k % 5 == 4:  # a chain: this source redirects to an earlier source
            target = "/" + f"go/r{k - 1}"
        else:
            target = "/" + plan.paths[rng.randrange(pages)]
        plan.redirects["/" + source] = (status, target)
        i = rng.randrange(pages)
        plan.links[i].append(href(rng, plan.paths[i], source))
    for k in range(max(2, pages // 100)):
        missing = f"{SECTIONS[k % len(SECTIONS)]}/gone-{k}.html"
        plan.missing.append("/" + missing)
        i = rng.randrange(pages)
        plan.links[i].append(href(rng, plan.paths[i], missing))


def sentence_pool(rng: random.Random, n: int = 4000) -> list[str]:
    pool = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(8, 22))
        if rng.random() < 0.3:
            words.insert(rng.randrange(1, len(words)), f"{rng.randint(2, 1999)}")
        text = " ".join(words)
        pool.append(text[0].upper() + text[1:] + rng.choice(".....?!"))
    return pool


def sentence_range(page_kb: int) -> tuple[int, int]:
    """Sentences per paragraph: (3, 7) for the default page size, fewer for smaller pages."""
    low = max(1, round(3 * page_kb / DEFAULT_PAGE_KB))
    return low, max(low, round(7 * page_kb / DEFAULT_PAGE_KB))


def render_page(
    plan: Plan, i: int, rng: random.Random, pool: list[str], page_kb: int = DEFAULT_PAGE_KB
) -> str:
    path = plan.paths[i]
    up = "../" * path.count("/")
    section = SECTIONS[i % len(SECTIONS)]
    out = [
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{escape(plan.titles[i])} | Bench Site</title>\n",
        '<link rel="stylesheet" href="/css/base.css">\n',
        f'<link rel="stylesheet" href="{up}css/sections/{section}.css">\n',
        '<link rel="icon" href="/img/favicon.png" type="image/png">\n</head>\n<body>\n',
        f'<header><a href="{up}index.html">Bench Site</a></header>\n<main>\n',
        f"<h1>{escape(plan.titles[i])}</h1>\n",
    ]
    links = list(plan.links[i])
    target_size = rng.randint(page_kb * 500, page_kb * 1500)  # 10-30 KB by default
    sentences = sentence_range(page_kb)
    size = sum(map(len, out))
    n = 0
    while size < target_size or links:
        part = paragraph(plan, rng, pool, links, up, n, sentences)
        out.append(part)
        size += len(part)
        n += 1
    out.append(
        "</main>\n<footer><p>Generated by bench/sitegen.py.</p></footer>\n</body>\n</html>\n"
    )
    return "".join(out)


def paragraph(
    plan: Plan,
    rng: random.Random,
    pool: list[str],
    links: list[str],
    up: str,
    n: int,
    sentences_per: tuple[int, int] = (3, 7),
) -> str:
    parts = []
    if n % 4 == 0:
        caption = CAPTIONS[(n // 4) % len(CAPTIONS)]
        parts.append(f'<h2 id="{caption.lower()}">{caption}</h2>\n')
    if n % 3 == 1:
        parts.append(figure(plan, rng, up))
    sentences = rng.sample(pool, rng.randint(*sentences_per))
    if links and rng.random() < 0.7:
        words = rng.choice(pool).split()[:4]
        sentences.insert(1, f'See <a href="{escape(links.pop(0))}">{" ".join(words)}</a>.')
    parts.append("<p>" + " ".join(sentences) + "</p>\n")
    return "".join(parts)


def figure(plan: Plan, rng: random.Random, up: str) -> str:
    image = rng.choice(plan.images)
    plan.used.add(image)
    src = rng.choice(("/" + image, up + image))
    srcset = ""
    if image in plan.retina:
        double = src.removesuffix(".png") + "@2x.png"
        srcset = f' srcset="{src} 1x, {double} 2x"'
    return (
        f'<figure><img src="{src}"{srcset} alt="" width="320" height="200">'
        f"<figcaption>{escape(rng.choice(WORDS).capitalize())}</figcaption></figure>\n"
    )


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A small valid PNG: a vertical gradient from rgb."""
    rows = b"".join(
        b"\x00" + bytes(min(255, c + y * 3) for c in rgb) * width for y in range(height)
    )

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def write_assets(root: Path, plan: Plan, rng: random.Random) -> list[str]:
    """Write CSS and images; returns their paths (root-relative)."""
    files: dict[str, bytes] = {}
    for image in sorted(plan.used):
        rgb = (rng.randrange(160), rng.randrange(160), rng.randrange(160))
        files[image] = png(32, 20, rgb)
        if image in plan.retina:
            files[image.removesuffix(".png") + "@2x.png"] = png(64, 40, rgb)
    for name in ("favicon", "background", "pattern"):
        files[f"img/{name}.png"] = png(16, 16, (rng.randrange(200), 120, 90))
    files["css/base.css"] = (
        b'@import url("theme.css");\n'
        b"body { font: 16px/1.5 Georgia, serif; margin: 0 auto; max-width: 46rem; }\n"
        b'main { background: url("../img/background.png") repeat; }\n'
    )
    files["css/theme.css"] = (
        b"header { background: #234 url(/img/pattern.png); color: #fff; padding: 1rem; }\n"
        b"figure img { max-width: 100%; height: auto; }\n"
    )
    for section in SECTIONS[: len(plan.paths)]:  # page i uses section i % len(SECTIONS)
        files[f"img/banner-{section}.png"] = png(48, 12, (rng.randrange(200), 90, 140))
        files[f"css/sections/{section}.css"] = (
            "@import '../theme.css';\n"
            f"h1 {{ background: url('../../img/banner-{section}.png') no-repeat; }}\n"
        ).encode()
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return sorted(files)


def write_redirects(root: Path, plan: Plan) -> None:
    lines = ["# PATH STATUS TARGET, written by bench/sitegen.py"]
    lines += [f"{src} {status} {target}" for src, (status, target) in plan.redirects.items()]
    (root / "_redirects").write_text("\n".join(lines) + "\n", encoding="utf-8")


def generate(
    root: Path, pages: int, seed: int = 0, page_kb: int = DEFAULT_PAGE_KB
) -> dict[str, int]:
    """Write the site under root (created if needed; files are overwritten); return its stats.

    page_kb is the mean page size: pages hold page_kb/2 to 3*page_kb/2 KB of text, but never
    less than their links need (about 3 KB for page_kb 2).
    """
    if pages < 1 or page_kb < 1:
        raise ValueError("pages and page_kb must be >= 1")
    rng = random.Random(seed)
    plan = plan_site(pages, rng)
    pool = sentence_pool(rng)
    root.mkdir(parents=True, exist_ok=True)
    html_bytes = 0
    for i, path in enumerate(plan.paths):
        text = render_page(plan, i, rng, pool, page_kb)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
        html_bytes += len(text)
    assets = write_assets(root, plan, rng)
    write_redirects(root, plan)
    stats = count(plan, len(assets), html_bytes)
    saved: dict[str, object] = {"pages": pages, "seed": seed, "stats": stats}
    if page_kb != DEFAULT_PAGE_KB:  # the default leaves the file as it always was
        saved = {"pages": pages, "seed": seed, "page_kb": page_kb, "stats": stats}
    (root / STATS_FILE).write_text(json.dumps(saved, indent=2) + "\n")
    return stats


def change_pages(root: Path, share: float, seed: int | str, stamp: str) -> list[str]:
    """Rewrite about `share` of the site's pages (chosen by seed) with a new paragraph naming
    stamp; returns their paths. Links are kept, so the site's URLs stay the same. Each file's
    bytes, size and mtime all change (mtime at least one second on, so that Last-Modified
    changes too), and with them sitesrv's ETag."""
    pages = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    rng = random.Random(seed)
    chosen = sorted(rng.sample(pages, min(len(pages), max(1, round(len(pages) * share)))))
    for rel in chosen:
        path = root / rel
        before = path.stat().st_mtime_ns
        words = " ".join(rng.choices(WORDS, k=12))
        note = f"<p>{escape(stamp)}: {words}.</p>\n"
        text = path.read_text(encoding="utf-8")
        cut = text.rfind("</main>") if "</main>" in text else len(text)
        path.write_text(text[:cut] + note + text[cut:], encoding="utf-8")
        mtime = max(time.time_ns(), before + 1_000_000_000)
        os.utime(path, ns=(mtime, mtime))
    return chosen


def count(plan: Plan, assets: int, html_bytes: int) -> dict[str, int]:
    hrefs = [h.split("#")[0] for links in plan.links for h in links]
    sort_urls = {resolve(plan, h) for h in hrefs if h.endswith("?sort=asc")}
    utm_urls = {resolve(plan, h) for h in hrefs if "?utm_" in h}
    redirects, missing = len(plan.redirects), len(plan.missing)
    pages = len(plan.paths)
    return {
        "pages": pages,
        "assets": assets,
        "redirects": redirects,
        "redirect_chains": sum(t in plan.redirects for _, t in plan.redirects.values()),
        "expected_404s": missing,
        "sort_variants": len(sort_urls),
        "utm_variants": len(utm_urls),
        "links": len(hrefs),
        "html_bytes": html_bytes,
        # distinct URLs a crawler fetches when utm_* is ignored (the default config)
        "expected_fetches": pages + assets + redirects + missing + len(sort_urls),
    }


def resolve(plan: Plan, link: str) -> str:
    """The root-relative URL of a link found on any page (only its path shape matters)."""
    path, _, query = link.partition("?")
    name = posixpath.basename(path)
    return f"{name}?{query}"  # page names are unique, so the file name identifies the page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path, help="folder to write the site into")
    parser.add_argument("--pages", type=int, default=2000, help="number of HTML pages (2000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument(
        "--page-kb",
        type=int,
        default=DEFAULT_PAGE_KB,
        help=f"mean page size in KB ({DEFAULT_PAGE_KB}); 2 makes 100,000 pages about 0.3 GB",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    stats = generate(args.dir, args.pages, args.seed, args.page_kb)
    elapsed = time.perf_counter() - started
    print(json.dumps(stats, indent=2))
    print(f"generated {args.dir} in {elapsed:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
