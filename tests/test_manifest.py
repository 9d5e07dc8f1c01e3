"""The manifest's seen-check: URLs it remembers as already in the run, and what must
still reach the database (rolled-back inserts, skipped URLs that become allowed, new runs)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mirror.manifest.reader import ManifestReader
from mirror.manifest.schema import SCHEMA_VERSION
from mirror.manifest.writer import Manifest, ManifestWriteError
from mirror.model import CaptureRow, NewUrl, UrlItem

A, B, C = "http://h.test/a", "http://h.test/b", "http://h.test/c"


def new(url: str, skip: str | None = None) -> NewUrl:
    return NewUrl(url, "h.test", 1, 10, "" if skip else "page", "link", "link", skip)


def capture(n: int) -> CaptureRow:
    return CaptureRow("2026-01-01T00:00:00Z", f"<urn:uuid:{n}>", "f.warc.gz", n * 100, 50,
                      n * 100 + 50, 50, 200, "text/html", f"sha1:{n}", 10, None, None, None,
                      None)


@pytest.fixture
def manifest(tmp_path: Path) -> Manifest:
    m = Manifest(tmp_path / "manifest.sqlite3")
    yield m
    m.close()


def rows(m: Manifest) -> dict[str, tuple[int, str]]:
    return {url: (run, state) for url, run, state in
            m.db.execute("SELECT url, run_id, state FROM urls")}


def links(m: Manifest) -> set[tuple[str, str]]:
    return set(m.db.execute(
        "SELECT s.url, d.url FROM links JOIN urls s ON s.id=src JOIN urls d ON d.id=dst"))


def item(m: Manifest, run: int, url: str) -> UrlItem:
    found = m.urls.item_for(run, url)
    assert found is not None
    return found


def test_each_page_records_its_links_to_urls_already_seen(manifest: Manifest) -> None:
    run = manifest.runs.start("t", "d")
    manifest.urls.add(run, None, [new(A)])
    manifest.captures.commit(run, item(manifest, run, A), capture(1), [new(B), new(C)])
    manifest.captures.commit(run, item(manifest, run, B), capture(2), [new(A), new(C)])
    manifest.captures.commit(run, item(manifest, run, C), capture(3), [new(A), new(B)])
    assert links(manifest) == {(A, B), (A, C), (B, A), (B, C), (C, A), (C, B)}
    assert rows(manifest) == {A: (run, "done"), B: (run, "done"), C: (run, "done")}


def test_urls_of_a_rolled_back_commit_are_inserted_when_found_again(
        manifest: Manifest) -> None:
    run = manifest.runs.start("t", "d")
    manifest.urls.add(run, None, [new(A)])
    page = item(manifest, run, A)
    manifest.db.execute("CREATE TRIGGER fail BEFORE INSERT ON links "
                        "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises((ManifestWriteError, sqlite3.Error)):
        manifest.captures.commit(run, page, capture(1), [new(B)])
    assert B not in rows(manifest)
    manifest.db.execute("DROP TRIGGER fail")
    manifest.urls.add(run, None, [new(B)])
    assert rows(manifest)[B] == (run, "pending")


def test_a_skipped_url_found_again_as_allowed_becomes_pending(manifest: Manifest) -> None:
    run = manifest.runs.start("t", "d")
    manifest.urls.add(run, None, [new(A, skip="max_depth")])
    assert rows(manifest)[A] == (run, "skipped")
    manifest.urls.add(run, None, [new(A)])
    assert rows(manifest)[A] == (run, "pending")
    # skipped at fetch time (robots.txt), then linked again: allowed once more
    manifest.urls.skip(run, item(manifest, run, A), "robots")
    assert rows(manifest)[A] == (run, "skipped")
    manifest.urls.add(run, None, [new(A)])
    assert rows(manifest)[A] == (run, "pending")


def test_the_next_run_discovers_every_url_again(manifest: Manifest) -> None:
    first = manifest.runs.start("t", "d")
    manifest.urls.add(first, None, [new(A), new(B)])
    manifest.runs.finish(first, "t", "complete", 0)
    second = manifest.runs.start("t2", "d")
    manifest.urls.add(second, None, [new(A), new(B)])
    assert rows(manifest) == {A: (second, "pending"), B: (second, "pending")}


def test_a_reopened_manifest_still_records_links_to_known_urls(tmp_path: Path) -> None:
    m = Manifest(tmp_path / "manifest.sqlite3")
    run = m.runs.start("t", "d")
    m.urls.add(run, None, [new(A), new(B)])
    m.close()
    m = Manifest(tmp_path / "manifest.sqlite3")  # a resumed run remembers nothing yet
    m.captures.commit(run, item(m, run, A), capture(1), [new(B), new(C)])
    assert links(m) == {(A, B), (A, C)}
    assert rows(m)[B] == (run, "pending") and rows(m)[C] == (run, "pending")
    m.close()


def test_a_transaction_that_cannot_begin_is_a_write_error(manifest: Manifest) -> None:
    run = manifest.runs.start("t", "d")
    manifest.db.execute("PRAGMA query_only = ON")  # BEGIN IMMEDIATE now fails
    with pytest.raises(ManifestWriteError, match="readonly"):
        manifest.urls.add(run, None, [new(A)])
    manifest.db.execute("PRAGMA query_only = OFF")
    manifest.urls.add(run, None, [new(A)])  # nothing was staged by the failed one
    assert rows(manifest) == {A: (run, "pending")}


def test_page_texts_reach_the_search_index_in_batches_and_none_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text is committed with its capture; the full-text index takes texts in batches
    (TEXT_BATCH), at the end of a run, and when a writer opens a manifest a killed process
    left with texts it had not indexed; a capture rolled back takes its text out of both."""
    from mirror.manifest import texts as texts_module
    from mirror.model import PageText

    monkeypatch.setattr(texts_module, "TEXT_BATCH", 3)
    path = tmp_path / "manifest.sqlite3"
    m = Manifest(path)
    run = m.runs.start("2026-01-01T00:00:00Z", "cfg")
    urls = [f"http://h.test/{n}" for n in range(1, 6)]
    m.urls.add(run, None, [new(u) for u in urls])
    for n, url in enumerate(urls, 1):
        m.captures.commit(run, item(m, run, url), capture(n), [],
                         text=PageText(f"Page {n}", f"word{n} common"))
    assert len(m.texts.search("common")) == 3 and m.texts.unindexed_pages() == 2  # one batch so far
    m.close()  # as if killed: the last two are committed, not indexed
    m = Manifest(path)
    try:
        assert m.texts.unindexed_pages() == 2
        m.runs.resume(run)  # the run taken up again indexes them first
        assert len(m.texts.search("common")) == 5 and m.texts.unindexed_pages() == 0
        assert m.captures.rollback_past(run, "f.warc.gz", 450) == urls[3:]  # captures 4 and 5 cut
        assert [h.title for h in m.texts.search("common")] == ["Page 1", "Page 2", "Page 3"]
        assert m.texts.search("word5") == [] and m.texts.page_text(5) is None
        assert m.db.execute("SELECT COUNT(*) FROM page_texts").fetchone()[0] == 3
        m.db.execute("INSERT INTO texts (texts, rank) VALUES ('integrity-check', 1)")
        m.captures.commit(run, item(m, run, urls[3]), capture(6), [],
                         text=PageText("Page 4 again", "word4 common"))
        m.runs.finish(run, "2026-01-01T01:00:00Z", "complete", 0)  # indexes the rest
        assert {h.title for h in m.texts.search("common")} == {"Page 1", "Page 2", "Page 3",
                                                         "Page 4 again"}
        m.db.execute("INSERT INTO texts (texts, rank) VALUES ('integrity-check', 1)")
    finally:
        m.close()


