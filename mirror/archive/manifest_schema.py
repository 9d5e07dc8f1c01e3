"""The manifest's schema: its tables, version, migrations and indexes, and the states it records.

A run (runs.state); Manifest's methods make each step:

    (none)      -> running        start_run: `mirror run` with no run to resume
    running     -> complete       finish_run: nothing left to fetch (ExitCode.OK, or
                                  FAILED_URLS when some URLs failed)
    running     -> limit          finish_run: max_pages reached with pages still waiting
    running     -> interrupted    finish_run: a signal, or a fatal storage or internal error
    running     -> running        resume_run: the process died before finish_run (kill -9,
                                  power loss) and the next `mirror run` takes the run up
                                  again, after PRAGMA quick_check
    interrupted -> running        resume_run: the next `mirror run`
    running | interrupted -> abandoned   abandon_run: `mirror run --new-run`

complete, limit and abandoned are final: the next `mirror run` starts a new run. Nothing
else is written: there is no failed run (a run's failures are URL states).

    complete | limit | abandoned -> (deleted)   drop_runs: `mirror prune` (mirror.archive.prune)
                                  drops the run with its captures, texts, sessions, notes
                                  and errors; a capture of it that a kept capture refers to
                                  (original_id) stays, its run_id naming no run any more.
                                  While a prune is under way, meta 'prune' holds its journal.

A URL (urls.state) belongs to the run that last discovered it (urls.run_id); the steps:

    (none)  -> pending | skipped  add_urls, commit_capture: discovered; skipped (reason: the
                                  scope rule) when the scope refuses it
    skipped -> pending            a later link allows it (an off-site <a>, then an <img>);
                                  also after a skip at fetch time
    pending -> leased             lease: the frontier takes it
    leased  -> done               commit_capture: its capture is stored (any status, 4xx too)
    leased  -> failed             commit_capture(failed_reason=...): a retryable answer
                                  (politeness.RETRY_STATUSES, a body cut short) on the last
                                  try, stored; give_up: no answer after the last try, or an
                                  internal error (reason: the error)
    leased  -> pending            retry_later (tries + 1, next_try after a backoff); unlease
                                  (the frontier gives back what it did not fetch);
                                  resume_run and abandon_run (every lease of a dead process)
    leased  -> skipped            skip: robots.txt disallows it, or a host budget is spent
    (none) | pending | skipped -> leased   ensure_url: robots.txt, which only the robots
                                  gate fetches (via 'robots'), out of the frontier's band
    pending | leased -> done | failed   commit_capture at start-up: a capture the WARC file
                                  holds but the manifest missed is adopted
    done | failed -> pending      rollback_past: its capture lay past the end of a WARC file
                                  cut short (power loss)
    any state of an earlier run -> pending | skipped | leased   discovered again by a later
                                  run (add_urls, or ensure_url): run_id, tries, next_try and
                                  status start afresh

A new link to a URL the current run already holds, other than as skipped, adds only a links
row.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    state TEXT NOT NULL,            -- running | complete | limit | interrupted | abandoned
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
    via TEXT NOT NULL,              -- start | link | requisite | redirect | robots | sitemap
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
    original_id INTEGER,            -- for revisits: the capture holding the payload
    text_id INTEGER                 -- its page's title and text: texts.rowid (a revisit
                                    -- shares its original's), NULL if it has none
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
-- What a run noticed about a page it stored: why it may need a browser to archive.
CREATE TABLE IF NOT EXISTS notes (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    note TEXT NOT NULL,
    PRIMARY KEY (run_id, url_id)
) WITHOUT ROWID;
-- The <lastmod> of each page URL in the last sitemap read that lists it with one, as
-- written (W3C datetime), kept across runs for incremental crawls.
CREATE TABLE IF NOT EXISTS sitemap_lastmod (
    url_id INTEGER PRIMARY KEY,
    lastmod TEXT NOT NULL
);
-- The title and visible text of each page (2xx HTML) the archive holds, for search and
-- diffs; captures.text_id points here. Written in the capture's own transaction.
CREATE TABLE IF NOT EXISTS page_texts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the index's mark only rises
    title TEXT NOT NULL,
    body TEXT NOT NULL
);
-- Their full-text index (FTS5, over page_texts): derived, like index.cdxj. Rows up to
-- meta 'texts_indexed' are in it; the writer adds the rest in batches (Manifest.index_texts).
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(
    title, body, content = 'page_texts', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
-- The newest capture of each URL that has a text: what a search looks in by default.
CREATE TABLE IF NOT EXISTS latest_texts (
    url_id INTEGER PRIMARY KEY,
    capture_id INTEGER NOT NULL,
    text_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS latest_texts_text ON latest_texts (text_id);
CREATE TABLE IF NOT EXISTS errors (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    error TEXT NOT NULL
);
"""

