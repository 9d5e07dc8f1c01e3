"""The captures in the manifest (table captures, with notes and page_robots): the reader's
part `captures` (CaptureReads), and the writer's (Captures), which commits a fetched URL's
capture and forgets the captures a cut-short file lost."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mirror import crashpoints
from mirror.manifest.db import Row, SqlDb, Tx
from mirror.manifest.renders import RenderRow, insert_render
from mirror.manifest.sharedrun import retried
from mirror.manifest.urls import TO_PENDING, Urls
from mirror.model import (
    CaptureRow,
    HostLease,
    NewUrl,
    Original,
    PageText,
    Previous,
    UrlItem,
    UrlState,
)

if TYPE_CHECKING:
    from mirror.manifest.texts import Texts

#: the columns of an Original, from the capture `o` that holds the payload
_ORIGINAL = ("o.id, o.url, o.warc_date, o.record_id, o.payload_digest, o.filename, "
             'o."offset", o.mime, o.status, o.run_id')
#: the end of a capture's records in its file (the later of response and request)
END = ('CASE WHEN "offset" + length > req_offset + req_length THEN "offset" + length '
       "ELSE req_offset + req_length END")
#: rows of a table read at a time where PostgreSQL would send them all at once
_PAGE = 5000

_INSERT_CAPTURE = """INSERT INTO captures (url_id, run_id, url, warc_date, record_id, filename,
      "offset", length, req_offset, req_length, status, mime, payload_digest, payload_length,
      etag, last_modified, location, truncated, record_type, original_id, text_id)
    VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


