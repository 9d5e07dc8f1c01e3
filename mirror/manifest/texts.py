"""The manifest's text index (SQLite FTS5): full-text search, a page's text, a URL's history.

Each page (a 2xx HTML capture) has its title and visible text in `page_texts`, written in the
capture's own transaction (Manifest.captures.commit); a revisit shares its original's row.
The FTS5 table `texts` indexes them (external content), a batch at a time.
`latest_texts` names the newest capture of each URL that has a text: a search looks there
unless it is asked for one run or for every run.

A PostgreSQL manifest (a crawl shared by several workers) keeps `page_texts` and
`latest_texts` the same way, but has no full-text index: search raises ManifestError.
FTS5's query syntax, bm25 weights, highlight and snippet have no equal in PostgreSQL's
tsquery, so a second engine would answer the same query differently; and an index built on
every capture's commit would slow the shared run. The texts are all there for a search
index built later.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from mirror import crashpoints
from mirror.archive.searchrank import BODY_WEIGHT, TITLE_WEIGHT, fold_key
from mirror.errors import UsageError
from mirror.manifest import latestindex
from mirror.manifest.db import SqlDb, Tx
from mirror.manifest.schema import SET_META, UNTEXTED, ManifestError
from mirror.model import PageText

#: page texts added to the full-text index at a time: FTS5 costs about 2.5 times as much
#: per page when each page is its own transaction (a new segment, merged again and again)
TEXT_BATCH = 256

#: around a highlighted term in what FTS5 returns: control characters no page text holds
#: (extract.visible_text drops them), turned into marks by `marked`
MARK_START, MARK_END = "\x02", "\x03"
ELLIPSIS = "…"
#: tokens in a snippet
SNIPPET_TOKENS = 24


#: the ranking of searchrank.py. FTS5 sorts by this itself (ORDER BY rank is consumed), so
#: SQLite pulls only the rows it returns, and highlight() and snippet() run for those alone
_RANK = f"bm25({TITLE_WEIGHT}, {BODY_WEIGHT})"
#: {t}: the full-text table searched, `texts` (every text) or `latest_index` (the newest
#: text of each URL: what a search of the newest captures ranks among, latestindex.py)
_MATCH = "{t} MATCH ? AND rank MATCH ?"
_RANKED = ("{t}.rowid, rank, highlight({t}, 0, ?, ?), "
           f"snippet({{t}}, 1, ?, ?, ?, {SNIPPET_TOKENS})")
_MARKS = (MARK_START, MARK_END, MARK_START, MARK_END, ELLIPSIS)
#: most texts a search ranks: a query that matches more (a common word on a big site) is
#: ranked among the newest RANKED_AT_MOST of them. bm25 reads every match's positions and
#: size, about 0.7 ms per 1,000 texts: a word found on all of 100,000 pages took 65 ms,
#: ranked among 20,000 it takes 18 (bench/text_cost.py)
RANKED_AT_MOST = 20_000


class SearchError(UsageError, ValueError):
    """The query is not one FTS5 can read (says why, in its words)."""


@dataclass(frozen=True)
class Hit:
    """One search result: a capture whose page matches."""

    capture_id: int
    url: str
    run_id: int
    warc_date: str  # when it was captured (ISO 8601)
    status: int
    title: str  # as the page has it ("" when it has none)
    title_marks: tuple[tuple[int, int], ...]  # matched spans of the title: [start, end)
    snippet: str  # the best few words of the body around the matches
    marks: tuple[tuple[int, int], ...]  # matched spans of the snippet
    score: float  # bm25 relevance: higher is better; comparable within one archive
    captures: int = 1  # with --all-runs: how many captures share this text


@dataclass(frozen=True)
class PageCapture:
    """One capture of a URL, in its history."""

    capture_id: int
    run_id: int
    warc_date: str
    status: int
    mime: str
    payload_length: int
    payload_digest: str
    record_type: str  # response | revisit | not-modified
    text_id: int | None
    changed: bool  # its content differs from the capture before it (the first: True)


def marked(raw: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """FTS5's highlighted text as (plain text, the spans that were between marks)."""
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    size, start = 0, None
    for part in _split_marks(raw):
        if part == MARK_START:
            start = size
        elif part == MARK_END:
            if start is not None and size > start:
                marks.append((start, size))
            start = None
        else:
            out.append(part)
            size += len(part)
    return "".join(out), tuple(marks)


