"""What an FTS5 prefix index (prefix = '3') costs and buys, on a vocabulary like a real site's.

The generated site of sitegen.py draws its words from a short list, so every 3-letter prefix
expands to a few words; a real site's text expands `con*` to hundreds. This script cuts N
texts of about 1.8 KB (a title of 6 words, a body of 324) from real English and code: the
Debian changelogs under /usr/share/doc and the Python standard library's sources on this
machine. It builds the manifest's full-text table over them twice, with and without the
prefix index, the way the crawler feeds it (256 texts per transaction), and prints each
build's CPU and size. Then it asks both for `--queries` 3-letter prefixes of words drawn
from the texts, the way `mirror search` asks (the newest RANKED_AT_MOST matches, bm25,
highlight and snippet, 20 results), and prints p50, p95 and the slowest.

With `--kinds word,phrase,prefix` it asks as many of each kind (a word of the texts, two
adjacent words as a phrase, a 3-letter prefix) and prints each kind's figures and the p95 of
them all: what a person's searches of a big archive of real text cost. `--plain-only`
builds the table without the prefix index alone (as the manifest has it).

Usage: python bench/fts_prefix.py [--texts 100000] [--queries 200] [--work /tmp/fts-prefix]
       [--kinds prefix] [--plain-only]
       (about 2 minutes and 750 MB at 100,000 texts; --work keeps the two databases)
"""

from __future__ import annotations

import argparse
import glob
import gzip
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mirror.manifest.texts import RANKED_AT_MOST  # noqa: E402

TITLE_WORDS, BODY_WORDS = 6, 324
BATCH = 256  # as Manifest.texts.index is fed (TEXT_BATCH)
SOURCES = ("/usr/share/doc/*/changelog*.gz", "/usr/lib/python3*/**/*.py")


def real_words(limit_files: int = 3000) -> list[str]:
    words: list[str] = []
    for pattern in SOURCES:
        for name in sorted(glob.glob(pattern, recursive=True))[:limit_files]:
            try:
                opener = gzip.open if name.endswith(".gz") else open
                with opener(name, "rt", errors="replace") as f:
                    words += re.findall(r"[A-Za-z]+", f.read())
            except OSError:
                continue
    return words


def texts(words: list[str], n: int, rng: random.Random) -> list[tuple[int, str, str]]:
    span = TITLE_WORDS + BODY_WORDS
    out = []
    for i in range(n):
        at = rng.randrange(len(words) - span)
        out.append((i + 1, " ".join(words[at:at + TITLE_WORDS]),
                    " ".join(words[at + TITLE_WORDS:at + span])))
    return out


def build(path: Path, rows: list[tuple[int, str, str]], prefix: bool) -> tuple[float, int]:
    """The table as the manifest makes it; (indexing CPU seconds, file size)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE page_texts (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
    db.execute("CREATE VIRTUAL TABLE texts USING fts5(title, body, content = 'page_texts', "
               "content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'"
               + (", prefix = '3'" if prefix else "") + ")")
    db.execute("BEGIN")
    db.executemany("INSERT INTO page_texts VALUES (?, ?, ?)", rows)
    db.execute("COMMIT")
    started = time.process_time()
    for low in range(0, len(rows), BATCH):
        db.execute("BEGIN")
        db.execute("INSERT INTO texts (rowid, title, body) SELECT id, title, body "
                   "FROM page_texts WHERE id > ? AND id <= ?", (low, low + BATCH))
        db.execute("COMMIT")
    took = time.process_time() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return took, path.stat().st_size


def search_ms(path: Path, query: str) -> float:
    """One search as ManifestText.search makes it (without the captures join)."""
    db = sqlite3.connect(path)
    try:
        started = time.perf_counter()
        row = db.execute("SELECT rowid FROM texts WHERE texts MATCH ? ORDER BY rowid DESC "
                         "LIMIT 1 OFFSET ?", (query, RANKED_AT_MOST - 1)).fetchone()
        cond, since = ("", ()) if row is None else (" AND texts.rowid >= ?", (row[0],))
        db.execute("SELECT texts.rowid, rank, highlight(texts, 0, '[', ']'), "
                   "snippet(texts, 1, '[', ']', '...', 24) FROM texts WHERE texts MATCH ? "
                   f"AND rank MATCH 'bm25(4.0, 1.0)'{cond} ORDER BY rank LIMIT 20",
                   (query, *since)).fetchall()
        return (time.perf_counter() - started) * 1000
    finally:
        db.close()


def _at(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _words(words: list[str], rng: random.Random, n: int) -> list[str]:
    return [w.lower() for w in rng.sample([w for w in rng.sample(words, 20 * n)
                                           if len(w) >= 3], n)]


def _phrases(words: list[str], rng: random.Random, n: int) -> list[str]:
    out = []
    while len(out) < n:
        at = rng.randrange(len(words) - 1)
        if len(words[at]) >= 3 and len(words[at + 1]) >= 3:
            out.append(f'"{words[at].lower()} {words[at + 1].lower()}"')
    return out


def _prefixes(words: list[str], rng: random.Random, n: int) -> list[str]:
    pool = [w.lower() for w in rng.sample(words, 20 * n) if len(w) >= 4]
    return [w[:3] + "*" for w in rng.sample(pool, n)]


QUERY_KINDS = {"word": _words, "phrase": _phrases, "prefix": _prefixes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="keep the databases here")
    parser.add_argument("--kinds", type=lambda v: v.split(","), default=["prefix"],
                        help="queries to ask: word, phrase, prefix (comma-separated)")
    parser.add_argument("--plain-only", action="store_true",
                        help="build the table without the prefix index only")
    args = parser.parse_args(argv)
    if unknown := set(args.kinds) - set(QUERY_KINDS):
        parser.error(f"--kinds: {', '.join(sorted(unknown))}: expected word, phrase or prefix")
    words = real_words()
    if len(words) < 10 * (TITLE_WORDS + BODY_WORDS):
        print(f"fts_prefix: too little text found under {SOURCES}", file=sys.stderr)
        return 1
    print(f"{len(words):,} words of real text, {len({w.lower() for w in words}):,} distinct")
    rng = random.Random(args.seed)
    rows = texts(words, args.texts, rng)
    print(f"{len(rows):,} texts, {sum(len(r[2]) for r in rows) // len(rows)} characters each")
    queries = {kind: QUERY_KINDS[kind](words, rng, args.queries) for kind in args.kinds}
    work = args.work or Path(tempfile.mkdtemp(prefix="fts-prefix-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print("| prefix index | indexing CPU s | size MB | queries | p50 ms | p95 ms | max ms |")
        print("|---|--:|--:|---|--:|--:|--:|")
        for prefix in (False,) if args.plain_only else (True, False):
            path = work / f"texts-{'prefix' if prefix else 'plain'}.sqlite3"
            path.unlink(missing_ok=True)
            cpu, size = build(path, rows, prefix)
            every: list[float] = []
            for kind, asked in queries.items():
                times = sorted(search_ms(path, q) for q in asked)
                every += times
                print(f"| {'3' if prefix else 'none'} | {cpu:.1f} | {size / 1e6:.0f} | {kind} | "
                      f"{_at(times, 0.5):.1f} | {_at(times, 0.95):.1f} | {times[-1]:.1f} |")
            if len(queries) > 1:
                every.sort()
                print(f"| {'3' if prefix else 'none'} | | | all | {_at(every, 0.5):.1f} | "
                      f"{_at(every, 0.95):.1f} | {every[-1]:.1f} |")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