class CaptureReads:
    """The captures, read-only: every row, a URL's latest, the original a revisit stands
    for, where each WARC file's committed records end."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def all(self, run_id: int | None = None) -> Iterator[Row]:
        """Every capture row (of one run), by id: rows read by column name."""
        where, params = ("", ()) if run_id is None else ("run_id=? AND ", (run_id,))
        if self.sql.dialect == "sqlite":  # one cursor, read as it goes
            cur = self.sql.raw.cursor()
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

    def committed_ends(self) -> dict[str, int]:
        """For each WARC file: the offset just past the last record the manifest knows."""
        return {name: int(end) for name, end in self.sql.execute(
            f"SELECT filename, MAX({END}) FROM captures GROUP BY filename").fetchall()}

    def in_run(self, run_id: int | None, url: str) -> Original | None:
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

    def any_before(self, run_id: int) -> bool:
        """Whether an earlier run stored anything (else no URL has a previous capture)."""
        return self.sql.execute("SELECT 1 FROM captures WHERE run_id<? LIMIT 1",
                                (run_id,)).fetchone() is not None

    def previous(self, url_id: int, run_id: int) -> Previous | None:
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


class Captures(CaptureReads):
    """The writer's part for captures: each method is one transaction (or a part of the
    writer's open group, `tx`)."""

    def __init__(self, sql: SqlDb, tx: Tx, texts: Texts, urls: Urls) -> None:
        super().__init__(sql)
        self.tx = tx
        self._texts = texts  # the writer's: a capture's page text
        self._urls = urls  # the writer's: the URL's row, what it links to

    @retried
    def commit(
        self,
        run_id: int,
        item: UrlItem,
        cap: CaptureRow,
        found: Sequence[NewUrl],
        *,
        failed_reason: str | None = None,
        note: str | None = None,
        text: PageText | None = None,
        lease: HostLease | None = None,
        robots: str | None = None,
        render: RenderRow | None = None,
    ) -> bool:
        """One transaction (or a part of a group's): the URL done (or failed), the capture
        row, its page's text (a revisit shares its original's, unless it was rendered: a
        browser's text is the capture's own), what it linked to, a
        note on the page (why it may need a browser), its rendered DOM's place (`render`,
        a page loaded in a browser), and its robots directives
        ("noindex,nofollow": Discovered.robots), if any. With `lease` (a worker of a
        shared run), only while the URL is still leased under it: else nothing is
        written and it returns False (the worker cuts its WARC file back to before the
        record: another worker has the URL, or will fetch it again)."""
        with self.tx():
            state = UrlState.FAILED if failed_reason else UrlState.DONE
            if not self._urls.end_lease(item.id, lease,
                                        "state=?, status=?, tries=tries+1, reason=?",
                                        (state, cap.status, failed_reason)):
                return False
            text_id = self._texts.text_id(None if render else cap.original_id, text)
            want_id = text_id is not None or render is not None
            cur = self.sql.execute(  # its id is needed only for latest_texts and renders
                f"{_INSERT_CAPTURE} RETURNING id" if want_id else _INSERT_CAPTURE,
                (item.id, run_id, item.url, cap.warc_date, cap.record_id, cap.filename,
                 cap.offset, cap.length, cap.req_offset, cap.req_length, cap.status, cap.mime,
                 cap.payload_digest, cap.payload_length, cap.etag, cap.last_modified,
                 cap.location, cap.truncated, cap.record_type, cap.original_id, text_id),
            )
            capture_id = int(cur.fetchone()[0]) if want_id else 0  # 0: not asked for
            if text_id is not None:
                self._texts.latest(item.id, capture_id, text_id)
            if render is not None:
                insert_render(self.sql, capture_id, render)
            if failed_reason:
                self._urls.log_error(run_id, item.id, failed_reason)
            if note:
                self.sql.execute("INSERT INTO notes (run_id, url_id, note) VALUES (?,?,?) "
                                 "ON CONFLICT(run_id, url_id) DO UPDATE SET note=excluded.note",
                                 (run_id, item.id, note))
            if robots:
                self._page_robots(run_id, item.id, robots)
            self._urls.insert(run_id, item.id, found)
            crashpoints.reached("commit:inside")
        if not self.tx.grouped:
            self._texts.index_due()
        return True

    def _page_robots(self, run_id: int, url_id: int, robots: str) -> None:
        words = robots.split(",")
        self.sql.execute(
            "INSERT INTO page_robots (run_id, url_id, noindex, nofollow) VALUES (?,?,?,?) "
            "ON CONFLICT(run_id, url_id) DO UPDATE SET noindex=excluded.noindex, "
            "nofollow=excluded.nofollow",
            (run_id, url_id, int("noindex" in words), int("nofollow" in words)))

    def rollback_past(self, run_id: int, filename: str, size: int) -> list[str]:
        """Forget captures that lie past the end of a file cut short (lost on power failure);
        their URLs go back to pending. Returns those URLs."""
        with self.tx():
            urls = self.forget(run_id, f"filename=? AND {END} > ?", (filename, size))
        return urls

    def forget(self, run_id: int, where: str, params: Sequence[object]) -> list[str]:
        """Delete the captures `where` names (and their texts no other capture has); their
        URLs of run `run_id` go back to pending. Returns those URLs. In the caller's
        transaction (rollback_past's, filemarks.mark_lost's)."""
        rows = self.sql.execute(f"SELECT id, url_id, url FROM captures WHERE {where}",
                                params).fetchall()
        texts = [(t,) for (t,) in self.sql.execute(
            f"SELECT DISTINCT text_id FROM captures WHERE {where} AND text_id IS NOT NULL",
            params)]
        self.sql.executemany("DELETE FROM captures WHERE id=?", [(r[0],) for r in rows])
        self.sql.executemany("DELETE FROM renders WHERE capture_id=?", [(r[0],) for r in rows])
        self._texts.drop(texts)
        self._texts.relatest({r[1] for r in rows})
        self._texts.sync_latest(build=False)
        self.sql.executemany(
            f"UPDATE urls SET {TO_PENDING}, status=NULL WHERE id=? AND run_id=?",
            [(r[1], run_id) for r in rows],
        )
        return [r[2] for r in rows]
