"""Manifest: the crawl's writer of the SQLite manifest (runs, URL states, captures, links)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path

from mirror import crashpoints
from mirror.archive.manifest_queries import ManifestReader
from mirror.archive.manifest_schema import (
    FRONTIER_URLS,
    HELD_BY_OTHERS,
    URL_ITEM_COLUMNS,
    ManifestError,
    create_or_upgrade,
)
from mirror.model import (
    CaptureRow,
    NewUrl,
    Original,
    PageText,
    Previous,
    Run,
    UrlItem,
    UrlState,
)

__all__ = ["CaptureRow", "Manifest", "ManifestError", "ManifestWriteError", "NewUrl",
           "Original", "Previous", "Run", "UrlItem"]

#: URLs remembered as already in this run (see Manifest._add_urls): about 10 MB at most
KNOWN_URLS = 50_000
#: page texts added to the full-text index at a time: FTS5 costs about 2.5 times as much
#: per page when each page is its own transaction (a new segment, merged again and again)
TEXT_BATCH = 256

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


class ManifestWriteError(ManifestError):
    """A transaction could not be committed (disk full, I/O error); it was rolled back."""


class Manifest(ManifestReader):
    """Crawl state in one SQLite file (WAL), opened read-write: an older schema is upgraded
    on opening. Every method is one short transaction; the queries are ManifestReader's.
    The state machines of runs and URLs are in manifest_schema's docstring."""

    def __init__(self, path: Path, *, durable: bool = False) -> None:
        self.durable = durable
        self._known: dict[str, int] = {}  # url -> id, committed in run self._known_run
        self._staged: dict[str, int] = {}  # the same, from the open transaction
        self._known_run = 0
        self._unindexed = 0  # texts committed since the last index_texts (about)
        self._grouped = False  # a group() transaction is open: writes join it
        super().__init__(path)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self._open(self.path, partial(create_or_upgrade, durable=self.durable))

    def _tx(self) -> AbstractContextManager[None]:
        return nullcontext() if self._grouped else _Tx(self.db, self._settle)

    @contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for several writes (a group commit of captures): every
        commit_capture inside it joins it, and all of them are committed at its end, or
        none (ManifestWriteError). The search index is not updated inside a group: call
        index_texts_due after it."""
        assert not self._grouped, "groups do not nest"
        with _Tx(self.db, self._settle):
            self._grouped = True
            try:
                yield
            finally:
                self._grouped = False

    # -- runs ------------------------------------------------------------------------------
    def start_run(self, started_at: str, config_digest: str,
                  seeds: Sequence[NewUrl] = ()) -> int:
        """A new run and its start URLs, in one transaction: a run killed between the two
        would resume with nothing to fetch and end 'complete' with nothing stored."""
        with self._tx():
            cur = self.db.execute(
                "INSERT INTO runs (started_at, state, config_digest) VALUES (?, 'running', ?)",
                (started_at, config_digest),
            )
            assert cur.lastrowid is not None
            self._add_urls(cur.lastrowid, None, seeds)
        return cur.lastrowid

    def resume_run(self, run_id: int) -> int:
        """Leased URLs of an unfinished run go back to pending; returns how many. The texts
        a killed process had not indexed yet go into the search index first."""
        self.index_texts()
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

    def finish_run(self, run_id: int, finished_at: str, state: str, exit_code: int) -> None:
        self.index_texts()  # a finished run is searchable whole
        with self._tx():
            self.db.execute(
                "UPDATE runs SET finished_at=?, state=?, exit_code=? WHERE id=?",
                (finished_at, state, exit_code, run_id),
            )


    def abandon_run(self, run_id: int, finished_at: str) -> None:
        """An unfinished run left behind by `mirror run --new-run`."""
        with self._tx():
            self.db.execute(
                "UPDATE runs SET state='abandoned', finished_at=? WHERE id=?",
                (finished_at, run_id))
            self.db.execute("UPDATE urls SET state='pending' WHERE state='leased'")

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
                (f.url, f.site, run_id,
                 UrlState.SKIPPED if f.skip_reason else UrlState.PENDING, f.mode,
                 f.depth, f.redirects_left, referrer, f.via, f.skip_reason),
            ).fetchone()
            if row is None:  # already in the manifest: look at what it holds
                row = self.db.execute("SELECT id FROM urls WHERE url=? AND run_id=? "
                                      "AND state != 'skipped'", (f.url, run_id)).fetchone()
            elif f.skip_reason:
                row = None  # a later link may still upgrade it
            if row is not None:
                staged[f.url] = row[0]
        self.db.executemany(
            "INSERT INTO sitemap_lastmod (url_id, lastmod) VALUES (?, ?) "
            "ON CONFLICT(url_id) DO UPDATE SET lastmod=excluded.lastmod",
            [(url_id, f.lastmod) for f in found
             if f.lastmod and (url_id := known.get(f.url) or staged.get(f.url))])
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
        sql = f"SELECT {URL_ITEM_COLUMNS} FROM urls " \
              f"WHERE state='pending' AND next_try <= ? AND {FRONTIER_URLS}"
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

    def unlease(self, ids: Iterable[int]) -> None:
        with self._tx():
            self.db.executemany(
                "UPDATE urls SET state='pending' WHERE id=? AND state='leased'",
                [(i,) for i in ids],
            )

    # -- recovery --------------------------------------------------------------------------
    def rollback_past(self, run_id: int, filename: str, size: int) -> list[str]:
        """Forget captures that lie past the end of a file cut short (lost on power failure);
        their URLs go back to pending. Returns those URLs."""
        with self._tx():
            rows = self.db.execute(
                "SELECT id, url_id, url FROM captures WHERE filename=? "
                "AND MAX(offset + length, req_offset + req_length) > ?", (filename, size),
            ).fetchall()
            texts = [(t,) for (t,) in self.db.execute(
                "SELECT DISTINCT text_id FROM captures WHERE filename=? AND text_id IS NOT NULL "
                "AND MAX(offset + length, req_offset + req_length) > ?", (filename, size))]
            self.db.executemany("DELETE FROM captures WHERE id=?", [(r[0],) for r in rows])
            self._drop_texts(texts)
            self._relatest({r[1] for r in rows})
            self.db.executemany(
                "UPDATE urls SET state='pending', status=NULL WHERE id=? AND run_id=?",
                [(r[1], run_id) for r in rows],
            )
        return [r[2] for r in rows]

    # -- outcomes ------------------------------------------------------------------------
    def commit_capture(
        self,
        run_id: int,
        item: UrlItem,
        cap: CaptureRow,
        found: Sequence[NewUrl],
        *,
        failed_reason: str | None = None,
        note: str | None = None,
        text: PageText | None = None,
    ) -> None:
        """One transaction (or a part of a group's): the capture row, its page's text (a
        revisit shares its original's), the URL done (or failed), what it linked to, and a
        note on the page (why it may need a browser), if any."""
        with self._tx():
            text_id = self._text_id(cap.original_id, text)
            cur = self.db.execute(
                """INSERT INTO captures (url_id, run_id, url, warc_date, record_id, filename,
                     offset, length, req_offset, req_length, status, mime, payload_digest,
                     payload_length, etag, last_modified, location, truncated, record_type,
                     original_id, text_id)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (item.id, run_id, item.url, cap.warc_date, cap.record_id, cap.filename,
                 cap.offset, cap.length, cap.req_offset, cap.req_length, cap.status, cap.mime,
                 cap.payload_digest, cap.payload_length, cap.etag, cap.last_modified,
                 cap.location, cap.truncated, cap.record_type, cap.original_id, text_id),
            )
            if text_id is not None:
                self._latest_text(item.id, cur.lastrowid, text_id)
            self.db.execute(
                "UPDATE urls SET state=?, status=?, tries=tries+1, reason=? WHERE id=?",
                (UrlState.FAILED if failed_reason else UrlState.DONE, cap.status, failed_reason,
                 item.id),
            )
            if failed_reason:
                self._log_error(run_id, item.id, failed_reason)
            if note:
                self.db.execute("INSERT OR REPLACE INTO notes (run_id, url_id, note) "
                                "VALUES (?,?,?)", (run_id, item.id, note))
            self._add_urls(run_id, item.id, found)
            crashpoints.reached("commit:inside")
        if not self._grouped:
            self.index_texts_due()

    def index_texts_due(self) -> None:
        """index_texts, once TEXT_BATCH texts wait for it."""
        if self._unindexed >= TEXT_BATCH:
            self.index_texts()


    def _text_id(self, original_id: int | None, text: PageText | None) -> int | None:
        """The texts row of a capture: its original's for a revisit whose original has one
        (the same payload has the same text), else a new row for its text, if any."""
        if original_id is not None:
            row = self.db.execute("SELECT text_id FROM captures WHERE id=?",
                                  (original_id,)).fetchone()
            if row is not None and row[0] is not None:
                return int(row[0])
        if text is None:
            return None
        cur = self.db.execute("INSERT INTO page_texts (title, body) VALUES (?, ?)",
                              (text.title or "", text.body or ""))
        self._unindexed += 1
        return cur.lastrowid

    def _drop_texts(self, text_ids: Sequence[tuple[int]]) -> None:
        """Forget texts no capture has any more (out of the index too, if it has them)."""
        done = self._texts_indexed()
        for (text_id,) in text_ids:
            if self.db.execute("SELECT 1 FROM captures WHERE text_id=?",
                               (text_id,)).fetchone():
                continue
            if text_id <= done:
                self.db.execute("INSERT INTO texts (texts, rowid, title, body) "
                                "SELECT 'delete', id, title, body FROM page_texts WHERE id=?",
                                (text_id,))
            self.db.execute("DELETE FROM page_texts WHERE id=?", (text_id,))

    def index_texts(self) -> int:
        """Add the page texts the full-text index lacks, in one transaction; how many."""
        with self._tx():
            done = self._texts_indexed()
            top = self.db.execute("SELECT MAX(id) FROM page_texts").fetchone()[0] or 0
            if top > done:
                cur = self.db.execute(
                    "INSERT INTO texts (rowid, title, body) SELECT id, title, body "
                    "FROM page_texts WHERE id > ? ORDER BY id", (done,))
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('texts_indexed', ?)",
                                (str(top),))
                crashpoints.reached("texts:inside")
        self._unindexed = 0
        return max(cur.rowcount, 0) if top > done else 0

    def _latest_text(self, url_id: int, capture_id: int | None, text_id: int) -> None:
        self.db.execute(
            "INSERT INTO latest_texts (url_id, capture_id, text_id) VALUES (?, ?, ?) "
            "ON CONFLICT(url_id) DO UPDATE SET capture_id=excluded.capture_id, "
            "text_id=excluded.text_id WHERE excluded.capture_id > latest_texts.capture_id",
            (url_id, capture_id, text_id))

    def _relatest(self, url_ids: Iterable[int]) -> None:
        """latest_texts again for these URLs, from their captures."""
        for url_id in url_ids:
            self.db.execute("DELETE FROM latest_texts WHERE url_id=?", (url_id,))
            self.db.execute(
                "INSERT INTO latest_texts (url_id, capture_id, text_id) "
                "SELECT url_id, id, text_id FROM captures WHERE url_id=? AND text_id IS NOT "
                "NULL ORDER BY id DESC LIMIT 1", (url_id,))

    # -- the text index ------------------------------------------------------------------
    def clear_texts(self) -> None:
        """Forget every page text (before `mirror index --search` reads them again)."""
        with self._tx():
            self.db.execute("UPDATE captures SET text_id=NULL WHERE text_id IS NOT NULL")
            self.db.execute("DELETE FROM latest_texts")
            self.db.execute("INSERT INTO texts (texts) VALUES ('delete-all')")
            self.db.execute("DELETE FROM page_texts")
            self.db.execute("DELETE FROM meta WHERE key='texts_indexed'")

    def set_texts(self, texts: Sequence[tuple[int, PageText | None]]) -> None:
        """Give captures their text, in one transaction: (capture id, text) in capture
        order, so that a revisit finds its original's text (None: a revisit's own is
        its original's, if that has one)."""
        with self._tx():
            for capture_id, text in texts:
                row = self.db.execute("SELECT original_id, url_id FROM captures WHERE id=?",
                                      (capture_id,)).fetchone()
                if row is None:
                    continue
                text_id = self._text_id(row[0], text)
                if text_id is not None:
                    self.db.execute("UPDATE captures SET text_id=? WHERE id=?",
                                    (text_id, capture_id))
                    self._latest_text(row[1], capture_id, text_id)

    # -- prune (mirror.archive.prune) ------------------------------------------------------
    def set_prune_journal(self, journal: str | None) -> None:
        """Record a prune's journal (JSON) before it changes anything; None: it ended."""
        with self._tx():
            if journal is None:
                self.db.execute("DELETE FROM meta WHERE key='prune'")
            else:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('prune', ?)", (journal,))

    def drop_runs(self, runs: Sequence[int], moves: Iterable[Sequence[object]],
                  journal: str) -> None:
        """A prune's switch, in one transaction: the captures of `runs` go (with their
        texts, and the runs' rows, sessions, notes and errors), but those a capture of
        another run refers to; the captures of rewritten files move (`moves`: capture id,
        filename, offset, length, req_offset, req_length); the journal says it is done."""
        marks = ",".join("?" * len(runs))
        gone = f"run_id IN ({marks}) AND id NOT IN ({HELD_BY_OTHERS.format(marks)})"
        with self._tx():
            texts = self.db.execute(f"SELECT DISTINCT text_id FROM captures WHERE {gone} "
                                    "AND text_id IS NOT NULL", (*runs, *runs)).fetchall()
            self.db.execute(f"DELETE FROM captures WHERE {gone}", (*runs, *runs))
            self._drop_texts(texts)
            self._relatest([u for (u,) in self.db.execute(
                "SELECT url_id FROM latest_texts WHERE capture_id NOT IN "
                "(SELECT id FROM captures)").fetchall()])
            self.db.executemany(
                "UPDATE captures SET filename=?, offset=?, length=?, req_offset=?, "
                "req_length=? WHERE id=?", [(*m[1:], m[0]) for m in moves])
            self.db.execute(f"DELETE FROM runs WHERE id IN ({marks})", runs)
            for table in ("sessions", "notes", "errors"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", runs)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('prune', ?)", (journal,))
            crashpoints.reached("prune:switch-inside")

    def compact(self, share: float = 0.25) -> bool:
        """VACUUM when at least `share` of the file is free pages (what a large prune
        leaves; a run reuses them, so after a nightly prune of one run it is not worth
        rewriting the file), then empty the WAL. Atomic, like any transaction."""
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0]
        if free <= share * self.db.execute("PRAGMA page_count").fetchone()[0]:
            return False
        self.db.execute("VACUUM")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True

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
                f"SELECT {URL_ITEM_COLUMNS}, state, changes() FROM urls WHERE url=?",
                (url,)).fetchone()
        if row[8] != UrlState.LEASED or not row[9]:
            return None
        return UrlItem(*row[:8])

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


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error (autocommit connection)."""

    def __init__(self, db: sqlite3.Connection, settle: Callable[[bool], None]) -> None:
        self.db = db
        self.settle = settle  # told whether the transaction committed

    def __enter__(self) -> None:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:  # locked, read-only, I/O error: nothing was written
            raise ManifestWriteError(f"manifest write failed: {exc}") from exc

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
