"""searchrank: the one order of search results (issue 31). Its reference score is FTS5's
bm25 as the manifest asks for it, checked against SQLite itself; each page once."""

from __future__ import annotations

import sqlite3

import pytest

from mirror.archive.searchrank import (
    BODY_WEIGHT,
    TITLE_WEIGHT,
    Folded,
    Text,
    count_pages,
    fold,
    fold_key,
    ranked,
    score,
    token_count,
    tokens,
)

DOCS = [
    ("Walrus facts", "The walrus lives in the cold sea. A CRÈME brûlée, then a cafe\u0301."),
    ("Sea notes", "A walrus was seen near the old pier; walrus, walrus and the sea."),
    ("Home", "The index of things, with a link to walruses."),
    ("Rivers", "river rivers riverbank: 3 rivers and 12 lakes"),
    ("Nothing", "Nothing at all here and there " * 30),
]
QUERIES = [("walrus", ["walrus"]), ("walrus sea", ["walrus", "sea"]), ("creme", ["creme"]),
           ("river*", ["river*"]), ("the", ["the"]), ("CAFÉ", ["cafe"]), ("12", ["12"])]


def test_fold_key_keeps_scheme_host_and_path_only() -> None:
    assert fold_key("http://Example.org:8080/list?page=2#top") == "http://example.org:8080/list"
    assert fold_key("https://a.test/x?ref=related") == fold_key("https://a.test/x")
    assert fold_key("https://a.test") == "https://a.test/"
    assert fold_key("https://a.test/x") != fold_key("https://a.test/x/")
    assert fold_key("https://a.test:81/x") != fold_key("https://a.test:82/x")
    assert count_pages(["http://a/x?page=1", "http://a/x?page=2", "http://a/y"]) == 2


def test_fold_keeps_the_best_of_each_page_in_rank_order() -> None:
    hits = [("http://a/b?ref=related", 9.0), ("http://a/c", 7.0), ("http://a/b", 7.0),
            ("http://a/b?page=2", 8.0)]
    order = ranked(hits, lambda h: h[1], lambda h: h[0])
    assert [u for u, _ in order] == ["http://a/b?ref=related", "http://a/b?page=2",
                                    "http://a/b", "http://a/c"]  # ties by URL
    assert fold(order, lambda h: h[0]) == [
        Folded(("http://a/b?ref=related", 9.0), (("http://a/b?page=2", 8.0),
                                                  ("http://a/b", 7.0))),
        Folded(("http://a/c", 7.0))]


def test_tokens_are_words_lower_case_without_accents() -> None:
    assert tokens("A CRÈME brûlée, cafe\u0301 — l'Ångström x2 snake_case") == [
        "a", "creme", "brulee", "cafe", "l", "angstrom", "x2", "snake", "case"]
    for title, body in DOCS:
        assert token_count(title + " " + body) == len(tokens(title)) + len(tokens(body))


@pytest.mark.parametrize(("query", "terms"), QUERIES)
def test_the_reference_score_is_what_fts5_answers(query: str, terms: list[str]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(title, body, "
               "tokenize = 'unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO t VALUES (?, ?)", DOCS)
    corpus = [Text(tokens(title), tokens(body)) for title, body in DOCS]
    rows = db.execute(f"SELECT rowid, -bm25(t, {TITLE_WEIGHT}, {BODY_WEIGHT}) FROM t "
                      "WHERE t MATCH ? ORDER BY rank", (query,)).fetchall()
    db.close()
    assert rows
    for rowid, fts5 in rows:
        assert score(terms, corpus[rowid - 1], corpus) == pytest.approx(fts5, rel=1e-12)
    matched = {i + 1 for i, t in enumerate(corpus) if all(
        any(w == term or term.endswith("*") and w.startswith(term[:-1])
            for w in (*t.title, *t.body)) for term in terms)}
    assert {rowid for rowid, _ in rows} == matched