#: upgrades from each older schema version to the next, run in order by the writer
MIGRATIONS = {
    1: """
ALTER TABLE captures ADD COLUMN record_type TEXT NOT NULL DEFAULT 'response';
ALTER TABLE captures ADD COLUMN original_id INTEGER;
""",
    2: """
ALTER TABLE captures ADD COLUMN text_id INTEGER;
""",
}

#: for a reader, which never upgrades: temporary views (in its connection only) that show
#: a manifest of each older schema version as the current schema, with the very values the
#: migrations would write (schema 1 had no revisits: every capture is a response; before
#: schema 3 no capture had a text)
READ_AS_CURRENT = {
    1: """
CREATE TEMP VIEW captures AS SELECT *, 'response' AS record_type, NULL AS original_id,
    NULL AS text_id FROM main.captures;
""",
    2: """
CREATE TEMP VIEW captures AS SELECT *, NULL AS text_id FROM main.captures;
""",
}

#: created after the migrations, since they may name columns the migrations add
INDEXES = """
CREATE INDEX IF NOT EXISTS captures_digest ON captures (payload_digest)
    WHERE record_type = 'response' AND truncated IS NULL;
CREATE INDEX IF NOT EXISTS captures_text ON captures (text_id, run_id)
    WHERE text_id IS NOT NULL;
"""

#: the urls columns of a work item, in the order of model.UrlItem's fields
URL_ITEM_COLUMNS = "id, url, site, depth, redirects_left, mode, tries, via"

#: the URLs the frontier hands out: not robots.txt, which only the robots gate fetches (a
#: robots.txt row left pending by a crash waits for the gate, not for a worker)
FRONTIER_URLS = "via != 'robots'"


#: the captures a capture of another run than the given ones ({}: their "?"s) refers to
#: as its original: what a prune of those runs keeps of them
HELD_BY_OTHERS = ("SELECT original_id FROM captures WHERE original_id IS NOT NULL "
                  "AND run_id NOT IN ({})")


class ManifestError(Exception):
    """The manifest cannot be used (damaged, or written by a newer mirror)."""


def schema_version(db: sqlite3.Connection, path: Path) -> int:
    """The file's schema version (a file that has none yet is new: the current one).
    Raises ManifestError for a version newer than this code knows."""
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = int(row[0]) if row else SCHEMA_VERSION
    if version > SCHEMA_VERSION:
        raise ManifestError(
            f"{path}: written by a newer mirror (schema {version} > {SCHEMA_VERSION}); "
            "upgrade mirror to read or write it"
        )
    return version


def create_or_upgrade(db: sqlite3.Connection, path: Path, *, durable: bool = False) -> None:
    """Set a read-write connection up (WAL, autocommit) and create the tables of a new
    manifest, or bring an older one to SCHEMA_VERSION in one transaction; then the
    indexes. A newer manifest is refused (ManifestError) before anything is written."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone():
        version = schema_version(db, path)
    else:
        version = SCHEMA_VERSION  # a new file gets the current schema
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
    db.execute("PRAGMA foreign_keys=ON")
    present = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    for statement in _statements(SCHEMA):
        virtual = statement.split("CREATE VIRTUAL TABLE IF NOT EXISTS ", 1)
        if len(virtual) == 2 and virtual[1].split()[0] in present:
            continue  # FTS5 reads its tables even to find it exists: a damaged file fails
        db.execute(statement)  # here, not at the quick_check that says so
    stored = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if stored is None or int(stored[0]) < SCHEMA_VERSION:
        _upgrade(db, version)
    db.executescript(INDEXES)


def _upgrade(db: sqlite3.Connection, version: int) -> None:
    """The migrations from `version` and the new version number, in one transaction (only
    when there is something to write: opening a current manifest writes nothing, so a
    damaged one fails at the quick_check that says so)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for old in range(version, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[old]):
                db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                   (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def read_as_current(db: sqlite3.Connection, path: Path) -> int:
    """Let a read-only connection see an older manifest as the current schema, writing
    nothing to the file: READ_AS_CURRENT's views, and an empty temporary table for each
    table the file lacks (added to SCHEMA before there were migrations). Returns the file's
    schema version; ManifestError for a newer one."""
    version = schema_version(db, path)
    for statement in _statements(READ_AS_CURRENT.get(version, "")):
        db.execute(statement)
    present = {name for (name,) in db.execute(
        "SELECT name FROM main.sqlite_master WHERE type='table'")}
    for statement in _statements(SCHEMA):
        for create, temp in (("CREATE TABLE IF NOT EXISTS ", "CREATE TEMP TABLE "),
                             ("CREATE VIRTUAL TABLE IF NOT EXISTS ",
                              "CREATE VIRTUAL TABLE temp.")):
            words = statement.split(create, 1)
            if len(words) == 2 and words[1].split()[0] not in present:
                db.execute(f"{temp}{words[1]}")
    return version


def _statements(script: str) -> list[str]:
    """The statements of one of the scripts above (each ends with ';' at a line's end)."""
    return [s for s in (part.strip().rstrip(";") for part in script.split(";\n")) if s]
