"""SQLite manifest: runs, URLs and their state, captures, links. The only module that runs SQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from mirror import crashpoints
from mirror.model import CaptureRow, NewUrl, Original, Previous, Run, UrlItem

__all__ = ["CaptureRow", "Manifest", "ManifestError", "ManifestWriteError", "NewUrl",
           "Original", "Previous", "Run", "UrlItem"]

SCHEMA_VERSION = 2
#: URLs remembered as already in this run (see Manifest._add_urls): about 10 MB at most
KNOWN_URLS = 50_000

_UPSERT_URL = """INSERT INTO urls (url, site, run_id, state, mode, depth, redirects_left,
                                   referrer, via, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(url) DO UPDATE SET
      run_id=excluded.run_id, state=excluded.state, mode=excluded.mode,
      depth=excluded.depth, redirects_left=excluded.redirects_left,
      referrer=excluded.referrer, via=excluded.via, reason=excluded.reason,
      tries=0, next_try=0, status=NULL
    WHERE urls.run_id < excluded.run_id
       OR (urls.state='skipped' AND excluded.state='pending')
    RETURNING id"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    state TEXT NOT NULL,            -- running | complete | failed | limit | interrupted
    config_digest TEXT NOT NULL,
    exit_code INTEGER
);
-- Every canonical URL ever discovered. run_id is the run that last discovered it: a URL is
-- "seen" in the current run when run_id equals it, which is also how a later run re-visits it.
CREATE TABLE IF NOT EXISTS urls (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    site TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    state TEXT NOT NULL,            -- pending | leased | done | failed | skipped
    mode TEXT NOT NULL,             -- page (links followed) | requisite (only its requisites)
    depth INTEGER NOT NULL,
    redirects_left INTEGER NOT NULL,
    referrer INTEGER,
    via TEXT NOT NULL,              -- start | link | requisite | redirect
    tries INTEGER NOT NULL DEFAULT 0,
    next_try REAL NOT NULL DEFAULT 0,
    reason TEXT,                    -- skip rule or last error
    status INTEGER
);
CREATE INDEX IF NOT EXISTS urls_frontier ON urls (state, id);
CREATE INDEX IF NOT EXISTS urls_due ON urls (state, next_try);
CREATE TABLE IF NOT EXISTS captures (
    id INTEGER PRIMARY KEY,
    url_id INTEGER NOT NULL REFERENCES urls(id),
    run_id INTEGER NOT NULL,
    url TEXT NOT NULL,
    warc_date TEXT NOT NULL,
    record_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    req_offset INTEGER NOT NULL,
    req_length INTEGER NOT NULL,
    status INTEGER NOT NULL,
    mime TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    payload_length INTEGER NOT NULL,
    etag TEXT,
    last_modified TEXT,
    location TEXT,                  -- redirect target (canonical), if a 3xx
    truncated TEXT,
    record_type TEXT NOT NULL DEFAULT 'response',  -- response | revisit | not-modified
    original_id INTEGER             -- for revisits: the capture holding the payload
);
CREATE INDEX IF NOT EXISTS captures_url ON captures (url_id);
CREATE INDEX IF NOT EXISTS captures_run ON captures (run_id);
CREATE TABLE IF NOT EXISTS links (
    src INTEGER NOT NULL,
    dst INTEGER NOT NULL,
    kind TEXT NOT NULL,             -- link | requisite | redirect
    PRIMARY KEY (src, dst, kind)
) WITHOUT ROWID;
-- Each process that worked on a run: when it took the run up and when it was last seen
-- working (refreshed about once a second), so a run resumed after a kill has its real time.
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    started REAL NOT NULL,          -- Unix time
    alive REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS errors (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    error TEXT NOT NULL
);
"""

#: upgrades from each older schema version to the next, run in order
MIGRATIONS = {
    1: """
ALTER TABLE captures ADD COLUMN record_type TEXT NOT NULL DEFAULT 'response';
ALTER TABLE captures ADD COLUMN original_id INTEGER;
""",
}

#: created after the migrations, since they may name columns the migrations add
INDEXES = """
CREATE INDEX IF NOT EXISTS captures_digest ON captures (payload_digest)
    WHERE record_type = 'response' AND truncated IS NULL;
