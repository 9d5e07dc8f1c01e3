"""ManifestReader: the manifest opened read-only, with every query that changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from mirror.archive.workerfolder import no_manifest
from mirror.manifest.audit import Audit
from mirror.manifest.db import PostgresDb, Row, SqlDb, SqliteDb, is_database_url
from mirror.manifest.patterns import PatternReads
from mirror.manifest.pruning import PruneReads
from mirror.manifest.robots import Robots
from mirror.manifest.schema import (
    FRONTIER_URLS,
    URL_ITEM_COLUMNS,
    ManifestError,
    check_postgres,
    read_as_current,
)
from mirror.manifest.texts import TextReads
from mirror.model import SITEMAP_BUDGET, FileRow, HostRow, Original, Previous, Run, UrlItem, Worker

__all__ = ["ManifestError", "ManifestReader", "Original", "Previous", "Run",
           "open_reader"]

#: the columns of an Original, from the capture `o` that holds the payload
_ORIGINAL = ("o.id, o.url, o.warc_date, o.record_id, o.payload_digest, o.filename, "
             'o."offset", o.mime, o.status, o.run_id')
#: the end of a capture's records in its file (the later of response and request)
END = ('CASE WHEN "offset" + length > req_offset + req_length THEN "offset" + length '
       "ELSE req_offset + req_length END")
#: the columns of runs, in the order of model.Run's fields
_RUN = "id, started_at, finished_at, state, config_digest, exit_code"
#: rows of a table read at a time where PostgreSQL would send them all at once
_PAGE = 5000


def open_reader(target: Path | str) -> ManifestReader:
    """The manifest `target` names, read-only: a file path (SQLite), or postgresql://...
    (PostgreSQL; needs `mirror[fleet]`)."""
    return ManifestReader(target)


class ManifestReader:
    """The manifest, read-only: for `mirror status`, `runs`, `diff`, `explain`, `verify`,
    the replay server and run reports, also beside a running crawl (WAL lets it read). It
    never writes to the file, not even to upgrade it, and has no writing method. The
    writer, Manifest, extends it. Runs, URLs and captures are queried here; the rest is in
    its parts: texts (full-text search), robots, patterns, prune, audit (verify's).

    An older schema version is read as if it were upgraded: the connection gets temporary
    views with the values the migration would write (manifest.schema.READ_AS_CURRENT), and
    empty temporary tables for tables the file lacks; the file is left as it is. A read must
    not change what it reads (verify checks an archive, and may be pointed at a backup or
    read-only media), and there is no upgrade
    command but `mirror run`, which crawls: refusing would make an old archive unreadable
    until it is crawled again. A newer schema version is refused with ManifestError: its
    meaning is unknown to this code, so reading it could only guess."""

    def __init__(self, path: Path | str) -> None:
        #: a file (SQLite), or a database URL, postgresql://... (PostgreSQL)
        self.path: Path | str = path if is_database_url(path) else Path(path)
        self.sql: SqlDb = self._connect()
        #: the driver's own connection (sqlite3's, or psycopg's): every query of the
        #: manifest goes through `sql`, which speaks both dialects; outside the manifest's
        #: package neither is used (tests/test_quality.py), only the parts below
        self.db: Any = self.sql.raw
        self.patterns = PatternReads(self.sql)
        self.audit = Audit(self.sql)
        self.robots = Robots(self.sql)
        self.texts = TextReads(self.sql)
        self.prune = PruneReads(self.sql)

    @property
    def name(self) -> str:
        """The manifest for messages: its file, or its database without the password."""
        return self.sql.name

    def _connect(self) -> SqlDb:
        if isinstance(self.path, str):
            db = PostgresDb(self.path, read_only=True)
            try:
                check_postgres(db)
            except BaseException:
                db.close()
                raise
            return db
        if not self.path.exists():
            raise ManifestError(no_manifest(self.path))
        return self._open(f"{self.path.resolve().as_uri()}?mode=ro", read_as_current)

    def _open(self, target: str | Path,
              setup: Callable[[sqlite3.Connection, Path], object]) -> SqlDb:
        """Connect (autocommit; a str is a URI) and set up; ManifestError when either fails."""
        assert isinstance(self.path, Path)
        db = None
        try:
            db = sqlite3.connect(target, uri=isinstance(target, str), isolation_level=None)
            setup(db, self.path)
        except (sqlite3.DatabaseError, ManifestError) as exc:
            if db is not None:
                db.close()
            if isinstance(exc, ManifestError):
                raise
            if isinstance(exc, sqlite3.DatabaseError) and "malformed" in str(exc):
                raise ManifestError(
                    f"{self.path}: damaged ({exc}); refusing to use it. Move the archive "
                    "folder aside, or restore manifest.sqlite3 from a backup and run again."
                ) from exc
            raise ManifestError(f"{self.path}: not a usable manifest: {exc}") from exc
        return SqliteDb(db, str(self.path))

    def close(self) -> None:
        self.sql.close()

    def quick_check(self) -> str:
        """'ok', or SQLite's description of the damage (run after an unclean stop). A
        PostgreSQL server recovers from a crash by itself: 'ok'."""
        if self.sql.dialect != "sqlite":
            return "ok"
        try:
            rows = self.sql.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return "; ".join(" ".join(str(r[0]).split()) for r in rows[:5])

    # -- runs ------------------------------------------------------------------------------
    def last_run(self) -> Run | None:
        row = self.sql.execute(f"SELECT {_RUN} FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return Run(*row) if row else None

    def runs(self) -> list[Run]:
        return [Run(*r) for r in self.sql.execute(f"SELECT {_RUN} FROM runs ORDER BY id")]

    def run_time(self, run_id: int) -> tuple[float, int]:
        """(seconds some process worked on the run, how many processes there were): the
        sessions of a resumed run follow each other, those of a run shared by several
        workers overlap, so their union is counted, not their sum."""
        spans = self.sql.execute("SELECT started, alive FROM sessions WHERE run_id=? "
                                 "ORDER BY started", (run_id,)).fetchall()
        return union_length((float(a), float(b)) for a, b in spans), len(spans)

    def run_contents(self, run_id: int) -> dict[str, tuple[int, str]]:
        """url -> (status, payload digest) of every capture in a run."""
        rows = self.sql.execute(
            "SELECT url, status, payload_digest FROM captures WHERE run_id=?", (run_id,))
        return {u: (s, d) for u, s, d in rows}

    def queued_urls(self, run_id: int) -> list[str]:
        """The URLs the run still has to fetch (pending or leased; robots.txt aside)."""
        rows = self.sql.execute(
            f"SELECT url FROM urls WHERE run_id=? AND state IN ('pending', 'leased') "
            f"AND {FRONTIER_URLS}", (run_id,))
        return [u for (u,) in rows]

    def run_totals(self) -> dict[int, tuple[int, int]]:
        """run id -> (captures, payload bytes)."""
        rows = self.sql.execute(
            "SELECT run_id, COUNT(*), COALESCE(SUM(payload_length), 0) FROM captures "
            "GROUP BY run_id"
        )
        return {r: (n, int(b)) for r, n, b in rows}  # int: PostgreSQL's SUM is numeric

    # -- the frontier and recovery --------------------------------------------------------
    def next_due(self, pages: bool = True) -> float | None:
        """Earliest next_try of a pending URL, or None when nothing is pending."""
        sql = f"SELECT MIN(next_try) FROM urls WHERE state='pending' AND {FRONTIER_URLS}"
        if not pages:
            sql += " AND mode='requisite'"
        due = self.sql.execute(sql).fetchone()[0]
        return None if due is None else float(due)

    def count_pending(self, pages_only: bool = False) -> int:
        sql = "SELECT COUNT(*) FROM urls WHERE state IN ('pending', 'leased')"
        if pages_only:
            sql += " AND mode='page'"
        return int(self.sql.execute(sql).fetchone()[0])

    def item_for(self, run_id: int, url: str) -> UrlItem | None:
        """The URL as a work item if this run still has to fetch it (pending or leased)."""
        row = self.sql.execute(
            f"SELECT {URL_ITEM_COLUMNS} FROM urls "
            "WHERE url=? AND run_id=? AND state IN ('pending', 'leased')", (url, run_id),
        ).fetchone()
        return UrlItem(*row) if row else None

    def committed_ends(self) -> dict[str, int]:
        """For each WARC file: the offset just past the last record the manifest knows."""
        return {name: int(end) for name, end in self.sql.execute(
            f"SELECT filename, MAX({END}) FROM captures GROUP BY filename").fetchall()}

    # -- captures --------------------------------------------------------------------------
    def captures(self, run_id: int | None = None) -> Iterator[Row]:
        """Every capture row (of one run), by id: rows read by column name."""
        where, params = ("", ()) if run_id is None else ("run_id=? AND ", (run_id,))
        if self.sql.dialect == "sqlite":  # one cursor, read as it goes
            cur = self.db.cursor()
            cur.row_factory = sqlite3.Row
            yield from cur.execute(f"SELECT * FROM captures {'WHERE run_id=? ' if where else ''}"
                                   "ORDER BY id", params)
            return
        last = 0  # a page at a time: PostgreSQL sends a query's rows all at once
        while True:
            cur = self.sql.execute(f"SELECT * FROM captures WHERE {where}id > ? ORDER BY id "
                                   f"LIMIT {_PAGE}", (*params, last))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            yield from rows
            if len(rows) < _PAGE:
                return
            last = rows[-1]["id"]

    def capture_in_run(self, run_id: int | None, url: str) -> Original | None:
        """The latest capture of `url` in a run (None: in any run), with its payload's record."""
        in_run = "" if run_id is None else "AND c.run_id=? "
        row = self.sql.execute(
            f"SELECT {_ORIGINAL} FROM captures c JOIN captures o "
            f"ON o.id = COALESCE(c.original_id, c.id) WHERE c.url=? {in_run}"
            "ORDER BY c.id DESC LIMIT 1",
            (url,) if run_id is None else (url, run_id)).fetchone()
        return Original(*row) if row else None

    def original_by_digest(self, digest: str, status: int) -> Original | None:
        """The first complete response record with this payload digest and status, in any
        run (a revisit never stands for an answer of another status)."""
        row = self.sql.execute(
            f"SELECT {_ORIGINAL} FROM captures o WHERE o.payload_digest=? "
            "AND o.record_type='response' AND o.truncated IS NULL AND o.status=? "
            "ORDER BY o.id LIMIT 1",
            (digest, status),
        ).fetchone()
        return Original(*row) if row else None

    def original_by_record(self, record_id: str, digest: str) -> Original | None:
        """The capture whose record a revisit refers to (WARC-Refers-To), found through the
        payload digest they share."""
        row = self.sql.execute(
            f"SELECT {_ORIGINAL} FROM captures o WHERE o.payload_digest=? "
            "AND o.record_type='response' AND o.truncated IS NULL AND o.record_id=?",
            (digest, record_id),
        ).fetchone()
        return Original(*row) if row else None

    def has_captures_before(self, run_id: int) -> bool:
        """Whether an earlier run stored anything (else no URL has a previous capture)."""
        return self.sql.execute("SELECT 1 FROM captures WHERE run_id<? LIMIT 1",
                                (run_id,)).fetchone() is not None

    def previous_capture(self, url_id: int, run_id: int) -> Previous | None:
        """The URL's latest capture from an earlier run, with the record holding its payload.
        A not-modified capture stands for the capture it confirmed: it has that one's status
        (else the run after it would not revalidate, and would fetch the page whole)."""
        row = self.sql.execute(
            f"""SELECT CASE c.record_type WHEN 'not-modified' THEN o.status ELSE c.status END,
                       c.etag, c.last_modified, c.truncated, {_ORIGINAL}
                FROM captures c JOIN captures o ON o.id = COALESCE(c.original_id, c.id)
                WHERE c.url_id=? AND c.run_id<? ORDER BY c.id DESC LIMIT 1""",
            (url_id, run_id),
        ).fetchone()
        if row is None:
            return None
        return Previous(row[0], row[1], row[2], row[3], Original(*row[4:]))

    # -- a run's numbers, for reports and status ---------------------------------------------
    def count_captures(self, run_id: int) -> int:
        return int(self.sql.execute("SELECT COUNT(*) FROM captures WHERE run_id=?",
                                    (run_id,)).fetchone()[0])

    def count_done_pages(self, run_id: int) -> int:
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM urls WHERE run_id=? AND mode='page' "
            "AND state IN ('done', 'failed', 'leased')", (run_id,)
        ).fetchone()[0])

    def count_pages_stored(self, run_id: int) -> int:
        """Pages of the run with a 2xx or 304 answer (revisits too): what a person can read."""
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM captures c JOIN urls u ON u.id = c.url_id "
            "WHERE c.run_id=? AND u.mode='page' AND u.via != 'robots' "
            "AND (c.status BETWEEN 200 AND 299 OR c.status = 304)", (run_id,)
        ).fetchone()[0])

    def start_urls(self, run_id: int) -> list[tuple[str, str, int | None, str | None]]:
        """(url, state, status, reason) of the run's start URLs."""
        return [(u, s, st, r) for u, s, st, r in self.sql.execute(
            "SELECT url, state, status, reason FROM urls WHERE run_id=? AND via='start' "
            "ORDER BY id", (run_id,))]

    def host_usage(self, run_id: int) -> dict[str, tuple[int, int]]:
        """site -> (URLs fetched, body bytes) in this run, for the per-host budgets."""
        rows = self.sql.execute(
            "SELECT u.site, COUNT(*), COALESCE(SUM(c.payload_length), 0) FROM captures c "
            "JOIN urls u ON u.id = c.url_id WHERE c.run_id=? GROUP BY u.site", (run_id,))
        return {s: (n, int(b)) for s, n, b in rows}

    def url_states(self, run_id: int) -> dict[str, int]:
        rows = self.sql.execute(
            "SELECT state, COUNT(*) FROM urls WHERE run_id=? GROUP BY state", (run_id,)
        )
        return {s: n for s, n in rows}

    def skip_counts(self, run_id: int) -> dict[str, int]:
        """URLs not fetched, by rule: the skipped ones, and those listed by sitemaps past the
        run's sitemap URL budget (never stored: counted in sitemap_reads)."""
        rows = self.sql.execute(
            "SELECT reason, COUNT(*) FROM urls WHERE run_id=? AND state='skipped' "
            "GROUP BY reason ORDER BY 2 DESC", (run_id,)
        )
        counts = {r: n for r, n in rows}
        (beyond,) = self.sql.execute("SELECT COALESCE(SUM(beyond), 0) FROM sitemap_reads "
                                     "WHERE run_id=?", (run_id,)).fetchone()
        if beyond:
            counts[SITEMAP_BUDGET] = counts.get(SITEMAP_BUDGET, 0) + int(beyond)
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def requisite_chain(self, url_id: int, limit: int) -> int:
        """How many requisites in a row lead down to this URL from the page they serve
        (itself included), counted up to `limit`: each URL's referrer is the one that first
        found it."""
        n = 0
        row = self.sql.execute("SELECT referrer, mode, via FROM urls WHERE id=?",
                               (url_id,)).fetchone()
        while row is not None and row[1] == "requisite" and row[2] in ("requisite",
                                                                      "redirect") and n < limit:
            n += 1
            if row[0] is None:
                break
            row = self.sql.execute("SELECT referrer, mode, via FROM urls WHERE id=?",
                                   (row[0],)).fetchone()
        return n

    def skipped_urls(self, run_id: int, per_rule: int = 1000) -> dict[str, list[str]]:
        """The skipped URLs of a run by rule (at most `per_rule` of each), for the report."""
        out: dict[str, list[str]] = {}
        for url, rule in self.sql.execute(
                "SELECT url, reason FROM urls WHERE run_id=? AND state='skipped' "
                "ORDER BY reason, id", (run_id,)):
            urls = out.setdefault(rule, [])
            if len(urls) < per_rule:
                urls.append(url)
        return out

    def failed(self, run_id: int) -> list[tuple[str, str]]:
        return self.sql.execute(
            "SELECT url, COALESCE(reason, 'HTTP ' || status) FROM urls "
            "WHERE run_id=? AND state='failed' ORDER BY url", (run_id,)
        ).fetchall()

    def last_error(self, run_id: int) -> str | None:
        row = self.sql.execute(
            "SELECT u.url || ': ' || e.error FROM errors e JOIN urls u ON u.id = e.url_id "
            "WHERE e.run_id=? ORDER BY e.rowid DESC LIMIT 1", (run_id,),
        ).fetchone()
        return row[0] if row else None

    def error_counts(self, run_id: int, limit: int = 10) -> list[tuple[str, int]]:
        return self.sql.execute(
            "SELECT error, COUNT(*) FROM errors WHERE run_id=? GROUP BY error "
            "ORDER BY 2 DESC, 1 LIMIT ?", (run_id, limit)
        ).fetchall()

    def broken_links(self, run_id: int, limit: int = 50) -> list[tuple[str, int | None, str]]:
        """(target URL, status or None, a page linking to it) for 4xx/5xx/failed targets.
        A robots.txt is no page: the /sitemap.xml guessed for it may well be missing."""
        return self.sql.execute(
            """SELECT d.url, d.status, MIN(s.url) FROM urls d
                 JOIN links l ON l.dst = d.id JOIN urls s ON s.id = l.src
               WHERE d.run_id=? AND (d.state='failed' OR d.status >= 400)
                 AND s.via != 'robots'
               GROUP BY d.id ORDER BY d.url LIMIT ?""",
            (run_id, limit),
        ).fetchall()

    def count_broken_links(self, run_id: int) -> int:
        """How many targets broken_links would list without its limit."""
        return int(self.sql.execute(
            """SELECT COUNT(DISTINCT d.id) FROM urls d JOIN links l ON l.dst = d.id
                 JOIN urls s ON s.id = l.src
               WHERE d.run_id=? AND (d.state='failed' OR d.status >= 400)
                 AND s.via != 'robots'""",
            (run_id,)).fetchone()[0])

    def needs_browser(self, run_id: int) -> list[tuple[str, str]]:
        """(url, note) of the pages of a run with a note: why one may need a browser to
        archive, or why its links were partly or not read (`parse-budget: ...`)."""
        return self.sql.execute(
            "SELECT u.url, n.note FROM notes n JOIN urls u ON u.id = n.url_id "
            "WHERE n.run_id=? ORDER BY u.url", (run_id,)).fetchall()

    def unreachable_hosts(self, run_id: int, prefix: str) -> list[tuple[str, str, int]]:
        """(host, reason, URLs) of the hosts whose URLs failed with a reason starting with
        `prefix` ("host unreachable: "), by host."""
        rows = self.sql.execute(
            "SELECT site, reason, COUNT(*) FROM urls WHERE run_id=? AND state='failed' "
            "AND substr(reason, 1, ?) = ? GROUP BY site, reason ORDER BY site",
            (run_id, len(prefix), prefix))
        return [(site, reason[len(prefix):], n) for site, reason, n in rows]

    def count_sitemap_only_pages(self, run_id: int) -> int:
        """Pages of the run fetched because a sitemap lists them, that no page, start URL,
        redirect or robots.txt of the run leads to: every link to them is from a sitemap
        (a URL via 'sitemap' fetched as a requisite; the pages a sitemap lists are via
        'sitemap' too, but pages). Links from URLs of earlier runs only do not count."""
        return int(self.sql.execute(
            """SELECT COUNT(*) FROM (
                 SELECT l.dst FROM links l JOIN urls s ON s.id = l.src WHERE s.run_id = ?
                 GROUP BY l.dst HAVING MIN(CASE WHEN s.via = 'sitemap'
                                           AND s.mode = 'requisite' THEN 1 ELSE 0 END) = 1
               ) AS linked JOIN urls d ON d.id = linked.dst
               WHERE d.run_id = ? AND d.mode = 'page' AND d.state = 'done'
                 AND d.via != 'start'""", (run_id, run_id)).fetchone()[0])

    def count_pages(self) -> int:
        """URLs with an HTML capture in any run: the pages the archive can show."""
        return int(self.sql.execute(
            "SELECT COUNT(DISTINCT url_id) FROM captures "
            "WHERE mime IN ('text/html', 'application/xhtml+xml')").fetchone()[0])

    def capture_stats(self, run_id: int) -> dict[str, object]:
        status = dict(self.sql.execute(
            "SELECT CASE status WHEN 304 THEN 'not modified' ELSE (status / 100) || 'xx' END, "
            "COUNT(*) FROM captures WHERE run_id=? GROUP BY 1",
            (run_id,),
        ).fetchall())
        mimes = dict(self.sql.execute(
            "SELECT mime, COUNT(*) FROM captures WHERE run_id=? GROUP BY mime "
            "ORDER BY 2 DESC LIMIT 10", (run_id,),
        ).fetchall())
        row = self.sql.execute(
            "SELECT COALESCE(SUM(payload_length), 0), COALESCE(SUM(length + req_length), 0) "
            "FROM captures WHERE run_id=?", (run_id,),
        ).fetchone()
        return {"status": status, "mime": mimes, "payload_bytes": int(row[0]),
                "warc_bytes": int(row[1])}

    # -- a crawl shared by several workers (the state machines: manifest.schema) ----------
    def workers(self) -> list[Worker]:
        """Every worker that registered, with how long ago (database time) it was alive."""
        now = self.sql.now_ms
        return [Worker(*r) for r in self.sql.execute(
            f"SELECT id, run_id, started, alive, {now} - alive FROM workers ORDER BY id")]

    def lost_workers(self, after: float) -> list[str]:
        """The workers whose last heartbeat is more than `after` seconds old."""
        return [w for (w,) in self.sql.execute(
            f"SELECT id FROM workers WHERE alive < {self.sql.now_ms} - ? ORDER BY id",
            (int(after * 1000),))]

    def hosts(self) -> list[HostRow]:
        """Every host slot: its politeness times and its lease, if it has one."""
        return [HostRow(*r) for r in self.sql.execute(
            "SELECT id, site, slot, next_fetch_at, block_until, lease_owner, lease_epoch, "
            "lease_until FROM hosts ORDER BY site, slot")]

    def files(self, worker: str | None = None) -> list[FileRow]:
        """The WARC files workers wrote (one worker's), by name."""
        mine = "" if worker is None else "WHERE worker=? "
        return [FileRow(*r) for r in self.sql.execute(
            f"SELECT name, worker, state, size, sha256 FROM files {mine}ORDER BY name",
            () if worker is None else (worker,))]


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """The length of the union of intervals (start, end), given in order of start."""
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total
