"""The full-text index of the newest texts (`latest_index`): what a search of each page's
newest capture ranks among.

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

`latest_index_rows` lists the texts in the index (an external-content FTS5 table cannot
list its own rows); meta 'latest_indexed' holds the `texts_indexed` mark it was brought up
to date with: a reader trusts the index only when the two marks agree (a manifest written
by an older mirror has no mark, and its searches rank among every text, as before).
"""

from __future__ import annotations

from mirror.archive.sqldb import SqlDb

TABLE = "latest_index"
MARK = "latest_indexed"

_SET_MARK = ("INSERT INTO meta VALUES (?, ?) "
             "ON CONFLICT(key) DO UPDATE SET value=excluded.value")
#: texts the index holds that no URL's newest capture has any more
_GONE = ("SELECT text_id FROM latest_index_rows r WHERE NOT EXISTS "
         "(SELECT 1 FROM latest_texts l WHERE l.text_id = r.text_id)")
#: texts some URL's newest capture has that the index lacks
_NEW = ("SELECT DISTINCT text_id FROM latest_texts l WHERE text_id <= ? AND NOT EXISTS "
        "(SELECT 1 FROM latest_index_rows r WHERE r.text_id = l.text_id) ORDER BY text_id")


def sync(sql: SqlDb, indexed: int) -> None:
    """Bring the index to the texts latest_texts names, inside the caller's transaction,
    while page_texts still has the rows of those that go (FTS5 deletes with the values it
    indexed); `indexed` is the `texts_indexed` mark of the same transaction: texts after
    it wait, as they wait for `texts`."""
    for (text_id,) in sql.execute(_GONE).fetchall():
        sql.execute(f"INSERT INTO {TABLE} ({TABLE}, rowid, title, body) "
                    "SELECT 'delete', id, title, body FROM page_texts WHERE id=?", (text_id,))
        sql.execute("DELETE FROM latest_index_rows WHERE text_id=?", (text_id,))
    new = sql.execute(_NEW, (indexed,)).fetchall()
    for (text_id,) in new:
        sql.execute(f"INSERT INTO {TABLE} (rowid, title, body) "
                    "SELECT id, title, body FROM page_texts WHERE id=?", (text_id,))
    sql.executemany("INSERT INTO latest_index_rows (text_id) VALUES (?)", new)
    sql.execute(_SET_MARK, (MARK, str(indexed)))


def clear(sql: SqlDb) -> None:
    """Empty the index (every page text is forgotten), inside the caller's transaction."""
    sql.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")
    sql.execute("DELETE FROM latest_index_rows")
    sql.execute("DELETE FROM meta WHERE key=?", (MARK,))


def in_step(sql: SqlDb) -> bool:
    """Whether the index holds the newest texts as `texts` has them indexed."""
    marks = dict(sql.execute("SELECT key, value FROM meta WHERE key IN (?, ?)",
                             (MARK, "texts_indexed")).fetchall())
    return MARK in marks and marks[MARK] == marks.get("texts_indexed", "0")