"""


class ManifestError(Exception):
    """The manifest cannot be used (damaged, or written by a newer mirror)."""


class ManifestWriteError(ManifestError):
    """A transaction could not be committed (disk full, I/O error); it was rolled back."""


#: URLs the frontier hands out: not robots.txt, which only the robots gate fetches (a
#: robots.txt row left pending by a crash waits for the gate, not for a worker)
_FRONTIER = "via != 'robots'"

_ORIGINAL = ("o.id, o.url, o.warc_date, o.record_id, o.payload_digest, o.filename, o.offset, "
             "o.mime, o.status, o.run_id")


class Manifest:
    """Crawl state in one SQLite file (WAL). Every method is one short transaction."""

    def __init__(self, path: Path, *, durable: bool = False, readonly: bool = False) -> None:
        self.path = path
        self._known: dict[str, int] = {}  # url -> id, committed in run self._known_run
        self._staged: dict[str, int] = {}  # the same, from the open transaction
        self._known_run = 0
        if readonly:  # `mirror status` beside a running crawl: WAL lets it read, never write
            if not path.exists():
                raise ManifestError(f"{path}: no manifest (has `mirror run` run yet?)")
            try:
                self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
                row = self.db.execute(
                    "SELECT value FROM meta WHERE key='schema_version'").fetchone()
            except sqlite3.DatabaseError as exc:
                raise ManifestError(f"{path}: not a usable manifest: {exc}") from exc
            if row is not None and int(row[0]) < SCHEMA_VERSION:  # upgrade once, then read
                self.db.close()
                Manifest(path).close()
                self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(SCHEMA)
            self._check_version()
        except sqlite3.DatabaseError as exc:
            raise ManifestError(f"{path}: not a usable manifest: {exc}") from exc

    def close(self) -> None:
        self.db.close()

    def _check_version(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else SCHEMA_VERSION  # a new file has the current schema
        if version > SCHEMA_VERSION:
            raise ManifestError(
                f"{self.path}: written by a newer mirror (schema {version} > {SCHEMA_VERSION})"
            )
        with self._tx():
            for old in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[old].strip().split(";\n"):
                    self.db.execute(statement.rstrip(";"))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                            (str(SCHEMA_VERSION),))
        self.db.executescript(INDEXES)

    def quick_check(self) -> str:
        """'ok', or SQLite's description of the damage (run after an unclean stop)."""
        try:
            rows = self.db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return "; ".join(" ".join(str(r[0]).split()) for r in rows[:5])

    def _tx(self) -> _Tx:
        return _Tx(self.db, self._settle)

    # -- runs --------------------------------------------------------------------------
    def last_run(self) -> Run | None:
        row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return Run(*row) if row else None

    def runs(self) -> list[Run]:
        return [Run(*r) for r in self.db.execute("SELECT * FROM runs ORDER BY id")]

    def start_run(self, started_at: str, config_digest: str) -> int:
        with self._tx():
            cur = self.db.execute(
                "INSERT INTO runs (started_at, state, config_digest) VALUES (?, 'running', ?)",
                (started_at, config_digest),
            )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def resume_run(self, run_id: int) -> int:
        """Leased URLs of an unfinished run go back to pending; returns how many."""
        with self._tx():
            self.db.execute(
                "UPDATE runs SET state='running', finished_at=NULL WHERE id=?", (run_id,)
            )
            cur = self.db.execute("UPDATE urls SET state='pending' WHERE state='leased'")
        return cur.rowcount

    def begin_session(self, run_id: int, now: float) -> int:
        """This process works on `run_id` from `now` on; returns the session's id."""
        with self._tx():
            cur = self.db.execute("INSERT INTO sessions (run_id, started, alive) "
                                  "VALUES (?, ?, ?)", (run_id, now, now))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def touch_session(self, session_id: int, now: float) -> None:
        with self._tx():
            self.db.execute("UPDATE sessions SET alive=? WHERE id=?", (now, session_id))

    def run_time(self, run_id: int) -> tuple[float, int]:
        """(seconds the run's processes worked on it, how many processes there were)."""
        seconds, n = self.db.execute(
            "SELECT COALESCE(SUM(alive - started), 0), COUNT(*) FROM sessions WHERE run_id=?",
            (run_id,)).fetchone()
        return float(seconds), int(n)

    def finish_run(self, run_id: int, finished_at: str, state: str, exit_code: int) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE runs SET finished_at=?, state=?, exit_code=? WHERE id=?",
                (finished_at, state, exit_code, run_id),
            )

    # -- discovery -----------------------------------------------------------------------
    def add_urls(
        self, run_id: int, referrer: int | None, found: Sequence[NewUrl]
    ) -> None:
        """Insert URLs not yet seen in this run (the seen-check), and the links to them."""
        with self._tx():
            self._add_urls(run_id, referrer, found)

    def _add_urls(self, run_id: int, referrer: int | None, found: Sequence[NewUrl]) -> None:
        # Insert, or re-discover a URL known from an earlier run; a URL that was only
        # skipped so far is upgraded when it is now allowed (an off-site <a> then <img>).
        # Most links of a page were seen on other pages: a URL this run already holds in a
        # state no insert can change is in self._known, and needs only its link row.
        if run_id != self._known_run:
            self._known.clear()
            self._known_run = run_id
        known, staged = self._known, self._staged
        for f in found:
            if f.url in known or f.url in staged:
                continue
            row = self.db.execute(
                _UPSERT_URL,
                (f.url, f.site, run_id, "skipped" if f.skip_reason else "pending", f.mode,
                 f.depth, f.redirects_left, referrer, f.via, f.skip_reason),
            ).fetchone()
            if row is None:  # already in the manifest: look at what it holds
                row = self.db.execute("SELECT id FROM urls WHERE url=? AND run_id=? "
                                      "AND state != 'skipped'", (f.url, run_id)).fetchone()
            elif f.skip_reason:
                row = None  # a later link may still upgrade it
            if row is not None:
                staged[f.url] = row[0]
        if referrer is not None:
            ids = [(referrer, known.get(f.url) or staged.get(f.url), f.kind, f.url)
                   for f in found]
            self.db.executemany("INSERT OR IGNORE INTO links (src, dst, kind) VALUES (?,?,?)",
                                [(src, dst, kind) for src, dst, kind, _ in ids if dst])
            self.db.executemany(
                """INSERT OR IGNORE INTO links (src, dst, kind)
                   SELECT ?, id, ? FROM urls WHERE url=?""",
                [(src, kind, url) for src, dst, kind, url in ids if not dst],
            )

    def _settle(self, committed: bool) -> None:
        """After a transaction: what it staged becomes known, or is forgotten."""
        if committed:
            self._known.update(self._staged)
            while len(self._known) > KNOWN_URLS:
                del self._known[next(iter(self._known))]  # the oldest first
        self._staged.clear()

    # -- frontier ------------------------------------------------------------------------
    def lease(
        self, limit: int, now: float, exclude_sites: Iterable[str] = (), pages: bool = True
    ) -> list[UrlItem]:
        """Mark up to `limit` pending URLs that are due as leased and return them, oldest first."""
        excluded = list(exclude_sites)
        sql = "SELECT id, url, site, depth, redirects_left, mode, tries, via FROM urls " \
              f"WHERE state='pending' AND next_try <= ? AND {_FRONTIER}"
        params: list[object] = [now]
        if excluded:
            sql += f" AND site NOT IN ({','.join('?' * len(excluded))})"
            params += excluded
        if not pages:
            sql += " AND mode='requisite'"
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        with self._tx():
            rows = self.db.execute(sql, params).fetchall()
            self.db.executemany(
                "UPDATE urls SET state='leased' WHERE id=?", [(r[0],) for r in rows]
            )
        return [UrlItem(*r) for r in rows]

    def next_due(self, pages: bool = True) -> float | None:
        """Earliest next_try of a pending URL, or None when nothing is pending."""
        sql = f"SELECT MIN(next_try) FROM urls WHERE state='pending' AND {_FRONTIER}"
        if not pages:
            sql += " AND mode='requisite'"
        row = self.db.execute(sql).fetchone()
        return row[0]

    def count_pending(self, pages_only: bool = False) -> int:
        sql = "SELECT COUNT(*) FROM urls WHERE state IN ('pending', 'leased')"
        if pages_only:
            sql += " AND mode='page'"
        return int(self.db.execute(sql).fetchone()[0])

    def unlease(self, ids: Iterable[int]) -> None:
        with self._tx():
            self.db.executemany(
                "UPDATE urls SET state='pending' WHERE id=? AND state='leased'",
                [(i,) for i in ids],
            )

    # -- recovery --------------------------------------------------------------------------
    def committed_ends(self) -> dict[str, int]:
        """For each WARC file: the offset just past the last record the manifest knows."""
        return dict(self.db.execute(
            "SELECT filename, MAX(MAX(offset + length, req_offset + req_length)) "
            "FROM captures GROUP BY filename"
        ).fetchall())

    def rollback_past(self, run_id: int, filename: str, size: int) -> list[str]:
        """Forget captures that lie past the end of a file cut short (lost on power failure);
        their URLs go back to pending. Returns those URLs."""
        with self._tx():
            rows = self.db.execute(
                "SELECT id, url_id, url FROM captures WHERE filename=? "
                "AND MAX(offset + length, req_offset + req_length) > ?", (filename, size),
            ).fetchall()
            self.db.executemany("DELETE FROM captures WHERE id=?", [(r[0],) for r in rows])
            self.db.executemany(
                "UPDATE urls SET state='pending', status=NULL WHERE id=? AND run_id=?",
                [(r[1], run_id) for r in rows],
            )
        return [r[2] for r in rows]

    def item_for(self, run_id: int, url: str) -> UrlItem | None:
        """The URL as a work item if this run still has to fetch it (pending or leased)."""
        row = self.db.execute(
            "SELECT id, url, site, depth, redirects_left, mode, tries, via FROM urls "
            "WHERE url=? AND run_id=? AND state IN ('pending', 'leased')", (url, run_id),
        ).fetchone()
        return UrlItem(*row) if row else None

    # -- outcomes ------------------------------------------------------------------------
    def commit_capture(
        self,
        run_id: int,
        item: UrlItem,
        cap: CaptureRow,
        found: Sequence[NewUrl],
        *,
        failed_reason: str | None = None,
    ) -> None:
        """One transaction: the capture row, the URL done (or failed), and what it linked to."""
        with self._tx():
            self.db.execute(
                """INSERT INTO captures (url_id, run_id, url, warc_date, record_id, filename,
                     offset, length, req_offset, req_length, status, mime, payload_digest,
                     payload_length, etag, last_modified, location, truncated, record_type,
                     original_id)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (item.id, run_id, item.url, cap.warc_date, cap.record_id, cap.filename,
                 cap.offset, cap.length, cap.req_offset, cap.req_length, cap.status, cap.mime,
                 cap.payload_digest, cap.payload_length, cap.etag, cap.last_modified,
                 cap.location, cap.truncated, cap.record_type, cap.original_id),
            )
            self.db.execute(
                "UPDATE urls SET state=?, status=?, tries=tries+1, reason=? WHERE id=?",
                ("failed" if failed_reason else "done", cap.status, failed_reason, item.id),
            )
            if failed_reason:
                self._log_error(run_id, item.id, failed_reason)
            self._add_urls(run_id, item.id, found)
            crashpoints.reached("commit:inside")

    # -- history (incremental runs) ----------------------------------------------------
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

    def run_contents(self, run_id: int) -> dict[str, tuple[int, str]]:
        """url -> (status, payload digest) of every capture in a run."""
        rows = self.db.execute(
            "SELECT url, status, payload_digest FROM captures WHERE run_id=?", (run_id,))
        return {u: (s, d) for u, s, d in rows}

    def abandon_run(self, run_id: int, finished_at: str) -> None:
        """An unfinished run left behind by `mirror run --new-run`."""
        with self._tx():
            self.db.execute(
                "UPDATE runs SET state='abandoned', finished_at=? WHERE id=?",
                (finished_at, run_id))
            self.db.execute("UPDATE urls SET state='pending' WHERE state='leased'")

    # -- politeness ------------------------------------------------------------------------
    def skip(self, run_id: int, item: UrlItem, rule: str) -> None:
        """A leased URL that must not be fetched after all (robots.txt, a host budget)."""
        self._known.pop(item.url, None)  # skipped: a later link may upgrade it again
        with self._tx():
            self.db.execute("UPDATE urls SET state='skipped', reason=? WHERE id=?",
                            (rule, item.id))

    def ensure_url(self, run_id: int, url: str, site: str, via: str) -> UrlItem | None:
        """Lease `url` for an out-of-band fetch (robots.txt), adding it if unknown; None
        when this run already has it done (or another worker holds it)."""
        with self._tx():
            self.db.execute(
                """INSERT INTO urls (url, site, run_id, state, mode, depth, redirects_left, via)
                   VALUES (?, ?, ?, 'leased', 'requisite', 0, 0, ?)
                   ON CONFLICT(url) DO UPDATE SET run_id=excluded.run_id, state='leased',
                     tries=0, next_try=0, status=NULL
                   WHERE urls.run_id < excluded.run_id OR urls.state IN ('pending', 'skipped')""",
                (url, site, run_id, via))
            row = self.db.execute(
                "SELECT id, url, site, depth, redirects_left, mode, tries, via, state, changes() "
                "FROM urls WHERE url=?", (url,)).fetchone()
        if row[8] != "leased" or not row[9]:
            return None
        return UrlItem(*row[:8])

    def capture_in_run(self, run_id: int | None, url: str) -> Original | None:
        """The latest capture of `url` in a run (None: in any run), with its payload's record."""
        row = self.db.execute(
            f"SELECT {_ORIGINAL} FROM captures c JOIN captures o "
            "ON o.id = COALESCE(c.original_id, c.id) WHERE c.url=? "
            "AND (c.run_id=? OR ? IS NULL) ORDER BY c.id DESC LIMIT 1",
            (url, run_id, run_id)).fetchone()
        return Original(*row) if row else None

    def host_usage(self, run_id: int) -> dict[str, tuple[int, int]]:
        """site -> (URLs fetched, body bytes) in this run, for the per-host budgets."""
        rows = self.db.execute(
            "SELECT u.site, COUNT(*), COALESCE(SUM(c.payload_length), 0) FROM captures c "
            "JOIN urls u ON u.id = c.url_id WHERE c.run_id=? GROUP BY u.site", (run_id,))
        return {s: (n, b) for s, n, b in rows}

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

    def retry_later(self, run_id: int, item: UrlItem, error: str, next_try: float) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE urls SET state='pending', tries=tries+1, next_try=?, reason=? "
                "WHERE id=?",
                (next_try, error, item.id),
            )
            self._log_error(run_id, item.id, error)

    def give_up(self, run_id: int, item: UrlItem, error: str) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE urls SET state='failed', tries=tries+1, reason=? WHERE id=?",
                (error, item.id),
            )
            self._log_error(run_id, item.id, error)

    def _log_error(self, run_id: int, url_id: int, error: str) -> None:
        self.db.execute("INSERT INTO errors VALUES (?, ?, ?)", (run_id, url_id, error))

    # -- queries for reports and the index -----------------------------------------------
    def captures(self, run_id: int | None = None) -> Iterator[sqlite3.Row]:
        cur = self.db.cursor()
        cur.row_factory = sqlite3.Row
        if run_id is None:
            yield from cur.execute("SELECT * FROM captures ORDER BY id")
        else:
            yield from cur.execute("SELECT * FROM captures WHERE run_id=? ORDER BY id", (run_id,))

    def count_captures(self, run_id: int) -> int:
        return int(
            self.db.execute("SELECT COUNT(*) FROM captures WHERE run_id=?", (run_id,)).fetchone()[0]
        )

    def count_done_pages(self, run_id: int) -> int:
        return int(self.db.execute(
            "SELECT COUNT(*) FROM urls WHERE run_id=? AND mode='page' "
            "AND state IN ('done', 'failed', 'leased')", (run_id,)
        ).fetchone()[0])

    def run_totals(self) -> dict[int, tuple[int, int]]:
        """run id -> (captures, payload bytes)."""
        rows = self.db.execute(
            "SELECT run_id, COUNT(*), COALESCE(SUM(payload_length), 0) FROM captures "
            "GROUP BY run_id"
        )
        return {r: (n, b) for r, n, b in rows}

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
        """(target URL, status or None, a page linking to it) for 4xx/5xx/failed targets."""
        return self.db.execute(
            """SELECT d.url, d.status, MIN(s.url) FROM urls d
                 JOIN links l ON l.dst = d.id JOIN urls s ON s.id = l.src
               WHERE d.run_id=? AND (d.state='failed' OR d.status >= 400)
               GROUP BY d.id ORDER BY d.url LIMIT ?""",
            (run_id, limit),
        ).fetchall()

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


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error (autocommit connection)."""

    def __init__(self, db: sqlite3.Connection, settle: Callable[[bool], None]) -> None:
        self.db = db
        self.settle = settle  # told whether the transaction committed

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: BaseException | None, _tb: object) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        except sqlite3.Error as end_exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self.settle(False)
            raise ManifestWriteError(f"manifest write failed: {end_exc}") from end_exc
        self.settle(not exc_type)
        if isinstance(exc, sqlite3.Error):
            raise ManifestWriteError(f"manifest write failed: {exc}") from exc
