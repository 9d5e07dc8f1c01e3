"""The manifest's migrations: what upgrades a file of each older schema version to the
next (the writer runs them, manifest.schema.create_or_upgrade), and what shows it as the
current schema to a reader, which never upgrades (manifest.schema.read_as_current)."""

from __future__ import annotations

#: upgrades from each older schema version to the next, run in order by the writer
MIGRATIONS = {
    1: """
ALTER TABLE captures ADD COLUMN record_type TEXT NOT NULL DEFAULT 'response';
ALTER TABLE captures ADD COLUMN original_id INTEGER;
""",
    2: """
ALTER TABLE captures ADD COLUMN text_id INTEGER;
""",
    3: """
ALTER TABLE urls ADD COLUMN lease_owner TEXT;
ALTER TABLE urls ADD COLUMN lease_epoch INTEGER;
""",
    4: "",  # (schema 5 gave SQLite's full-text index a prefix index; no longer: see SCHEMA)
    5: """
CREATE TABLE IF NOT EXISTS renders (capture_id INTEGER PRIMARY KEY, warc_file TEXT NOT NULL,
    "offset" INTEGER NOT NULL, length INTEGER NOT NULL, browser TEXT NOT NULL,
    requests INTEGER NOT NULL, at TEXT NOT NULL);
""",
}

#: for a reader, which never upgrades: temporary views (in its connection only) that show
#: a manifest of each older schema version as the current schema, with the very values the
#: migrations would write (schema 1 had no revisits: every capture is a response; before
#: schema 3 no capture had a text)
_URLS_V3 = """
CREATE TEMP VIEW urls AS SELECT *, NULL AS lease_owner, NULL AS lease_epoch FROM main.urls;
"""
READ_AS_CURRENT = {
    1: """
CREATE TEMP VIEW captures AS SELECT *, 'response' AS record_type, NULL AS original_id,
    NULL AS text_id FROM main.captures;
""" + _URLS_V3,
    2: """
CREATE TEMP VIEW captures AS SELECT *, NULL AS text_id FROM main.captures;
""" + _URLS_V3,
    3: _URLS_V3,
    4: "",  # the full-text index without its prefix index answers the same queries
    5: "",  # renders: an empty temporary table, as for each table the file lacks
}
