"""Schema versions: a version-1 manifest upgraded by the writer (rows kept, new columns
defaulted, indexes made), read as it is by ManifestReader (as if upgraded, nothing written),
and a manifest of a newer version refused by both."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
from contextlib import closing
from dataclasses import fields
from pathlib import Path

import pytest

from mirror.manifest.migrations import MIGRATIONS, READ_AS_CURRENT
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.manifest.schema import SCHEMA, SCHEMA_VERSION, URL_ITEM_COLUMNS, postgres
from mirror.manifest.writer import Manifest
from mirror.model import UrlItem

#: schema 1 as mirror last wrote it (commit 8625694): no record_type/original_id columns,
#: and no sessions table yet (added later to SCHEMA, without a new version)
V1_AS_RELEASED = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,
    state TEXT NOT NULL, config_digest TEXT NOT NULL, exit_code INTEGER);
CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, site TEXT NOT NULL,
    run_id INTEGER NOT NULL, state TEXT NOT NULL, mode TEXT NOT NULL, depth INTEGER NOT NULL,
    redirects_left INTEGER NOT NULL, referrer INTEGER, via TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, next_try REAL NOT NULL DEFAULT 0, reason TEXT,
    status INTEGER);
CREATE INDEX urls_frontier ON urls (state, id);
CREATE INDEX urls_due ON urls (state, next_try);
CREATE TABLE captures (id INTEGER PRIMARY KEY, url_id INTEGER NOT NULL REFERENCES urls(id),
    run_id INTEGER NOT NULL, url TEXT NOT NULL, warc_date TEXT NOT NULL,
    record_id TEXT NOT NULL, filename TEXT NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL, req_offset INTEGER NOT NULL, req_length INTEGER NOT NULL,
    status INTEGER NOT NULL, mime TEXT NOT NULL, payload_digest TEXT NOT NULL,
    payload_length INTEGER NOT NULL, etag TEXT, last_modified TEXT, location TEXT,
    truncated TEXT);
CREATE INDEX captures_url ON captures (url_id);
CREATE INDEX captures_run ON captures (run_id);
CREATE TABLE links (src INTEGER NOT NULL, dst INTEGER NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (src, dst, kind)) WITHOUT ROWID;
CREATE TABLE errors (run_id INTEGER NOT NULL, url_id INTEGER NOT NULL, error TEXT NOT NULL);
"""

#: schema 1 as today's SCHEMA without the columns MIGRATIONS[1] adds (text_id, which
#: MIGRATIONS[2] adds, ends up in the type name of `truncated`), nor the URL lease columns
#: MIGRATIONS[3] adds
V1_FROM_SCHEMA = re.sub(
    r"status INTEGER,\n    lease_owner .*\n    lease_epoch .*\n", "status INTEGER\n",
    re.sub(r"truncated TEXT,\n    record_type .*\n    original_id .*\n", "truncated TEXT\n",
           SCHEMA))

A, B, C = "http://h.test/", "http://h.test/b", "http://other.test/c"
CAPTURE_COLUMNS = ("url_id, run_id, url, warc_date, record_id, filename, offset, length, "
                   "req_offset, req_length, status, mime, payload_digest, payload_length, "
                   "etag, last_modified, location, truncated")
#: the columns of urls in schema 1 (to 3)
URL_COLUMNS = ("id, url, site, run_id, state, mode, depth, redirects_left, referrer, via, "
               "tries, next_try, reason, status")


def build(path: Path, schema: str, version: int) -> None:
    """A manifest of an older (or newer) mirror: one finished run, three URLs (done, failed,
    skipped), two captures, a link and an error."""
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(schema)
        db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
        db.execute("INSERT INTO runs VALUES (1, '2026-01-01T00:00:00Z', "
                   "'2026-01-01T00:01:00Z', 'complete', 'cfg', 3)")
        db.executemany(
            "INSERT INTO urls (id, url, site, run_id, state, mode, depth, redirects_left, "
            "via, tries, reason, status) VALUES (?, ?, ?, 1, ?, 'page', ?, 5, ?, ?, ?, ?)",
            [(1, A, "h.test", "done", 0, "start", 1, None, 200),
             (2, B, "h.test", "failed", 1, "link", 3, "HTTP 500", 500),
             (3, C, "other.test", "skipped", 1, "link", 0, "off_site", None)])
        db.executemany(
            f"INSERT INTO captures ({CAPTURE_COLUMNS}) VALUES "
            "(?, 1, ?, '2026-01-01T00:00:10Z', ?, 'f-1.warc.gz', ?, 100, ?, 50, ?, "
            "'text/html', ?, 10, NULL, NULL, NULL, NULL)",
            [(1, A, "<urn:uuid:1>", 0, 100, 200, "sha1:AAAA"),
             (2, B, "<urn:uuid:2>", 150, 250, 500, "sha1:BBBB")])
        db.execute("INSERT INTO links VALUES (1, 2, 'link')")
        db.execute("INSERT INTO errors VALUES (1, 2, 'HTTP 500')")


