"""The manifest's schema: its tables, version, migrations and indexes, and the states it records.

A run (runs.state); the methods of Manifest's parts (runs, urls, captures, sharedrun,
filemarks, prune; named below as they were on Manifest) make each step:

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
    (none)      -> running        join_or_start_run: the first worker of a shared run (the
                                  others join the run; interrupted -> running likewise)

complete, limit and abandoned are final: the next `mirror run` starts a new run. Nothing
else is written: there is no failed run (a run's failures are URL states).

    complete | limit | abandoned -> (deleted)   drop_runs: `mirror prune` (mirror.upkeep.prune)
                                  drops the run with its captures, texts, sessions, notes,
                                  page_robots and errors; a capture of it that a kept
                                  capture refers to (original_id) stays, its run_id
                                  naming no run any more.
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

A crawl shared by several workers (DISTRIBUTED.md §5.2; the same tables in SQLite and in
PostgreSQL) leases hosts, not URLs one by one. All times are the database's own, in
milliseconds since the epoch (a worker's clock never decides a lease). A host slot
(hosts: one row per site and slot, slot 0 made when the site's first URL is found):

    free    -> leased         lease_hosts: next_fetch_at <= now, block_until <= now, and the
                              site has a due pending URL (a requisite, once the run's page
                              budget is spent); lease_epoch becomes one more than any of the
                              site's, lease_until = now + ttl
    leased  -> leased         lease_hosts by anyone, once expired (lease_until <= now, due as
                              above): taken over; the URLs leased under the old lease go
                              back to pending first
    leased  -> leased         renew_host: lease_until = now + ttl, while owner and epoch match
    leased  -> free           release_host: next_fetch_at = now + delay (the politeness delay,
                              Crawl-delay); the URLs still leased under it go back to pending;
                              recover: every lease of the worker (a restart), and every
                              expired lease of anyone
    any     -> any            block_host: block_until = now + seconds (Retry-After), for every
                              slot of the site; it never moves back

A URL leased under a host lease carries its owner and epoch (urls.lease_owner, lease_epoch;
NULL in every other state, and for the single machine's lease):

    pending -> leased         lease_urls(host lease, k): the slot's lease is still held; a
                              page only while the run's pages done, failed or leased are
                              fewer than its max_pages (counted under a lock)
    leased  -> done | failed | pending | skipped   commit_capture, retry_later, give_up, skip,
                              with `lease=`: only while owner and epoch still match (fenced);
                              otherwise nothing is written and they return False (the worker
                              cuts its WARC file back to before the record)
    leased  -> pending        release_host, a takeover of an expired lease, recover, mark_lost

A worker (workers): register_worker makes or restarts its row (started, alive), heartbeat
refreshes alive; lost_workers names those silent for longer than asked. A WARC file a worker
writes (files):

    (none) -> open -> closed -> uploaded   open_file, close_file (size, sha256), mark_uploaded
    open | closed -> lost     mark_lost(worker): the worker is gone with its disk; the captures
                              in its files are forgotten and their URLs go back to pending,
                              to be fetched once more. A worker that comes back finds its
                              files lost (close_file and mark_uploaded return False) and
                              deletes them instead of uploading them
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from mirror.manifest.db import ManifestError, SqlDb
from mirror.manifest.migrations import MIGRATIONS, READ_AS_CURRENT
from mirror.manifest.patterns import PATTERN_SCHEMA

__all__ = ["INDEXES", "SCHEMA", "SCHEMA_VERSION",
           "ManifestError", "create_or_upgrade", "create_or_upgrade_postgres", "postgres",
           "read_as_current", "schema_version"]

SCHEMA_VERSION = 6

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
    status INTEGER,
    lease_owner TEXT,               -- leased by a worker under a host lease (lease_hosts):
    lease_epoch INTEGER             -- which worker, under which lease (NULL otherwise)
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
    "offset" INTEGER NOT NULL,
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
-- The rendered DOM of a page loaded in a browser (manifest/renders.py): its WARC conversion
-- record (right after the page's response record), the browser, the requests the page made.
CREATE TABLE IF NOT EXISTS renders (
    capture_id INTEGER PRIMARY KEY,
    warc_file TEXT NOT NULL,
    "offset" INTEGER NOT NULL,
    length INTEGER NOT NULL,
    browser TEXT NOT NULL,
    requests INTEGER NOT NULL,
    at TEXT NOT NULL
);
-- What a run noticed about a page it stored: why it may need a browser to archive.
CREATE TABLE IF NOT EXISTS notes (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    note TEXT NOT NULL,
    PRIMARY KEY (run_id, url_id)
) WITHOUT ROWID;
-- The robots directives a page a run stored carries (<meta name="robots">, X-Robots-Tag;
-- mirror.web.robotsmeta), when [scope] meta_robots is on: 1 where it says noindex, nofollow.
CREATE TABLE IF NOT EXISTS page_robots (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    noindex INTEGER NOT NULL,
    nofollow INTEGER NOT NULL,
    PRIMARY KEY (run_id, url_id)
) WITHOUT ROWID;
-- The <lastmod> of each page URL in the last sitemap read that lists it with one, as
-- written (W3C datetime), kept across runs for incremental crawls.
CREATE TABLE IF NOT EXISTS sitemap_lastmod (
    url_id INTEGER PRIMARY KEY,
    lastmod TEXT NOT NULL
);
-- Each sitemap a run read: how many URLs it listed, and how many of them were past the
-- run's sitemap URL budget ([scope] max_sitemap_urls: counted, never stored as URLs).
CREATE TABLE IF NOT EXISTS sitemap_reads (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    listed INTEGER NOT NULL,
    beyond INTEGER NOT NULL,
    PRIMARY KEY (run_id, url_id)
) WITHOUT ROWID;
-- The title and visible text of each page (2xx HTML) the archive holds, for search and
-- diffs; captures.text_id points here. Written in the capture's own transaction.
CREATE TABLE IF NOT EXISTS page_texts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the index's mark only rises
    title TEXT NOT NULL,
    body TEXT NOT NULL
);
-- Their full-text index (FTS5, over page_texts): derived, like index.cdxj. Rows up to
-- meta 'texts_indexed' are in it; the writer adds the rest in batches (Manifest.texts.index).
-- No prefix index (prefix = '3' made 3-letter prefix queries 3x quicker, but indexing a text
-- 70% dearer and the index 24% larger; without it such a query's p95 at 100,000 pages is
-- 57-70 ms: bench/fts_prefix.py, text_cost.py). Manifests made with one keep it: the
-- queries are the same.
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
-- The full-text index of the texts latest_texts names (FTS5, over page_texts): what a search
-- of the newest captures ranks among, as an export's search does; derived like `texts`
-- (manifest/latestindex.py). latest_index_rows lists the texts in it.
CREATE VIRTUAL TABLE IF NOT EXISTS latest_index USING fts5(
    title, body, content = 'page_texts', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS latest_index_rows (
    text_id INTEGER PRIMARY KEY
);
-- texts that were, or became, some URL's newest since latest_index was last brought in
-- step: all it looks at then (latestindex.sync), so that costs what changed, not the site
CREATE TABLE IF NOT EXISTS latest_changes (
    text_id INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS errors (
    run_id INTEGER NOT NULL,
    url_id INTEGER NOT NULL,
    error TEXT NOT NULL
);
-- A crawl shared by several workers (the state machines above). Times: database time, in
-- milliseconds since the epoch. One row per host slot: the unit a worker leases.
CREATE TABLE IF NOT EXISTS hosts (
    id INTEGER PRIMARY KEY,
    site TEXT NOT NULL,
    slot INTEGER NOT NULL,
    next_fetch_at INTEGER NOT NULL DEFAULT 0,   -- no request before (politeness delay)
    block_until INTEGER NOT NULL DEFAULT 0,     -- no request before (Retry-After)
    lease_owner TEXT,                           -- NULL: free
    lease_epoch INTEGER NOT NULL DEFAULT 0,     -- rises with every lease of the site
    lease_until INTEGER NOT NULL DEFAULT 0,     -- expired (takeable) from then on
    UNIQUE (site, slot)
);
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY,            -- unique per worker process: leases are fenced by it
    run_id INTEGER NOT NULL,
    started INTEGER NOT NULL,
    alive INTEGER NOT NULL          -- its last heartbeat
);
-- robots.txt as the worker of a shared run that fetched it got it (robotsanswers.py):
-- status 0 is a failed fetch (body: the error); headers JSON, body base64.
CREATE TABLE IF NOT EXISTS robots_answers (
    run_id INTEGER NOT NULL,
    url TEXT NOT NULL,
    status INTEGER NOT NULL,
    headers TEXT NOT NULL,
    body TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    PRIMARY KEY (run_id, url)
) WITHOUT ROWID;
-- The WARC files workers write: each only by the worker that opened it.
CREATE TABLE IF NOT EXISTS files (
    name TEXT PRIMARY KEY,
    worker TEXT NOT NULL,
    state TEXT NOT NULL,            -- open | closed | uploaded | lost
    size INTEGER,
    sha256 TEXT,
    opened INTEGER NOT NULL,
    closed INTEGER
);
"""

