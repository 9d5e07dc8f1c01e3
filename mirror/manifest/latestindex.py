"""The newest text of each URL (`latest_texts`) and the full-text index of those texts
(`latest_index`): what a search of each page's newest capture ranks among.

bm25 weighs a word by how many of the indexed texts hold it, and a text's length against
their mean (archive/searchrank.py). `texts` indexes every text a page ever had, so after a
few runs a word that was rare in older texts would weigh differently in the app than in an
export of the same pages, which holds only the newest. Ranking among the newest texts
makes a page's score depend on the site as it is now, not on how often it was crawled or
what a prune kept: the app, `mirror search`, `mirror serve` and an export's search.js then
rank with the same numbers. (The other way, an export carrying the statistics of every
text, cannot be exact: a prefix query's count of texts is a union over words, which needs
every old text's words, and grows with every run.) A search of one run, or of every
version, still ranks among every text (`texts`).

Every write to latest_texts goes through `set_newest` and `renew`, which note in
`latest_changes` the texts whose standing may have changed (the URL's text before and
after); `sync` looks at those alone, so bringing the index in step costs what changed since
the last time, not the size of the site. `latest_index_rows` lists the texts in the index
(an external-content FTS5 table cannot list its own rows); meta 'latest_indexed' holds the
`texts_indexed` mark it was brought in step with: a reader trusts the index only when the
two marks agree. A manifest whose marks disagree when a writer syncs (written by an older
mirror, which knows nothing of the index) gets the index made again from latest_texts.
"""

from __future__ import annotations

from collections.abc import Iterable

from mirror.manifest.db import SqlDb

TABLE = "latest_index"
MARK = "latest_indexed"

_SET_MARK = ("INSERT INTO meta VALUES (?, ?) "
             "ON CONFLICT(key) DO UPDATE SET value=excluded.value")
_NOTE = "INSERT INTO latest_changes (text_id) VALUES (?) ON CONFLICT DO NOTHING"
_LISTED = "EXISTS (SELECT 1 FROM latest_index_rows r WHERE r.text_id = c.text_id)"
_NEWEST = "EXISTS (SELECT 1 FROM latest_texts l WHERE l.text_id = c.text_id)"
#: of the changed texts up to a mark: those the index holds that no URL's newest capture
#: has any more, and those some URL's newest capture has that the index lacks
_GONE = f"SELECT text_id FROM latest_changes c WHERE text_id <= ? AND {_LISTED} AND NOT {_NEWEST}"
_NEW = (f"SELECT text_id FROM latest_changes c WHERE text_id <= ? AND NOT {_LISTED} "
        f"AND {_NEWEST} ORDER BY text_id")
#: a changed text up to a mark that is still kept but is no URL's newest any more
_SUPERSEDED = ("SELECT 1 FROM latest_changes c WHERE text_id <= ? AND NOT " + _NEWEST
               + " AND EXISTS (SELECT 1 FROM page_texts p WHERE p.id = c.text_id) LIMIT 1")
_ADD = f"INSERT INTO {TABLE} (rowid, title, body) SELECT id, title, body FROM page_texts "
_REMOVE = (f"INSERT INTO {TABLE} ({TABLE}, rowid, title, body) "
           "SELECT 'delete', id, title, body FROM page_texts WHERE id=?")


def set_newest(sql: SqlDb, url_id: int, capture_id: int | None, text_id: int) -> None:
    """A URL's capture `capture_id` has text `text_id`: its newest text, unless the URL has
    a newer capture with a text."""
    before = sql.execute("SELECT text_id FROM latest_texts WHERE url_id=?",
                         (url_id,)).fetchone()
    sql.execute(
        "INSERT INTO latest_texts (url_id, capture_id, text_id) VALUES (?, ?, ?) "
        "ON CONFLICT(url_id) DO UPDATE SET capture_id=excluded.capture_id, "
        "text_id=excluded.text_id WHERE excluded.capture_id > latest_texts.capture_id",
        (url_id, capture_id, text_id))
    if before is None or before[0] != text_id:
        _note(sql, (text_id,) if before is None else (text_id, before[0]))