@pytest.fixture(params=[V1_AS_RELEASED, V1_FROM_SCHEMA], ids=["as-released", "from-schema"])
def v1(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    assert "original_id" not in request.param
    path = tmp_path / "manifest.sqlite3"
    build(path, request.param, 1)
    return path


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA main.table_info({table})")]


def dump(db: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the tables schema 1 had, in the columns it had."""
    return {t: db.execute(f"SELECT {cols} FROM main.{t} ORDER BY 1, 2").fetchall()
            for t, cols in [("meta", "key, value"), ("runs", "*"), ("urls", URL_COLUMNS),
                            ("captures", f"id, {CAPTURE_COLUMNS}"), ("links", "*"),
                            ("errors", "*")]}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def reads(m: ManifestReader) -> list[object]:
    """What status, runs, diff, explain, serve, reports and verify ask of a manifest."""
    return [m.runs.all(), m.runs.last(), m.runs.totals(), m.runs.contents(1),
            m.counts.url_states(1), m.counts.last_error(1), m.captures.in_run(None, A),
            m.captures.in_run(1, B), m.captures.original_by_digest("sha1:AAAA", 200),
            m.captures.previous(1, 2), m.counts.capture_stats(1), m.counts.captures(1),
            m.counts.skip_counts(1), m.urls.skipped(1), m.counts.failed(1),
            m.counts.error_counts(1), m.counts.broken_links(1), m.runs.time(1),
            m.urls.item_for(1, A), m.captures.committed_ends(), [dict(r) for r in m.captures.all()],
            m.db.execute("SELECT c.id, o.record_id FROM captures c LEFT JOIN captures o "
                         "ON o.id = c.original_id WHERE c.original_id IS NOT NULL").fetchall(),
            m.texts.search("anything"), m.texts.page_history(A), m.texts.page_text(1),
            m.texts.unindexed_pages()]


def test_every_older_version_has_a_migration_and_a_way_to_be_read() -> None:
    assert set(MIGRATIONS) == set(READ_AS_CURRENT) == set(range(1, SCHEMA_VERSION))


def test_the_work_item_columns_are_url_items_fields() -> None:
    assert URL_ITEM_COLUMNS.split(", ") == [f.name for f in fields(UrlItem)]


def test_the_writer_upgrades_a_version_1_manifest_keeping_its_rows(v1: Path) -> None:
    with closing(sqlite3.connect(v1)) as db:
        before = dump(db)
    m = Manifest(v1)
    try:
        after = dump(m.db)
        assert after.pop("meta") == [("schema_version", str(SCHEMA_VERSION))]
        before.pop("meta")
        assert after == before
        assert columns(m.db, "captures")[-3:] == ["record_type", "original_id", "text_id"]
        assert m.db.execute("SELECT record_type, original_id, text_id FROM captures"
                            ).fetchall() == [("response", None, None), ("response", None, None)]
        assert columns(m.db, "urls") == [*URL_COLUMNS.split(", "), "lease_owner", "lease_epoch"]
        assert m.db.execute("SELECT DISTINCT lease_owner, lease_epoch FROM urls"
                            ).fetchall() == [(None, None)]
        indexes = {r[0] for r in m.db.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
        assert indexes == {"urls_frontier", "urls_due", "captures_url", "captures_run",
                           "captures_digest", "captures_text", "captures_untexted",
                           "latest_texts_text"}
        assert {"sessions", "hosts", "workers", "files"} <= {r[0] for r in m.db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        # and the crawl goes on from it: a new run, a revisit of a schema-1 capture
        run = m.runs.start("2026-02-01T00:00:00Z", "cfg")
        assert run == 2 and m.captures.original_by_digest("sha1:AAAA", 200) is not None
        prev = m.captures.previous(1, run)
        assert prev is not None and prev.status == 200 and prev.original.record_id == "<urn:uuid:1>"
    finally:
        m.close()
    m = Manifest(v1)  # once upgraded, opening it again changes nothing
    m.close()


def test_a_reader_reads_a_version_1_manifest_as_if_upgraded_and_writes_nothing(
        v1: Path) -> None:
    upgraded = v1.with_name("upgraded.sqlite3")
    shutil.copy(v1, upgraded)
    Manifest(upgraded).close()
    files, sha = folder(v1), digest(v1)

    reader = ManifestReader(v1)
    try:
        assert reads(reader)[0]  # it has runs
        answers = reads(reader)
    finally:
        reader.close()
    assert digest(v1) == sha and folder(v1) == files  # not even a -wal or -shm file
    with closing(sqlite3.connect(v1)) as db:
        assert db.execute("SELECT value FROM meta").fetchall() == [("1",)]
        assert "record_type" not in columns(db, "captures")

    expected = ManifestReader(upgraded)
    try:
        assert answers == reads(expected)
    finally:
        expected.close()
    captures = answers[-6]
    assert captures[0]["record_type"] == "response" and captures[0]["original_id"] is None


@pytest.mark.parametrize("opener", [Manifest, ManifestReader], ids=["writer", "reader"])
def test_a_manifest_of_a_newer_schema_is_refused(tmp_path: Path, opener: type) -> None:
    path = tmp_path / "manifest.sqlite3"
    newer = re.sub(r"CREATE TABLE IF NOT EXISTS sessions \([^;]*;", "", SCHEMA)  # dropped
    build(path, newer, SCHEMA_VERSION + 1)
    sha = digest(path)
    with pytest.raises(ManifestError, match=rf"newer mirror \(schema {SCHEMA_VERSION + 1} > "
                                            rf"{SCHEMA_VERSION}\); upgrade mirror"):
        opener(path)
    assert digest(path) == sha  # refused before anything was written


@pytest.mark.parametrize("content", [None, b"not a database, not at all" * 100, b""],
                         ids=["missing", "garbage", "empty"])
def test_a_reader_refuses_what_is_not_a_manifest(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "manifest.sqlite3"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ManifestError, match="no manifest|not a usable manifest"):
        ManifestReader(path)
    assert (path.read_bytes() if content is not None else None) == content


#: schema 3 as today's SCHEMA without what schema 4 added: the URL lease columns and the
#: tables of a crawl shared by several workers
V3_FROM_SCHEMA = re.sub(
    r"-- A crawl shared by several workers.*", "",
    re.sub(r"status INTEGER,\n    lease_owner .*\n    lease_epoch .*\n", "status INTEGER\n",
           SCHEMA), flags=re.S)


def test_the_writer_upgrades_a_version_3_manifest_for_shared_crawls(tmp_path: Path) -> None:
    """Schema 4: URL lease columns (NULL), and the hosts, workers and files tables; the
    hosts of an unfinished run's pending URLs are made when a worker joins it."""
    assert "lease_owner" not in V3_FROM_SCHEMA and "CREATE TABLE IF NOT EXISTS hosts" \
        not in V3_FROM_SCHEMA and "CREATE TABLE IF NOT EXISTS errors" in V3_FROM_SCHEMA
    path = tmp_path / "manifest.sqlite3"
    build(path, V3_FROM_SCHEMA, 3)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE runs SET state='interrupted'")
        db.execute("UPDATE urls SET state='pending' WHERE id=2")
    reader = ManifestReader(path)  # read as if upgraded: no lease, no hosts yet
    try:
        assert reader.sql.execute("SELECT lease_owner, lease_epoch FROM urls WHERE id=2"
                                  ).fetchone() == (None, None)
        shared = reader.sharedrun
        assert shared.hosts() == [] and shared.workers() == [] and shared.files() == []
    finally:
        reader.close()
    m = Manifest(path)
    try:
        assert m.db.execute("SELECT value FROM meta WHERE key='schema_version'"
                            ).fetchone() == (str(SCHEMA_VERSION),)
        assert columns(m.db, "urls")[-2:] == ["lease_owner", "lease_epoch"]
        assert m.sharedrun.join_or_start_run("t", "cfg") == (1, False)
        assert [(h.site, h.slot) for h in m.sharedrun.hosts()] == [("h.test", 0)]
        [lease] = m.sharedrun.lease_hosts("w1", 5, 30)
        assert [i.url for i in m.sharedrun.lease_urls(lease, 5)] == [B]
    finally:
        m.close()


def test_the_postgresql_schema_is_the_sqlite_schema_rendered() -> None:
    """One source: every table but the FTS5 index, in PostgreSQL's types; SQLite's implicit
    rowid made a column where a table has no rowid alias (errors: last_error reads it)."""
    rendered = postgres(SCHEMA)
    tables = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA)
    assert re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", rendered) == tables
    assert "texts" not in tables and "fts5" not in rendered
    for word in ("WITHOUT ROWID", "AUTOINCREMENT", "REAL", "INTEGER", "--"):
        assert word not in rendered
    errors = rendered.split("CREATE TABLE IF NOT EXISTS errors", 1)[1].split(";")[0]
    assert "rowid BIGINT GENERATED ALWAYS AS IDENTITY" in errors
    assert postgres(MIGRATIONS[3]) == ("ALTER TABLE urls ADD COLUMN lease_owner TEXT;\n"
                                       "ALTER TABLE urls ADD COLUMN lease_epoch BIGINT;\n")