SCHEMA += PATTERN_SCHEMA  # learned trap patterns (manifest/patterns.py)

#: captures that should have a text and have none, counted at each search: a partial index
#: of these few rows (the same words in index and query) spares a scan of every capture
UNTEXTED = ("text_id IS NULL AND record_type='response' AND status BETWEEN 200 AND 299 "
            "AND mime IN ('text/html', 'application/xhtml+xml')")
#: created after the migrations, since they may name columns the migrations add
INDEXES = """
CREATE INDEX IF NOT EXISTS captures_digest ON captures (payload_digest)
    WHERE record_type = 'response' AND truncated IS NULL;
CREATE INDEX IF NOT EXISTS captures_text ON captures (text_id, run_id)
    WHERE text_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS captures_untexted ON captures (id) WHERE """ + UNTEXTED + ";"

#: PostgreSQL's only: the pending URLs of a site, for lease_hosts and lease_urls. A single
#: machine never leases by host, and the index would cost each of its captures about 3%
#: (SQLite finds a site's pending URLs through urls_frontier: fine for a few workers)
SHARED_INDEXES = """
CREATE INDEX IF NOT EXISTS urls_host ON urls (site, id) WHERE state = 'pending';
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

#: a meta row written (or rewritten)
SET_META = "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value"


def schema_version(db: Any, path: Path | str) -> int:
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
        db.execute(_SET_VERSION, (str(SCHEMA_VERSION),))
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


#: the schema version, written with the tables or after the migrations
_SET_VERSION = ("INSERT INTO meta VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value")
#: pg_advisory_xact_lock key held while a PostgreSQL manifest's schema is checked and made,
#: so that workers starting together do not both make it
_SCHEMA_LOCK = 0x6D6972726F72  # "mirror"


def postgres(script: str) -> str:
    """A script of this module (SCHEMA, INDEXES, a migration) in PostgreSQL's dialect, by
    mechanical substitutions: SQLite's rowid aliases become identity columns (its implicit
    rowid an explicit one, where a table has no other), INTEGER BIGINT (epoch milliseconds
    and file offsets outgrow 32 bits), REAL DOUBLE PRECISION; WITHOUT ROWID and the FTS5
    table (SQLite's own) go. Comments are dropped."""
    out = []
    for statement in _statements(re.sub(r"--[^\n]*", "", script)):
        if statement.startswith("CREATE VIRTUAL TABLE"):
            continue
        if statement.startswith("CREATE TABLE") and "WITHOUT ROWID" not in statement \
                and "INTEGER PRIMARY KEY" not in statement:
            statement = statement[:statement.rindex(")")].rstrip() \
                + ",\n    rowid INTEGER GENERATED ALWAYS AS IDENTITY\n)"
        statement = re.sub(r"\)\s*WITHOUT ROWID", ")", statement)
        statement = re.sub(r"INTEGER PRIMARY KEY( AUTOINCREMENT)?",
                           "INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement)
        statement = re.sub(r"\bINTEGER\b", "BIGINT", statement)
        out.append(re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement))
    return ";\n".join(out) + ";\n" if out else ""


def create_or_upgrade_postgres(db: SqlDb) -> None:
    """Create the tables and indexes of a new PostgreSQL manifest, or bring an older one to
    SCHEMA_VERSION, in one transaction under an advisory lock (workers that start together
    wait for the first). A newer manifest is refused (ManifestError), nothing written."""
    raw = db.raw
    db.begin()
    try:
        db.lock(_SCHEMA_LOCK)
        if raw.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]:
            version = schema_version(raw, db.name)
        else:
            version = SCHEMA_VERSION
        for statement in _statements(postgres(SCHEMA)):
            raw.execute(statement)
        for old in range(version, SCHEMA_VERSION):
            for statement in _statements(postgres(MIGRATIONS[old])):
                raw.execute(statement)
        db.execute(_SET_VERSION, (str(SCHEMA_VERSION),))
        for statement in _statements(postgres(INDEXES + SHARED_INDEXES)):
            raw.execute(statement)
        db.commit()
    except BaseException:
        if db.in_transaction:
            db.rollback()
        raise


def check_postgres(db: SqlDb) -> int:
    """A reader's check of a PostgreSQL manifest: its schema version (ManifestError when
    there is no manifest in the database, or a newer one)."""
    if not db.raw.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]:
        raise ManifestError(f"{db.name}: no manifest in this database "
                            "(has a crawl run with it yet?)")
    return schema_version(db.raw, db.name)


def _statements(script: str) -> list[str]:
    """The statements of one of the scripts above (each ends with ';' at a line's end)."""
    return [s for s in (part.strip().rstrip(";") for part in script.split(";\n")) if s]