def _texts(tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    """A manifest with n pages, each with a text that holds "common"."""
    from mirror.model import PageText

    path = tmp_path / "manifest.sqlite3"
    m = Manifest(path)
    run = m.runs.start("2026-01-01T00:00:00Z", "cfg")
    urls = [f"http://h.test/{k}" for k in range(1, n + 1)]
    m.urls.add(run, None, [new(u) for u in urls])
    for k, url in enumerate(urls, 1):
        m.captures.commit(run, item(m, run, url), capture(k), [],
                         text=PageText(f"Page {k}", f"bridges{k} common"))
    m.runs.finish(run, "2026-01-01T01:00:00Z", "complete", 0)
    m.close()
    return path, urls


def test_a_search_that_matches_more_than_it_ranks_ranks_the_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RANKED_AT_MOST bounds bm25's work: past it, the newest matches are ranked; under
    it every match is. A query matching few texts is unaffected."""
    from mirror.manifest import texts as manifest_text

    path, _ = _texts(tmp_path, 6)
    m = ManifestReader(path)
    try:
        assert len(m.texts.search("common")) == 6
        monkeypatch.setattr(manifest_text, "RANKED_AT_MOST", 4)
        assert sorted(h.title for h in m.texts.search("common")) \
            == [f"Page {k}" for k in (3, 4, 5, 6)]
        assert [h.title for h in m.texts.search("bridges1")] == ["Page 1"]  # one match: found
        assert len(m.texts.search("bri*")) == 4
    finally:
        m.close()


@pytest.mark.parametrize("made_with", ["schema 4", "a prefix index"])
def test_an_older_full_text_index_is_kept_as_it_is_and_searched_alike(
        tmp_path: Path, made_with: str) -> None:
    """A new manifest's full-text index has no prefix index (SCHEMA says why). One made by
    schema 4, or with the prefix index schema 5 had, is neither rebuilt nor dropped: a reader
    and the writer find the same in it, and the writer adds new texts to it as it is."""
    from mirror.model import PageText

    path, urls = _texts(tmp_path, 5)
    with closing(sqlite3.connect(path)) as db:
        ddl = db.execute("SELECT sql FROM sqlite_master WHERE name='texts'").fetchone()[0]
    assert "prefix" not in ddl
    options = ", prefix = '3'" if made_with == "a prefix index" else ""
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("DROP TABLE texts")
        db.execute("CREATE VIRTUAL TABLE texts USING fts5(title, body, content = "
                   "'page_texts', content_rowid = 'id', tokenize = 'unicode61 "
                   f"remove_diacritics 2'{options})")
        db.execute("INSERT INTO texts (texts) VALUES ('rebuild')")
        if made_with == "schema 4":
            db.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
        old = db.execute("SELECT sql FROM sqlite_master WHERE name='texts'").fetchone()[0]
    reader = ManifestReader(path)
    try:
        assert len(reader.texts.search("bri*")) == 5 \
            and len(reader.texts.search('"bridges3 common"')) == 1
    finally:
        reader.close()
    m = Manifest(path)
    try:
        assert m.db.execute("SELECT sql FROM sqlite_master WHERE name='texts'"
                            ).fetchone()[0] == old
        assert m.db.execute("SELECT value FROM meta WHERE key='schema_version'"
                            ).fetchone() == (str(SCHEMA_VERSION),)  # brought up to date
        assert len(m.texts.search("bri*")) == 5 and len(m.texts.search("common")) == 5
        run = m.runs.start("2026-01-02T00:00:00Z", "cfg")
        m.urls.add(run, None, [new(urls[0])])
        m.captures.commit(run, item(m, run, urls[0]), capture(9), [],
                         text=PageText("Page 1 again", "bridgework common"))
        m.runs.finish(run, "2026-01-02T01:00:00Z", "complete", 0)
        assert m.texts.unindexed_pages() == 0
        assert {h.title for h in m.texts.search("bridgew*")} == {"Page 1 again"}
        m.db.execute("INSERT INTO texts (texts, rank) VALUES ('integrity-check', 1)")
    finally:
        m.close()
