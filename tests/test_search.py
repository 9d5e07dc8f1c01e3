"""Full-text search (issue 14): text kept at crawl time with its capture, ranked search with
snippets, FTS5 syntax and its errors, runs, revisits sharing a text, `mirror index --search`."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import RunClock, crawl_twice

from mirror.cli.main import main
from mirror.manifest.reader import ManifestReader
from mirror.manifest.texts import SearchError, marked

#: a generated site: each page's words are known, so every answer below is exact
PAGES = {
    "": ("Home of the garden", "Welcome. See <a href='/tomatoes'>tomatoes</a>, "
         "<a href='/beans'>beans</a>, <a href='/compost'>compost</a>, "
         "<a href='/archive'>the archive</a> and <a href='/copy'>a copy</a>."),
    "tomatoes": ("Tomatoes", "Blight came early this year. The tomatoes were saved by "
                 "copper spray and patience."),
    "beans": ("Runner beans", "Beans climb the poles; a tomato grew beside them by "
              "accident, and one blight spot showed."),
    "compost": ("Compost heap", "Turn the heap monthly. Nettles, comfrey and "
                "grass clippings rot fastest."),
    "archive": ("Old notes", "Notes kept since 1947 about the allotment."),
    "copy": ("Tomatoes", "Blight came early this year. The tomatoes were saved by "
             "copper spray and patience."),  # the same bytes as /tomatoes: a revisit
}
HIDDEN = "<script>var zebraword = 1;</script><style>.quagga{}</style><template>yeti</template>"


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><title>{title}</title>{HIDDEN}</head>"
            f"<body><nav><a href='/'>Home</a><a href='/beans'>Beans</a></nav>"
            f"<p>{body}</p></body></html>")


def serve_pages(site, pages: dict[str, tuple[str, str]]) -> None:  # noqa: ANN001
    for path, (title, body) in pages.items():
        site.page("/" + path, page(title, body))


def reader(archive: Path) -> ManifestReader:
    return ManifestReader(archive / "manifest.sqlite3")


def search(archive: Path, query: str, **kw) -> list:  # noqa: ANN003
    m = reader(archive)
    try:
        return m.texts.search(query, **kw)
    finally:
        m.close()


async def two_runs(make_site, crawl, compost: str):  # noqa: ANN001, ANN201
    """The site crawled twice, /compost saying `compost` in run 2; the second Crawl."""
    site = await make_site()
    _, second = await crawl_twice(
        crawl, site.base, lambda: serve_pages(site, PAGES),
        lambda: serve_pages(site, {**PAGES, "compost": ("Compost heap", compost)}))
    return site, second


def paths(hits: list, base: str) -> list[str]:
    return [h.url.removeprefix(base) for h in hits]


async def test_search_ranks_titles_first_and_marks_the_words(make_site, crawl) -> None:
    site = await make_site()
    serve_pages(site, PAGES)
    done = await crawl([site.base])
    archive = done.archive
    # one word: both pages that say it; the one whose title says it too ranks first
    hits = search(archive, "tomatoes")
    assert paths(hits, site.base)[:2] in (["tomatoes", "copy"], ["copy", "tomatoes"])
    assert set(paths(hits, site.base)) == {"tomatoes", "copy", ""}  # home links to it
    best = hits[0]
    assert best.title == "Tomatoes" and best.title_marks == ((0, 8),)
    assert [best.snippet[a:b] for a, b in best.marks] == ["tomatoes"]
    assert best.status == 200 and best.run_id == 1 and best.score > 0
    # a body-only match ranks below title matches; words are ANDed
    assert paths(search(archive, "blight"), site.base) in (
        ["tomatoes", "copy", "beans"], ["copy", "tomatoes", "beans"])
    assert paths(search(archive, "blight poles"), site.base) == ["beans"]
    # phrase, prefix, OR, NOT, accents folded, case ignored
    assert paths(search(archive, '"copper spray"'), site.base) in (
        ["tomatoes", "copy"], ["copy", "tomatoes"])
    assert paths(search(archive, '"spray copper"'), site.base) == []
    assert sorted(paths(search(archive, "compo*"), site.base)) == ["", "compost"]
    assert sorted(paths(search(archive, "nettles OR poles"), site.base)) == ["beans",
                                                                               "compost"]
    assert paths(search(archive, "blight NOT poles"), site.base) in (
        ["tomatoes", "copy"], ["copy", "tomatoes"])
    assert paths(search(archive, "COMFRÉY"), site.base) == ["compost"]
    # what a page does not show is not indexed: scripts, styles, templates
    assert search(archive, "zebraword OR quagga OR yeti") == []
    # menus of links do not glue their words together
    assert "beans" in paths(search(archive, "home beans"), site.base)


async def test_a_malformed_query_is_a_clear_error(make_site, crawl, capsys) -> None:
    site = await make_site()
    serve_pages(site, PAGES)
    done = await crawl([site.base])
    for query, why in (('"unbalanced', "unterminated string"),
                       ("tomatoes AND", "syntax error"),
                       ("title:x OR foo:bar", "no such column: foo")):
        with pytest.raises(SearchError, match=why):
            search(done.archive, query)
    config = str(done.root / "site.toml")
    assert main(["search", config, '"unbalanced']) == 2
    err = capsys.readouterr().err
    assert "cannot search for '\"unbalanced': unterminated string" in err
    assert '"a phrase", prefix*, OR, NOT' in err


async def test_runs_revisits_and_the_newest_capture(make_site, crawl) -> None:
    site, done = await two_runs(make_site, crawl, "Turn the heap weekly now. Marigolds "
                                                  "keep the slugs away.")
    archive = done.archive
    # by default: each page's newest capture
    assert search(archive, "monthly") == []
    [hit] = search(archive, "marigolds")
    assert hit.run_id == 2 and hit.url == site.base + "compost"
    # one run, or every version
    assert paths(search(archive, "monthly", run_id=1), site.base) == ["compost"]
    assert search(archive, "marigolds", run_id=1) == []
    both = search(archive, "heap", all_runs=True)
    assert sorted((h.run_id, h.captures) for h in both) == [(1, 1), (2, 1)]
    [unchanged] = search(archive, "accident", all_runs=True)
    assert unchanged.url == site.base + "beans" and unchanged.captures == 2  # run 2 revisits
    # a revisit shares its original's text: five texts for six pages, then one more changed
    with closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        texts = db.execute("SELECT COUNT(*) FROM page_texts").fetchone()[0]
        shared = db.execute("SELECT COUNT(*) FROM captures WHERE text_id IS NOT NULL "
                            "AND record_type != 'response'").fetchone()[0]
    assert texts == 5 + 1 and shared == 1 + 6 - 1  # /copy in run 1; all but compost in run 2
    m = reader(archive)
    try:
        history = m.texts.page_history(site.base + "compost")
        assert [(c.run_id, c.changed) for c in history] == [(1, True), (2, True)]
        assert [(c.run_id, c.changed) for c in m.texts.page_history(site.base + "beans")] == [
            (1, True), (2, False)]
        text = m.texts.page_text(history[1].capture_id)
        assert text is not None and text.title == "Compost heap"
        assert text.body == "Home Beans\nTurn the heap weekly now. Marigolds keep the slugs away."
    finally:
        m.close()


async def test_cli_search_plain_and_json(make_site, crawl, capsys) -> None:
    site = await make_site()
    serve_pages(site, PAGES)
    done = await crawl([site.base])
    config = str(done.root / "site.toml")
    assert main(["search", config, "nettles"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("  1. Compost heap\n") and f"{site.base}compost" in out
    assert "Turn the heap monthly. Nettles, comfrey" in out and "run 1" in out
    assert main(["search", config, "blight", "--json", "--limit", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 and {x["title"] for x in lines} == {"Tomatoes"}
    assert all(x["snippet"][a:b].lower() == "blight" for x in lines for a, b in x["marks"])
    assert main(["search", config, "zzzunknown"]) == 0
    assert capsys.readouterr().out == "nothing found for 'zzzunknown'\n"
    assert main(["search", config, "x", "--run", "9"]) == 2
    assert "--run 9: no such run" in capsys.readouterr().err


async def test_index_search_rebuilds_from_the_warc_files(make_site, crawl, capsys) -> None:
    """An archive made before the text index (no texts) gets the same one from its WARCs."""
    site = await make_site()
    serve_pages(site, PAGES)
    clock = RunClock()
    await crawl([site.base], clock=clock)
    clock.next_run()
    done = await crawl([site.base], clock=clock)
    archive, config = done.archive, str(done.root / "site.toml")
    want = {(h.url, h.run_id, h.snippet) for h in search(archive, "the", all_runs=True)}
    before = dump_texts(archive)
    with closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        db.execute("UPDATE captures SET text_id=NULL")  # as schema 2 left them
        db.execute("INSERT INTO texts (texts) VALUES ('delete-all')")
        db.execute("DELETE FROM page_texts")
        db.execute("DELETE FROM latest_texts")
        db.execute("DELETE FROM meta WHERE key='texts_indexed'")
        db.commit()
    assert search(archive, "tomatoes") == []
    m = reader(archive)
    assert m.texts.unindexed_pages() == 5  # the responses: /copy and run 2 are revisits
    m.close()
    assert main(["search", config, "tomatoes"]) == 0
    assert "`mirror index --search" in capsys.readouterr().err
    assert main(["index", "--search", config]) == 0
    assert "indexed the text of 12 page captures" in capsys.readouterr().out
    assert dump_texts(archive) == before
    assert {(h.url, h.run_id, h.snippet) for h in search(archive, "the", all_runs=True)} == want
    done.assert_verifies()


def dump_texts(archive: Path) -> list[tuple]:
    with closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        return db.execute(
            "SELECT c.id, c.url, t.title, t.body, l.capture_id FROM captures c "
            "JOIN page_texts t ON t.id = c.text_id LEFT JOIN latest_texts l "
            "ON l.capture_id = c.id ORDER BY c.id").fetchall()


def test_marked_turns_fts_marks_into_spans() -> None:
    assert marked("a \x02big\x03 \x02dog\x03") == ("a big dog", ((2, 5), (6, 9)))
    assert marked("no marks") == ("no marks", ())
    assert marked("\x02\x03x") == ("x", ())


async def test_diff_page_prints_the_changed_words(make_site, crawl, capsys) -> None:
    site, done = await two_runs(make_site, crawl, "Turn the heap weekly. Nettles, comfrey "
                                                  "and grass clippings rot fastest.")
    config = str(done.root / "site.toml")
    assert main(["diff", config, "1", "2", "--page", site.base + "compost"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == site.base + "compost" and out[3] == "  1 words added, 1 removed"
    assert out[4:] == ["…", "Home Beans", "Turn the heap [-monthly.-]{+weekly.+} Nettles, "
                                          "comfrey and grass clippings rot fastest."]
    assert main(["diff", config, "--page", site.base + "beans"]) == 0  # the last two runs
    assert capsys.readouterr().out.endswith("  0 words added, 0 removed\n")
    assert main(["diff", config, "1", "2", "--page", site.base + "nowhere"]) == 2
    assert "not captured in run 1 or before" in capsys.readouterr().err


def test_only_the_query_s_own_errors_are_search_errors() -> None:
    """A busy, failing or damaged database is not blamed on the query: FTS5's refusals are
    plain SQLITE_ERRORs, the others are not."""
    from mirror.manifest.texts import _is_query_error

    def error(message: str, code: int) -> sqlite3.OperationalError:
        exc = sqlite3.OperationalError(message)
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE texts USING fts5(title, body)")
    for query in ('"x', "x AND", "foo:bar", "*", "NEAR(a b, x)"):
        with pytest.raises(sqlite3.OperationalError) as caught:
            db.execute("SELECT * FROM texts WHERE texts MATCH ?", (query,))
        assert _is_query_error(caught.value), query
    assert not _is_query_error(error("database is locked", sqlite3.SQLITE_BUSY))
    assert not _is_query_error(error("disk I/O error", sqlite3.SQLITE_IOERR))
    assert not _is_query_error(error("no such table: texts", sqlite3.SQLITE_ERROR))


async def test_search_into_a_pipe_closed_early_ends_quietly(make_site, crawl) -> None:
    """`mirror search ... | head -1`: the reader leaves; no "internal error", exit 0."""
    import subprocess
    import sys

    site = await make_site()
    serve_pages(site, PAGES)
    done = await crawl([site.base])
    proc = subprocess.run(
        f"{sys.executable} -m mirror search {done.root / 'site.toml'} blight --limit 50 "
        "| head -c 1", shell=True, capture_output=True, text=True, timeout=60,
        executable="/bin/bash")
    assert proc.stdout == " " and proc.stderr == ""


def latest_index_state(archive: Path, word: str) -> tuple[set[int], set[int], int]:
    """(texts the index of the newest texts lists, texts latest_texts names, how many of
    the index's texts hold `word` as FTS5's bm25 counts them)."""
    with closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        listed = {r for (r,) in db.execute("SELECT text_id FROM latest_index_rows")}
        latest = {r for (r,) in db.execute("SELECT text_id FROM latest_texts")}
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, latest_index, row)")
        row = db.execute("SELECT doc FROM temp.v WHERE term=?", (word,)).fetchone()
    return listed, latest, row[0] if row else 0


async def test_the_index_of_the_newest_texts_follows_runs_and_prunes(make_site,
                                                                     crawl) -> None:
    """A search of the newest captures ranks among the newest texts only (latestindex.py):
    after run 2 the old /compost text has left that index; after run 1 is pruned, and
    after `mirror index --search`, which reads only run 2's texts again (every text is
    then a page's newest), `texts` serves as that index and it stays empty."""
    from mirror.manifest.writer import Manifest

    site, done = await two_runs(make_site, crawl, "Turn the heap weekly now.")
    archive = done.archive
    listed, latest, monthly = latest_index_state(archive, "monthly")
    assert listed == latest and len(latest) == 5 and monthly == 0  # run 1's word
    assert latest_index_state(archive, "heap")[2] == 1
    m = Manifest(archive / "manifest.sqlite3")
    try:
        m.prune.drop_runs([1], [], "{}")
    finally:
        m.close()
    listed, latest, weekly = latest_index_state(archive, "weekly")
    assert listed == latest and weekly == 1
    assert paths(search(archive, "heap"), site.base) == ["compost"]
    assert main(["index", "--search", str(done.root / "site.toml")]) == 0
    listed, latest, weekly = latest_index_state(archive, "weekly")
    assert listed == set() and len(latest) == 5 and weekly == 0
    with closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        assert db.execute("SELECT value FROM meta WHERE key='latest_indexed'").fetchone() \
            == db.execute("SELECT '=' || value FROM meta WHERE key='texts_indexed'").fetchone()
    assert paths(search(archive, "heap"), site.base) == ["compost"]
