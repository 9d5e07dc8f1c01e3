"""Learned trap patterns in the manifest: each run's per-pattern figures and verdicts, and
the text fingerprint of each page stored. Written in a capture's own transaction (a
base of Manifest), so a run killed at any point resumes with exactly the figures of the
captures it has."""

from __future__ import annotations

from mirror.manifest.db import SqlDb
from mirror.web.patterns import Figures, matching, why

#: added to manifest.schema.SCHEMA (tables made with CREATE TABLE IF NOT EXISTS: an older
#: manifest gets them on opening, a reader sees them empty)
PATTERN_SCHEMA = """
-- Learned trap patterns (web/patterns.py): what each run saw of each URL pattern's pages
-- (2xx HTML with a text), and the rule that stopped it (NULL: fetched). samples: its first
-- URLs, one a line.
CREATE TABLE IF NOT EXISTS learned_patterns (
    run_id INTEGER NOT NULL,
    pattern TEXT NOT NULL,
    pages INTEGER NOT NULL,
    noindex INTEGER NOT NULL,
    duplicates INTEGER NOT NULL,
    links INTEGER NOT NULL,
    block_noindex INTEGER NOT NULL,
    block_duplicates INTEGER NOT NULL,
    samples TEXT NOT NULL,
    rule TEXT,
    PRIMARY KEY (run_id, pattern)
) WITHOUT ROWID;
-- The SimHash of the visible text of each URL's first page with a text (a signed 64-bit
-- integer; kept as it was, as the crawl's index of them keeps it): the pages a new page
-- may be a near-duplicate of.
CREATE TABLE IF NOT EXISTS fingerprints (
    url_id INTEGER PRIMARY KEY,
    simhash INTEGER NOT NULL
);
-- Each host's template: the CRC-32 of each line of the visible text of its first page
-- stored with lines of text (8 hex digits each, in order), left out of its other pages'
-- fingerprints.
CREATE TABLE IF NOT EXISTS learned_templates (
    host TEXT PRIMARY KEY,
    lines TEXT NOT NULL
) WITHOUT ROWID;
"""

_COLUMNS = "pattern, pages, noindex, duplicates, links, block_noindex, block_duplicates, " \
           "samples, rule"


def _figures(row: tuple[object, ...]) -> Figures:
    pages, noindex, duplicates, links, s_noindex, s_dup, samples = row
    return Figures(int(pages), int(noindex), int(duplicates), int(links),  # type: ignore[call-overload]
                   int(s_noindex), int(s_dup),  # type: ignore[call-overload]
                   tuple(str(samples).split("\n")) if samples else ())


class PatternReads:
    """A run's learned trap patterns and the pages' fingerprints, as read (the part of
    ManifestReader; the writer's part, Patterns, adds the writes)."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def read(self, run_id: int) -> dict[str, tuple[Figures, str | None]]:
        """Every pattern of a run: pattern -> (figures, rule or None), most pages first."""
        rows = self.sql.execute(f"SELECT {_COLUMNS} FROM learned_patterns WHERE run_id=? "
                                "ORDER BY pages DESC, pattern", (run_id,)).fetchall()
        return {str(r[0]): (_figures(tuple(r[1:8])), r[8]) for r in rows}

    def stopped(self, run_id: int) -> dict[str, tuple[Figures, str]]:
        """The patterns a run stopped: pattern -> (figures, rule)."""
        return {p: (f, rule) for p, (f, rule) in self.read(run_id).items() if rule}

    def fingerprints(self) -> list[tuple[int, int]]:
        """(url id, signed SimHash) of every URL with a page text."""
        return [(int(u), int(h)) for u, h in self.sql.execute(
            "SELECT url_id, simhash FROM fingerprints ORDER BY url_id").fetchall()]

    def templates(self) -> dict[str, frozenset[int]]:
        """host -> the line keys of its template."""
        return {str(host): frozenset(int(text[i:i + 8], 16) for i in range(0, len(text), 8))
                for host, text in self.sql.execute("SELECT host, lines FROM learned_templates")}

    def learned_report(self, run_id: int) -> list[dict[str, object]]:
        """The patterns a run stopped, for its report: each with its rule, why, figures, the
        URLs skipped under it and its first URLs."""
        stopped = self.stopped(run_id)
        if not stopped:
            return []
        skipped: dict[str, int] = {}
        for (url,) in self.sql.execute("SELECT url FROM urls WHERE run_id=? AND "
                                       "state='skipped' AND reason LIKE 'learned:%'",
                                       (run_id,)):
            pattern = matching(str(url), stopped)
            if pattern:
                skipped[pattern] = skipped.get(pattern, 0) + 1
        return [{"pattern": p, "rule": rule, "why": why(rule, f), "pages": f.pages,
                 "noindex": f.noindex, "duplicates": f.duplicates, "links": f.links,
                 "skipped": skipped.get(p, 0), "samples": list(f.samples)}
                for p, (f, rule) in stopped.items()]


class Patterns(PatternReads):
    """The writer's part: the writes join the open transaction (a capture's group), so call
    them inside Manifest.group()."""

    def save(self, run_id: int, pattern: str, figures: Figures, rule: str | None) -> None:
        f = figures
        self.sql.execute(
            f"INSERT INTO learned_patterns ({_COLUMNS}, run_id) VALUES (?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (run_id, pattern) DO UPDATE SET pages=excluded.pages, "
            "noindex=excluded.noindex, duplicates=excluded.duplicates, links=excluded.links, "
            "block_noindex=excluded.block_noindex, "
            "block_duplicates=excluded.block_duplicates, samples=excluded.samples, "
            "rule=excluded.rule",
            (pattern, f.pages, f.noindex, f.duplicates, f.links, f.block_noindex,
             f.block_duplicates, "\n".join(f.samples), rule, run_id))

    def save_fingerprint(self, url_id: int, signed: int) -> None:
        self.sql.execute("INSERT INTO fingerprints (url_id, simhash) VALUES (?, ?) "
                         "ON CONFLICT (url_id) DO NOTHING",
                         (url_id, signed))

    def save_template(self, host: str, lines: frozenset[int]) -> None:
        self.sql.execute("INSERT INTO learned_templates (host, lines) VALUES (?, ?) "
                         "ON CONFLICT (host) DO UPDATE SET lines=excluded.lines",
                         (host, "".join(f"{k:08x}" for k in sorted(lines))))