def renew(sql: SqlDb, url_ids: Iterable[int]) -> None:
    """latest_texts again for these URLs, from their captures (after captures went)."""
    for url_id in url_ids:
        _note(sql, [t for (t,) in sql.execute(
            "DELETE FROM latest_texts WHERE url_id=? RETURNING text_id", (url_id,))])
        _note(sql, [t for (t,) in sql.execute(
            "INSERT INTO latest_texts (url_id, capture_id, text_id) "
            "SELECT url_id, id, text_id FROM captures WHERE url_id=? AND text_id IS NOT "
            "NULL ORDER BY id DESC LIMIT 1 RETURNING text_id", (url_id,))])


def _note(sql: SqlDb, text_ids: Iterable[int]) -> None:
    if sql.dialect == "sqlite":  # (PostgreSQL has no full-text index to keep in step)
        sql.executemany(_NOTE, [(t,) for t in text_ids])


def sync(sql: SqlDb, before: int, indexed: int, *, build: bool = True) -> None:
    """Bring the index to the texts latest_texts names, inside the caller's transaction,
    while page_texts still has the rows of those that go (FTS5 deletes with the values it
    indexed). `before` and `indexed` are the `texts_indexed` marks before and after the
    caller's transaction: texts after `indexed` wait, as they wait for `texts`.

    While every indexed text is some URL's newest (one run, or runs that changed no page),
    `texts` is that index: the mark says so ('=' and the mark) and nothing is indexed twice.
    Once a text is no URL's newest, or when the index is not in step with `before`, it is
    made (with `build`: at the end of a run) and kept in step with each change after."""
    mark = sql.execute("SELECT value FROM meta WHERE key=?", (MARK,)).fetchone()
    value = mark[0] if mark else "=0" if before == 0 else ""
    if value == str(before):
        _follow(sql, indexed)
        value = str(indexed)
    elif value == f"={before}" and not sql.execute(_SUPERSEDED, (indexed,)).fetchone():
        value = f"={indexed}"
    elif build:
        _empty(sql)
        sql.execute(f"{_ADD} WHERE id IN (SELECT text_id FROM latest_texts WHERE "
                    "text_id <= ?) ORDER BY id", (indexed,))
        sql.execute("INSERT INTO latest_index_rows (text_id) SELECT DISTINCT text_id "
                    "FROM latest_texts WHERE text_id <= ?", (indexed,))
        value = str(indexed)
    else:
        value = ""
    sql.execute("DELETE FROM latest_changes WHERE text_id <= ?", (indexed,))
    if value:
        sql.execute(_SET_MARK, (MARK, value))
    else:  # out of step: a reader ranks among every text until the index is made
        sql.execute("DELETE FROM meta WHERE key=?", (MARK,))


def _follow(sql: SqlDb, indexed: int) -> None:
    """The index in step again with the changed texts up to `indexed`."""
    for (text_id,) in sql.execute(_GONE, (indexed,)).fetchall():
        drop(sql, text_id)
    new = sql.execute(_NEW, (indexed,)).fetchall()
    for (text_id,) in new:
        sql.execute(f"{_ADD} WHERE id=?", (text_id,))
    sql.executemany("INSERT INTO latest_index_rows (text_id) VALUES (?)", new)


def drop(sql: SqlDb, text_id: int) -> None:
    """Take a text out of the index, if it is there (before its page_texts row goes)."""
    if sql.execute("DELETE FROM latest_index_rows WHERE text_id=? RETURNING text_id",
                   (text_id,)).fetchall():
        sql.execute(_REMOVE, (text_id,))


def clear(sql: SqlDb) -> None:
    """Empty the index (every page text is forgotten, or it is made again), inside the
    caller's transaction."""
    _empty(sql)
    sql.execute("DELETE FROM latest_changes")
    sql.execute("DELETE FROM meta WHERE key=?", (MARK,))


def _empty(sql: SqlDb) -> None:
    sql.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")
    sql.execute("DELETE FROM latest_index_rows")


def in_step(sql: SqlDb) -> bool:
    """Whether the index holds the newest texts as `texts` has them indexed."""
    marks = dict(sql.execute("SELECT key, value FROM meta WHERE key IN (?, ?)",
                             (MARK, "texts_indexed")).fetchall())
    return MARK in marks and marks[MARK] == marks.get("texts_indexed", "0")