def _split_marks(raw: str) -> Iterator[str]:
    piece: list[str] = []
    for char in raw:
        if char in (MARK_START, MARK_END):
            if piece:
                yield "".join(piece)
                piece = []
            yield char
        else:
            piece.append(char)
    if piece:
        yield "".join(piece)


def _is_query_error(exc: sqlite3.Error) -> bool:
    """Whether FTS5 refused the query itself (its syntax, a column filter): a plain
    SQLITE_ERROR, not a busy, I/O, corrupt or missing database."""
    code = getattr(exc, "sqlite_errorcode", sqlite3.SQLITE_ERROR)
    return code == sqlite3.SQLITE_ERROR and not str(exc).startswith("no such table")


def _search_error(query: str, exc: sqlite3.Error) -> SearchError:
    why = str(exc).removeprefix("fts5: ")
    if "no such column" in why:  # word: is a column filter in FTS5's syntax
        why += " (a word followed by ':' names a column: quote it, \"like:this\")"
    return SearchError(f"cannot search for {query!r}: {why}; write words, \"a phrase\", "
                       "prefix*, OR, NOT, or (groups)")


@contextmanager
def _query_errors(query: str) -> Iterator[None]:
    """SQLite's errors of a search: the query's own as SearchError, others ManifestError."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not _is_query_error(exc):  # locked, I/O error: not the query's fault
            raise ManifestError(f"cannot search the manifest: {exc}") from exc
        raise _search_error(query, exc) from exc


class TextReads:
    """The text index's queries: the part `texts` of ManifestReader."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def search(self, query: str, *, run_id: int | None = None, all_runs: bool = False,
               limit: int = 20, offset: int = 0) -> list[Hit]:
        """The best `limit` pages (after `offset`) whose title or text matches `query`
        (FTS5 syntax), best first: by default each URL's newest capture that has a text;
        with `run_id`, that run's captures; with `all_runs`, each text a URL ever had
        (the first capture of it, with how many captures share it).
        Raises SearchError for a query FTS5 cannot read; ManifestError on PostgreSQL."""
        if self.sql.dialect != "sqlite":
            raise ManifestError(f"{self.sql.name}: full-text search needs the SQLite manifest "
                                "(a PostgreSQL manifest has no search index)")
        if not query.strip():
            return []
        with _query_errors(query):
            if all_runs:
                return self._every_version(query, limit, offset)
            t = self._searched(run_id)
            if run_id is not None:
                join = f"JOIN captures c ON c.text_id = {t}.rowid AND c.run_id = ?"
                params: tuple[object, ...] = (run_id,)
            else:
                join = f"JOIN latest_texts c ON c.text_id = {t}.rowid"
                params = ()
            newest, since = self._newest_matches(query, t)
            sql = (f"SELECT {_RANKED}, {'c.id' if run_id is not None else 'c.capture_id'}, 1 "
                   f"FROM {t} {join} WHERE {_MATCH}{newest} ORDER BY rank LIMIT ? OFFSET ?"
                   ).format(t=t)
            rows = self.sql.execute(sql, (*_MARKS, *params, query, _RANK, *since, limit,
                                          offset))
            return [self._hit(*row) for row in rows.fetchall()]

    def matching_urls(self, query: str, *, run_id: int | None = None,
                      limit: int) -> list[str]:
        """The URLs of up to `limit` pages whose newest text (with `run_id`: whose capture
        in that run) matches `query`, unranked, in no useful order: what a search counts,
        and folds (searchrank.fold_key). Same errors as `search`."""
        if self.sql.dialect != "sqlite" or not query.strip():
            return []
        t = self._searched(run_id)
        join = (f"JOIN latest_texts l ON l.text_id = {t}.rowid "
                "JOIN captures c ON c.id = l.capture_id") if run_id is None else \
            f"JOIN captures c ON c.text_id = {t}.rowid AND c.run_id = ?"
        params = () if run_id is None else (run_id,)
        with _query_errors(query):
            rows = self.sql.execute(f"SELECT DISTINCT c.url FROM {t} {join} "
                                    f"WHERE {t} MATCH ? LIMIT ?", (*params, query, limit))
            return [url for (url,) in rows.fetchall()]

    def matching_variants(self, query: str, pages: Iterable[str], *,
                          run_id: int | None = None) -> dict[str, list[str]]:
        """For each page of `pages` (a searchrank.fold_key) that has variants, its URLs
        (itself and itself with a query string) whose newest text (with `run_id`: whose
        capture in that run) matches `query`, sorted. One full-text query for them all,
        over the span of their texts: FTS5 materializes a prefix* query's words at each
        query, so asking text by text would cost that every time. Same errors as
        `search`."""
        if self.sql.dialect != "sqlite" or not query.strip():
            return {}
        candidates: dict[str, list[tuple[str, int]]] = {}
        for page in set(pages):
            texts = self._texts_of_page(page, run_id)
            if len(texts) > 1:  # one URL: no variant to fold
                candidates[page] = texts
        ids = [text_id for texts in candidates.values() for _, text_id in texts]
        if not ids:
            return {}
        t = self._searched(run_id)
        with _query_errors(query):
            found = {row[0] for row in self.sql.execute(
                f"SELECT rowid FROM {t} WHERE {t} MATCH ? AND rowid BETWEEN ? AND ?",
                (query, min(ids), max(ids)))}
        return {page: sorted({url for url, text_id in texts if text_id in found})
                for page, texts in candidates.items()}

    def _texts_of_page(self, page: str, run_id: int | None) -> list[tuple[str, int]]:
        """(url, text id) of the URLs that fold under `page`: the newest text of each, or
        with `run_id` each text it had in that run."""
        among = ("SELECT id, url FROM urls WHERE url = ? OR (url >= ? AND url < ?)")
        if run_id is None:
            sql = (f"SELECT u.url, l.text_id FROM ({among}) u "
                   "JOIN latest_texts l ON l.url_id = u.id")
            params: tuple[object, ...] = (page, page + "?", page + "@")
        else:
            sql = (f"SELECT DISTINCT u.url, c.text_id FROM ({among}) u JOIN captures c ON "
                   "c.url_id = u.id AND c.run_id = ? AND c.text_id IS NOT NULL")
            params = (page, page + "?", page + "@", run_id)
        return [(url, int(text_id)) for url, text_id in self.sql.execute(sql, params)
                if fold_key(url) == page]

    def matching_versions(self, query: str, *, limit: int) -> int:
        """How many (URL, text) pairs match `query`, up to `limit`: what a search of every
        version counts. Same errors as `search`."""
        if self.sql.dialect != "sqlite" or not query.strip():
            return 0
        with _query_errors(query):
            return int(self.sql.execute(
                "SELECT COUNT(*) FROM (SELECT DISTINCT c.url_id, c.text_id FROM texts "
                "JOIN captures c ON c.text_id = texts.rowid WHERE texts MATCH ? LIMIT ?)",
                (query, limit)).fetchone()[0])

    def _searched(self, run_id: int | None) -> str:
        """The full-text table a search ranks among: the newest texts (latestindex.py)
        for a search of the newest captures, when that index is up to date; else every
        text."""
        return latestindex.TABLE if run_id is None and latestindex.in_step(self.sql) \
            else "texts"

    def _newest_matches(self, query: str, t: str) -> tuple[str, tuple[int, ...]]:
        """The condition (and its parameter) that keeps a search to the newest
        RANKED_AT_MOST texts of table `t` matching `query`; none when fewer match.
        Walking the matches' ids costs a tenth of ranking them."""
        row = self.sql.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH ? "
                               "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                               (query, RANKED_AT_MOST - 1)).fetchone()
        return ("", ()) if row is None else (f" AND {t}.rowid >= ?", (int(row[0]),))

    def _every_version(self, query: str, limit: int, offset: int) -> list[Hit]:
        """--all-runs: each (URL, text) once, best text first, with its first capture."""
        hits: list[Hit] = []
        rows = self.sql.execute(f"SELECT {_RANKED} FROM texts WHERE {_MATCH} ORDER BY rank"
                                .format(t="texts"), (*_MARKS, query, _RANK))
        seen = 0
        for text_id, rank, title, snippet in rows:  # pulled one by one: snippets are
            for first, count in self.sql.execute(  # made for these rows only
                    "SELECT MIN(id), COUNT(*) FROM captures WHERE text_id=? GROUP BY url_id "
                    "ORDER BY 1", (text_id,)).fetchall():
                seen += 1
                if seen > offset:
                    hits.append(self._hit(text_id, rank, title, snippet, first, count))
                if len(hits) == limit:
                    rows.close()
                    return hits
        return hits

    def _hit(self, text_id: int, rank: float, title: str, snippet: str, capture_id: int,
             captures: int) -> Hit:
        url, run, date, status = self.sql.execute(
            "SELECT url, run_id, warc_date, status FROM captures WHERE id=?",
            (capture_id,)).fetchone()
        title_text, title_marks = marked(title)
        body, marks = marked(snippet.replace("\n", " "))  # one line (same offsets)
        return Hit(capture_id, url, run, date, status, title_text, title_marks, body, marks,
                   -rank, captures)

    def page_text(self, capture_id: int) -> PageText | None:
        """A capture's title and text (its original's, for a revisit); None if it has none."""
        row = self.sql.execute(
            "SELECT t.title, t.body FROM captures c JOIN page_texts t ON t.id = c.text_id "
            "WHERE c.id=?", (capture_id,)).fetchone()
        return PageText(row[0] or None, row[1] or None) if row else None

    def page_history(self, url: str) -> list[PageCapture]:
        """Every capture of a URL, oldest first, each marked changed when its content
        (payload digest and status) differs from the capture before it."""
        rows = self.sql.execute(
            "SELECT id, run_id, warc_date, status, mime, payload_length, payload_digest, "
            "record_type, text_id FROM captures WHERE url=? ORDER BY id", (url,)).fetchall()
        out: list[PageCapture] = []
        before: tuple[object, object] | None = None
        for cid, run, date, status, mime, size, digest, kind, text_id in rows:
            out.append(PageCapture(cid, run, date, status, mime, size, digest, kind, text_id,
                                   changed=(status, digest) != before))
            before = (status, digest)
        return out

    def capture_url(self, capture_id: int) -> tuple[str, str] | None:
        """(url, warc_date) of a capture, or None when there is no such capture."""
        row = self.sql.execute("SELECT url, warc_date FROM captures WHERE id=?",
                              (capture_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def unindexed_pages(self) -> int:
        """Pages a search cannot find yet: 2xx HTML responses without a text (captured
        before the text index existed), and texts the full-text index has not taken in yet
        (the last of a running crawl, or of one killed). `mirror index --search` reads
        them all."""
        without = self.sql.execute(
            f"SELECT COUNT(*) FROM captures WHERE {UNTEXTED}").fetchone()[0]
        return int(without) + int(self.sql.execute(
            "SELECT COUNT(*) FROM page_texts WHERE id > ?",
            (self.texts_indexed(),)).fetchone()[0])

    def texts_indexed(self) -> int:
        """The last page_texts row the full-text index holds."""
        row = self.sql.execute("SELECT value FROM meta WHERE key='texts_indexed'").fetchone()
        return int(row[0]) if row else 0

    def indexed_pages(self) -> int:
        """Captures that have a text."""
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM captures WHERE text_id IS NOT NULL").fetchone()[0])

    def sources(self) -> list[tuple[int, str, str, int, str, int]]:
        """What `mirror index --search` reads, in capture order: (capture id, url,
        record_type, status, filename, offset) of every 2xx HTML capture."""
        return [tuple(r) for r in self.sql.execute(
            "SELECT id, url, record_type, status, filename, offset FROM captures "
            "WHERE status BETWEEN 200 AND 299 AND mime IN ('text/html', "
            "'application/xhtml+xml') ORDER BY id")]


class Texts(TextReads):
    """The writer's part: page texts stored with their captures and added to the full-text
    index in batches (TEXT_BATCH), the index of each URL's newest text kept in step
    (latestindex.py). Writes join the writer's transaction (`tx`)."""

    def __init__(self, sql: SqlDb, tx: Tx) -> None:
        super().__init__(sql)
        self._tx = tx
        self._unindexed = 0  # texts committed since the last index() (about)

    def index_due(self) -> None:
        """index(), once TEXT_BATCH texts wait for it."""
        if self._unindexed >= TEXT_BATCH:
            self.index(whole=False)

    def text_id(self, original_id: int | None, text: PageText | None) -> int | None:
        """The texts row of a capture: its original's for a revisit whose original has one
        (the same payload has the same text), else a new row for its text, if any."""
        if original_id is not None:
            row = self.sql.execute("SELECT text_id FROM captures WHERE id=?",
                                  (original_id,)).fetchone()
            if row is not None and row[0] is not None:
                return int(row[0])
        if text is None:
            return None
        text_id: int = self.sql.execute(
            "INSERT INTO page_texts (title, body) VALUES (?, ?) RETURNING id",
            (text.title or "", text.body or "")).fetchone()[0]
        self._unindexed += 1
        return text_id

    def drop(self, text_ids: Sequence[tuple[int]]) -> None:
        """Forget texts no capture has any more (out of the index too, if it has them)."""
        done = self.texts_indexed()
        for (text_id,) in text_ids:
            if self.sql.execute("SELECT 1 FROM captures WHERE text_id=?",
                               (text_id,)).fetchone():
                continue
            if text_id <= done:
                self.sql.execute("INSERT INTO texts (texts, rowid, title, body) "
                                "SELECT 'delete', id, title, body FROM page_texts WHERE id=?",
                                (text_id,))
                latestindex.drop(self.sql, text_id)
            self.sql.execute("DELETE FROM page_texts WHERE id=?", (text_id,))

    def index(self, *, whole: bool = True) -> int:
        """Add the page texts the full-text index lacks, in one transaction; how many. (A
        PostgreSQL manifest has no full-text index: manifest.texts.) Not `whole` (a batch
        in a run): the index of the newest texts is kept in step, but not made."""
        if self.sql.dialect != "sqlite":
            return 0
        with self._tx():
            done = self.texts_indexed()
            top = self.sql.execute("SELECT MAX(id) FROM page_texts").fetchone()[0] or 0
            if top > done:
                cur = self.sql.execute(
                    "INSERT INTO texts (rowid, title, body) SELECT id, title, body "
                    "FROM page_texts WHERE id > ? ORDER BY id", (done,))
                self.sql.execute(SET_META, ("texts_indexed", str(top)))
                crashpoints.reached("texts:inside")
            latestindex.sync(self.sql, done, max(top, done), build=whole)
        self._unindexed = 0
        return max(cur.rowcount, 0) if top > done else 0

    def latest(self, url_id: int, capture_id: int | None, text_id: int) -> None:
        latestindex.set_newest(self.sql, url_id, capture_id, text_id)

    def relatest(self, url_ids: Iterable[int]) -> None:
        latestindex.renew(self.sql, url_ids)

    def sync_latest(self, *, build: bool) -> None:
        """The index of the newest texts in step after captures went (latestindex.py)."""
        if self.sql.dialect == "sqlite":
            latestindex.sync(self.sql, *[self.texts_indexed()] * 2, build=build)

    def clear(self) -> None:
        """Forget every page text (before `mirror index --search` reads them again)."""
        with self._tx():
            self.sql.execute("UPDATE captures SET text_id=NULL WHERE text_id IS NOT NULL")
            self.sql.execute("DELETE FROM latest_texts")
            if self.sql.dialect == "sqlite":
                self.sql.execute("INSERT INTO texts (texts) VALUES ('delete-all')")
                latestindex.clear(self.sql)
            self.sql.execute("DELETE FROM page_texts")
            self.sql.execute("DELETE FROM meta WHERE key='texts_indexed'")

    def set(self, texts: Sequence[tuple[int, PageText | None]]) -> None:
        """Give captures their text, in one transaction: (capture id, text) in capture
        order, so that a revisit finds its original's text (None: a revisit's own is
        its original's, if that has one)."""
        with self._tx():
            for capture_id, text in texts:
                row = self.sql.execute("SELECT original_id, url_id FROM captures WHERE id=?",
                                      (capture_id,)).fetchone()
                if row is None:
                    continue
                text_id = self.text_id(row[0], text)
                if text_id is not None:
                    self.sql.execute("UPDATE captures SET text_id=? WHERE id=?",
                                    (text_id, capture_id))
                    self.latest(row[1], capture_id, text_id)
