"""ManifestReader: the manifest opened read-only, with every query that changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mirror.archive.manifest_schema import (
    FRONTIER_URLS,
    HELD_BY_OTHERS,
    URL_ITEM_COLUMNS,
    ManifestError,
    read_as_current,
)
from mirror.archive.manifest_text import TextQueries
from mirror.model import Original, Previous, Run, UrlItem

__all__ = ["ManifestError", "ManifestReader", "Original", "Previous", "PruneTargets", "Run"]

#: the columns of an Original, from the capture `o` that holds the payload
_ORIGINAL = ("o.id, o.url, o.warc_date, o.record_id, o.payload_digest, o.filename, o.offset, "
             "o.mime, o.status, o.run_id")


@dataclass(frozen=True)
class PruneTargets:
    """What dropping some runs takes from the manifest (ManifestReader.prune_targets)."""

    captures: int  # captures that go
    held: int  # captures of those runs that stay: a kept revisit's payload is in them
    #: each file holding a record that goes -> (id, offset, length, req_offset,
    #: req_length) of each capture in it that stays (none: the file goes)
    files: dict[str, list[tuple[int, int, int, int, int]]]
    revisits_without_original: int  # kept revisits whose original is unknown: unsafe


class ManifestReader(TextQueries):
    """The manifest, read-only: for `mirror status`, `runs`, `diff`, `explain`, `verify`,
    the replay server and run reports, also beside a running crawl (WAL lets it read). It
    never writes to the file, not even to upgrade it. The writer, Manifest, extends it.

    An older schema version is read as if it were upgraded: the connection gets temporary
    views with the values the migration would write (manifest_schema.READ_AS_CURRENT), and
    empty temporary tables for tables the file lacks; the file is left as it is. A read must
    not change what it reads (verify checks an archive, and may be pointed at a backup or
    read-only media), and there is no upgrade
    command but `mirror run`, which crawls: refusing would make an old archive unreadable
    until it is crawled again. A newer schema version is refused with ManifestError: its
    meaning is unknown to this code, so reading it could only guess."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise ManifestError(f"{self.path}: no manifest (has `mirror run` run yet?)")
        return self._open(f"{self.path.resolve().as_uri()}?mode=ro", read_as_current)

    def _open(self, target: str | Path,
              setup: Callable[[sqlite3.Connection, Path], object]) -> sqlite3.Connection:
        """Connect (autocommit; a str is a URI) and set up; ManifestError when either fails."""
        db = None
        try:
            db = sqlite3.connect(target, uri=isinstance(target, str), isolation_level=None)
            setup(db, self.path)
        except (sqlite3.DatabaseError, ManifestError) as exc:
            if db is not None:
                db.close()
            if isinstance(exc, ManifestError):
                raise
            raise ManifestError(f"{self.path}: not a usable manifest: {exc}") from exc
        return db

    def close(self) -> None:
        self.db.close()

    def quick_check(self) -> str:
        """'ok', or SQLite's description of the damage (run after an unclean stop)."""
        try:
            rows = self.db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return "; ".join(" ".join(str(r[0]).split()) for r in rows[:5])

    # -- runs ------------------------------------------------------------------------------
    def last_run(self) -> Run | None:
        row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return Run(*row) if row else None

    def runs(self) -> list[Run]:
        return [Run(*r) for r in self.db.execute("SELECT * FROM runs ORDER BY id")]

    def run_time(self, run_id: int) -> tuple[float, int]:
        """(seconds the run's processes worked on it, how many processes there were)."""
        seconds, n = self.db.execute(
            "SELECT COALESCE(SUM(alive - started), 0), COUNT(*) FROM sessions WHERE run_id=?",
            (run_id,)).fetchone()
        return float(seconds), int(n)

    def run_contents(self, run_id: int) -> dict[str, tuple[int, str]]:
        """url -> (status, payload digest) of every capture in a run."""
        rows = self.db.execute(
            "SELECT url, status, payload_digest FROM captures WHERE run_id=?", (run_id,))
        return {u: (s, d) for u, s, d in rows}

    def run_totals(self) -> dict[int, tuple[int, int]]:
        """run id -> (captures, payload bytes)."""
        rows = self.db.execute(
            "SELECT run_id, COUNT(*), COALESCE(SUM(payload_length), 0) FROM captures "
            "GROUP BY run_id"
        )
        return {r: (n, b) for r, n, b in rows}

    # -- the frontier and recovery --------------------------------------------------------
    def next_due(self, pages: bool = True) -> float | None:
        """Earliest next_try of a pending URL, or None when nothing is pending."""
        sql = f"SELECT MIN(next_try) FROM urls WHERE state='pending' AND {FRONTIER_URLS}"
        if not pages:
            sql += " AND mode='requisite'"
        due = self.db.execute(sql).fetchone()[0]
        return None if due is None else float(due)

    def count_pending(self, pages_only: bool = False) -> int:
        sql = "SELECT COUNT(*) FROM urls WHERE state IN ('pending', 'leased')"
        if pages_only:
            sql += " AND mode='page'"
        return int(self.db.execute(sql).fetchone()[0])

    def item_for(self, run_id: int, url: str) -> UrlItem | None:
        """The URL as a work item if this run still has to fetch it (pending or leased)."""
        row = self.db.execute(
            f"SELECT {URL_ITEM_COLUMNS} FROM urls "
            "WHERE url=? AND run_id=? AND state IN ('pending', 'leased')", (url, run_id),
        ).fetchone()
        return UrlItem(*row) if row else None

    def committed_ends(self) -> dict[str, int]:
        """For each WARC file: the offset just past the last record the manifest knows."""
        return dict(self.db.execute(
            "SELECT filename, MAX(MAX(offset + length, req_offset + req_length)) "
            "FROM captures GROUP BY filename"
        ).fetchall())

    # -- captures --------------------------------------------------------------------------
    def captures(self, run_id: int | None = None) -> Iterator[sqlite3.Row]:
        cur = self.db.cursor()
        cur.row_factory = sqlite3.Row
        if run_id is None:
            yield from cur.execute("SELECT * FROM captures ORDER BY id")
        else:
            yield from cur.execute("SELECT * FROM captures WHERE run_id=? ORDER BY id", (run_id,))

    def capture_in_run(self, run_id: int | None, url: str) -> Original | None:
        """The latest capture of `url` in a run (None: in any run), with its payload's record."""
        row = self.db.execute(
            f"SELECT {_ORIGINAL} FROM captures c JOIN captures o "
            "ON o.id = COALESCE(c.original_id, c.id) WHERE c.url=? "
            "AND (c.run_id=? OR ? IS NULL) ORDER BY c.id DESC LIMIT 1",
            (url, run_id, run_id)).fetchone()
        return Original(*row) if row else None

    def original_by_digest(self, digest: str, status: int) -> Original | None:
        """The first complete response record with this payload digest and status, in any
        run (a revisit never stands for an answer of another status)."""
        row = self.db.execute(
            f"SELECT {_ORIGINAL} FROM captures o WHERE o.payload_digest=? "
            "AND o.record_type='response' AND o.truncated IS NULL AND o.status=? "
            "ORDER BY o.id LIMIT 1",
            (digest, status),
        ).fetchone()
        return Original(*row) if row else None

    def original_by_record(self, record_id: str, digest: str) -> Original | None:
        """The capture whose record a revisit refers to (WARC-Refers-To), found through the
        payload digest they share."""
        row = self.db.execute(
            f"SELECT {_ORIGINAL} FROM captures o WHERE o.payload_digest=? "
            "AND o.record_type='response' AND o.truncated IS NULL AND o.record_id=?",
            (digest, record_id),
        ).fetchone()
        return Original(*row) if row else None

    def has_captures_before(self, run_id: int) -> bool:
        """Whether an earlier run stored anything (else no URL has a previous capture)."""
        return self.db.execute("SELECT 1 FROM captures WHERE run_id<? LIMIT 1",
                               (run_id,)).fetchone() is not None

    def previous_capture(self, url_id: int, run_id: int) -> Previous | None:
        """The URL's latest capture from an earlier run, with the record holding its payload.
        A not-modified capture stands for the capture it confirmed: it has that one's status
        (else the run after it would not revalidate, and would fetch the page whole)."""
        row = self.db.execute(
            f"""SELECT CASE c.record_type WHEN 'not-modified' THEN o.status ELSE c.status END,
                       c.etag, c.last_modified, c.truncated, {_ORIGINAL}
                FROM captures c JOIN captures o ON o.id = COALESCE(c.original_id, c.id)
                WHERE c.url_id=? AND c.run_id<? ORDER BY c.id DESC LIMIT 1""",
            (url_id, run_id),
        ).fetchone()
        if row is None:
            return None
        return Previous(row[0], row[1], row[2], row[3], Original(*row[4:]))

    # -- prune (mirror.archive.prune) ------------------------------------------------------
    def prune_journal(self) -> str | None:
        """The journal of a prune that has not ended (JSON), or None."""
        row = self.db.execute("SELECT value FROM meta WHERE key='prune'").fetchone()
        return None if row is None else str(row[0])

    def prune_targets(self, runs: Sequence[int]) -> PruneTargets:
        """What dropping `runs` takes away: their captures, but those a capture of another
        run refers to (its original_id: the response that holds a revisit's payload)."""
        marks = ",".join("?" * len(runs))
        held = HELD_BY_OTHERS.format(marks)
        gone = f"run_id IN ({marks}) AND id NOT IN ({held})"
        count = self.db.execute(f"SELECT COUNT(*) FROM captures WHERE {gone}",
                                (*runs, *runs)).fetchone()[0]
        kept = self.db.execute(f"SELECT COUNT(*) FROM captures WHERE run_id IN ({marks}) "
                               f"AND id IN ({held})", (*runs, *runs)).fetchone()[0]
        files: dict[str, list[tuple[int, int, int, int, int]]] = {
            name: [] for (name,) in self.db.execute(
                f"SELECT DISTINCT filename FROM captures WHERE {gone}", (*runs, *runs))}
        if files:
            names = ",".join("?" * len(files))
            for name, cid, offset, length, req_offset, req_length in self.db.execute(
                    f"SELECT filename, id, offset, length, req_offset, req_length FROM captures "
                    f"WHERE filename IN ({names}) AND (run_id NOT IN ({marks}) OR id IN "
                    f"({held})) ORDER BY id", (*files, *runs, *runs)):
                files[name].append((cid, offset, length, req_offset, req_length))
        orphans = self.db.execute(
            f"SELECT COUNT(*) FROM captures WHERE run_id NOT IN ({marks}) "
            "AND record_type != 'response' AND original_id IS NULL", runs).fetchone()[0]
        return PruneTargets(int(count), int(kept), files, int(orphans))

    # -- a run's numbers, for reports and status ---------------------------------------------
    def count_captures(self, run_id: int) -> int:
        return int(
            self.db.execute("SELECT COUNT(*) FROM captures WHERE run_id=?", (run_id,)).fetchone()[0]
        )

    def count_done_pages(self, run_id: int) -> int:
        return int(self.db.execute(
            "SELECT COUNT(*) FROM urls WHERE run_id=? AND mode='page' "
            "AND state IN ('done', 'failed', 'leased')", (run_id,)
        ).fetchone()[0])

    def host_usage(self, run_id: int) -> dict[str, tuple[int, int]]:
        """site -> (URLs fetched, body bytes) in this run, for the per-host budgets."""
        rows = self.db.execute(
            "SELECT u.site, COUNT(*), COALESCE(SUM(c.payload_length), 0) FROM captures c "
            "JOIN urls u ON u.id = c.url_id WHERE c.run_id=? GROUP BY u.site", (run_id,))
        return {s: (n, b) for s, n, b in rows}

    def url_states(self, run_id: int) -> dict[str, int]:
        rows = self.db.execute(
            "SELECT state, COUNT(*) FROM urls WHERE run_id=? GROUP BY state", (run_id,)
        )
        return {s: n for s, n in rows}

    def skip_counts(self, run_id: int) -> dict[str, int]:
        rows = self.db.execute(
            "SELECT reason, COUNT(*) FROM urls WHERE run_id=? AND state='skipped' "
            "GROUP BY reason ORDER BY 2 DESC", (run_id,)
        )
        return {r: n for r, n in rows}

    def skipped_urls(self, run_id: int, per_rule: int = 1000) -> dict[str, list[str]]:
        """The skipped URLs of a run by rule (at most `per_rule` of each), for the report."""
        out: dict[str, list[str]] = {}
        for url, rule in self.db.execute(
                "SELECT url, reason FROM urls WHERE run_id=? AND state='skipped' "
                "ORDER BY reason, id", (run_id,)):
            urls = out.setdefault(rule, [])
            if len(urls) < per_rule:
                urls.append(url)
        return out

    def failed(self, run_id: int) -> list[tuple[str, str]]:
        return self.db.execute(
            "SELECT url, COALESCE(reason, 'HTTP ' || status) FROM urls "
            "WHERE run_id=? AND state='failed' ORDER BY url", (run_id,)
        ).fetchall()

    def last_error(self, run_id: int) -> str | None:
        row = self.db.execute(
            "SELECT u.url || ': ' || e.error FROM errors e JOIN urls u ON u.id = e.url_id "
            "WHERE e.run_id=? ORDER BY e.rowid DESC LIMIT 1", (run_id,),
        ).fetchone()
        return row[0] if row else None

    def error_counts(self, run_id: int, limit: int = 10) -> list[tuple[str, int]]:
        return self.db.execute(
            "SELECT error, COUNT(*) FROM errors WHERE run_id=? GROUP BY error "
            "ORDER BY 2 DESC, 1 LIMIT ?", (run_id, limit)
        ).fetchall()

    def broken_links(self, run_id: int, limit: int = 50) -> list[tuple[str, int | None, str]]:
        """(target URL, status or None, a page linking to it) for 4xx/5xx/failed targets.
        A robots.txt is no page: the /sitemap.xml guessed for it may well be missing."""
        return self.db.execute(
            """SELECT d.url, d.status, MIN(s.url) FROM urls d
                 JOIN links l ON l.dst = d.id JOIN urls s ON s.id = l.src
               WHERE d.run_id=? AND (d.state='failed' OR d.status >= 400)
                 AND s.via != 'robots'
               GROUP BY d.id ORDER BY d.url LIMIT ?""",
            (run_id, limit),
        ).fetchall()

    def count_broken_links(self, run_id: int) -> int:
        """How many targets broken_links would list without its limit."""
        return int(self.db.execute(
            """SELECT COUNT(DISTINCT d.id) FROM urls d JOIN links l ON l.dst = d.id
                 JOIN urls s ON s.id = l.src
               WHERE d.run_id=? AND (d.state='failed' OR d.status >= 400)
                 AND s.via != 'robots'""",
            (run_id,)).fetchone()[0])

    def needs_browser(self, run_id: int) -> list[tuple[str, str]]:
        """(url, why) of the pages of a run that may need a browser to archive."""
        return self.db.execute(
            "SELECT u.url, n.note FROM notes n JOIN urls u ON u.id = n.url_id "
            "WHERE n.run_id=? ORDER BY u.url", (run_id,)).fetchall()

    def unreachable_hosts(self, run_id: int, prefix: str) -> list[tuple[str, str, int]]:
        """(host, reason, URLs) of the hosts whose URLs failed with a reason starting with
        `prefix` ("host unreachable: "), by host."""
        rows = self.db.execute(
            "SELECT site, reason, COUNT(*) FROM urls WHERE run_id=? AND state='failed' "
            "AND substr(reason, 1, ?) = ? GROUP BY site, reason ORDER BY site",
            (run_id, len(prefix), prefix))
        return [(site, reason[len(prefix):], n) for site, reason, n in rows]

    def count_sitemap_only_pages(self, run_id: int) -> int:
        """Pages of the run fetched because a sitemap lists them, that no page, start URL,
        redirect or robots.txt of the run leads to: every link to them is from a sitemap
        (a URL via 'sitemap' fetched as a requisite; the pages a sitemap lists are via
        'sitemap' too, but pages). Links from URLs of earlier runs only do not count."""
        return int(self.db.execute(
            """SELECT COUNT(*) FROM (
                 SELECT l.dst FROM links l JOIN urls s ON s.id = l.src WHERE s.run_id = ?
                 GROUP BY l.dst HAVING MIN(s.via = 'sitemap' AND s.mode = 'requisite') = 1
               ) AS only JOIN urls d ON d.id = only.dst
               WHERE d.run_id = ? AND d.mode = 'page' AND d.state = 'done'
                 AND d.via != 'start'""", (run_id, run_id)).fetchone()[0])

    def count_pages(self) -> int:
        """URLs with an HTML capture in any run: the pages the archive can show."""
        return int(self.db.execute(
            "SELECT COUNT(DISTINCT url_id) FROM captures "
            "WHERE mime IN ('text/html', 'application/xhtml+xml')").fetchone()[0])

    def capture_stats(self, run_id: int) -> dict[str, object]:
        status = dict(self.db.execute(
            "SELECT CASE status WHEN 304 THEN 'not modified' ELSE (status / 100) || 'xx' END, "
            "COUNT(*) FROM captures WHERE run_id=? GROUP BY 1",
            (run_id,),
        ).fetchall())
        mimes = dict(self.db.execute(
            "SELECT mime, COUNT(*) FROM captures WHERE run_id=? GROUP BY mime "
            "ORDER BY 2 DESC LIMIT 10", (run_id,),
        ).fetchall())
        row = self.db.execute(
            "SELECT COALESCE(SUM(payload_length), 0), COALESCE(SUM(length + req_length), 0) "
            "FROM captures WHERE run_id=?", (run_id,),
        ).fetchone()
        return {"status": status, "mime": mimes, "payload_bytes": row[0], "warc_bytes": row[1]}
