"""The index of the newest texts (manifest/latestindex.py) is brought in step with what
changed only; after every kind of change it must equal an index made from scratch of each
URL's newest text, as the captures say, word for word and position for position."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.manifest import latestindex
from mirror.manifest import texts as texts_module
from mirror.manifest.writer import Manifest
from mirror.model import CaptureRow, NewUrl, PageText

H = "http://h.test/"
#: each URL's newest text, from the captures alone
NEWEST = ("SELECT DISTINCT text_id FROM captures c WHERE text_id IS NOT NULL AND id = "
          "(SELECT MAX(id) FROM captures d WHERE d.url_id = c.url_id AND d.text_id IS NOT NULL)")


def crawl(m: Manifest, pages: dict[str, str | int]) -> tuple[int, dict[str, int]]:
    """A run that captures each page: with a text (str), or as a revisit of the capture
    with that id (int), which shares its text. Its id, and each page's capture id."""
    run = m.runs.start("2026-01-01T00:00:00Z", "cfg")
    m.urls.add(run, None, [NewUrl(H + p, "h.test", 1, 10, "page", "link", "link", None)
                           for p in pages])
    ids = {}
    for page, what in pages.items():
        n = m.db.execute("SELECT COUNT(*) FROM captures").fetchone()[0] + 1
        item = m.urls.item_for(run, H + page)
        assert item is not None
        cap = CaptureRow("2026-01-01T00:00:00Z", f"<urn:uuid:{run}-{page}>", f"r{run}.warc.gz",
                         n * 100, 50, n * 100 + 50, 50, 200, "text/html", f"sha1:{what}", 10,
                         None, None, None, None, *(("revisit", what) if isinstance(what, int)
                                                   else ("response", None)))
        m.captures.commit(run, item, cap, [], text=None if isinstance(what, int)
                         else PageText(page, what))
        ids[page] = m.db.execute("SELECT MAX(id) FROM captures").fetchone()[0]
    m.runs.finish(run, "2026-01-01T01:00:00Z", "complete", 0)
    return run, ids


def assert_in_step(m: Manifest, *, every_text_newest: bool = False) -> None:
    """latest_index holds exactly the newest texts, as FTS5 would index them afresh; or,
    `every_text_newest`, it is empty and its mark says that `texts` is that index."""
    db = m.db
    newest = {t for (t,) in db.execute(NEWEST)}
    mark = db.execute("SELECT value FROM meta WHERE key=?", (latestindex.MARK,)).fetchone()
    if every_text_newest:
        assert newest == {t for (t,) in db.execute("SELECT id FROM page_texts")}
        assert mark == (f"={m.texts.texts_indexed()}",) and not latestindex.in_step(m.sql)
        assert db.execute("SELECT COUNT(*) FROM latest_index_rows").fetchone()[0] == 0
        return
    assert {t for (t,) in db.execute("SELECT text_id FROM latest_index_rows")} == newest
    assert latestindex.in_step(m.sql)
    db.execute("DROP TABLE IF EXISTS temp.fresh")
    db.execute("CREATE VIRTUAL TABLE temp.fresh USING fts5(title, body, "
               "tokenize = 'unicode61 remove_diacritics 2')")
    db.execute(f"INSERT INTO temp.fresh (rowid, title, body) SELECT id, title, body "
               f"FROM page_texts WHERE id IN ({NEWEST})")
    words = []
    for schema, table in (("main", "latest_index"), ("temp", "fresh")):
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_{table} USING "
                   f"fts5vocab({schema}, {table}, instance)")
        words.append(sorted(db.execute(f"SELECT * FROM temp.v_{table}")))
    assert words[0] == words[1] and words[0]
    db.execute("INSERT INTO latest_index (latest_index, rank) VALUES ('integrity-check', 0)")


def words(m: Manifest) -> set[str]:
    return {w for (w,) in m.db.execute("SELECT term FROM temp.v_latest_index")}


def test_the_index_of_the_newest_texts_equals_one_made_afresh_after_every_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(texts_module, "TEXT_BATCH", 2)  # syncs in the middle of runs
    m = Manifest(tmp_path / "manifest.sqlite3")
    try:
        # new pages; "twin" shares "shared"'s text (a revisit of another URL's capture)
        _, one = crawl(m, {"same": "alpha stays", "edit": "bravo old", "back": "charlie first",
                           "shared": "delta both", "gone": "echo only once"})
        _, two = crawl(m, {"twin": one["shared"]})
        assert_in_step(m, every_text_newest=True)  # so `texts` serves, nothing twice
        # a page changed (its old text leaves; the index is made at the end of the run),
        # one unchanged, one of two sharing a text changes (it stays: the other URL has it)
        crawl(m, {"same": one["same"], "edit": "bravo new", "back": "charlie second",
                  "shared": "foxtrot own"})
        assert_in_step(m)
        assert {"bravo", "new", "foxtrot", "delta"} <= words(m)
        assert not {"old", "first"} & words(m)
        # a revisit of an older capture: that older text is the newest again
        run4, _ = crawl(m, {"back": one["back"], "twin": "golf alone"})
        assert_in_step(m)
        assert "first" in words(m) and not {"second", "delta"} & words(m)
        # a capture cut from its WARC file: the URL's text before it is the newest again
        m.captures.rollback_past(run4, "r4.warc.gz", 0)
        assert_in_step(m)
        assert {"second", "delta"} <= words(m) and "golf" not in words(m)
        # a prune of the first run: "gone" has no capture left; texts others refer to stay
        m.prune.drop_runs([1], [], "{}")
        assert_in_step(m)
        assert not {"echo"} & words(m) and {"alpha", "charlie", "delta"} <= words(m)
        # an index out of step (as an older mirror leaves it) is made again at the next sync
        m.db.execute("DELETE FROM meta WHERE key=?", (latestindex.MARK,))
        crawl(m, {"new": "hotel late"})
        assert_in_step(m)
        assert m.db.execute("SELECT COUNT(*) FROM latest_changes").fetchone()[0] == 0
    finally:
        m.close()
