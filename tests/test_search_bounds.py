"""A search's cost does not grow with the pages that match (issue 36): the count stops at
searchpages.COUNTED_AT_MOST and says "at least", the variants of the pages shown are looked
up for them alone, whatever their rank, for words, prefixes and one run. A site crawled
from 127.0.0.1, searched in this process."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from uiproc import UiProcess, crawl, site_file

from mirror.archive.searchrank import fold_key
from mirror.manifest import searchpages
from mirror.manifest.reader import ManifestReader
from mirror.manifest.searchpages import best_pages
from mirror.replay.searchpage import SearchForm, SearchResults, search_html

#: pages saying walrus, the first ones most often (so they rank first)
NOTES = 30


def page(title: str, body: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<a href="{html.escape(u)}">link</a> ' for u in links)
    return (f"<html><head><title>{title}</title></head>"
            f"<body><p>{body}</p>{anchors}</body></html>")


def filler(n: int) -> str:
    return " ".join(["ice floe cold water"] * n)


@pytest.fixture
async def archive(make_site, crawl) -> Path:  # noqa: ANN001
    """Thirty notes, and a listing whose shown page ranks first for "walrus" while its
    variants rank last: one says it once in a long text, one is the last match by id."""
    site = await make_site()
    links = [f"/n{i}.html" for i in range(NOTES)] + ["/list", "/list?page=2",
                                                      "/list?page=3"]
    site.page("/", page("Home", "The index.", tuple(links)))
    for i in range(NOTES):
        site.page(f"/n{i}.html", page(f"Note {i}", "walrus " * (NOTES - i) + filler(3)))
    site.page("/list", page("Walrus walrus list", "walrus " * 40 + "mammoth"))
    site.page("/list?page=2", page("List two", "walrus " + filler(60)))
    site.page("/list?page=3", page("List three", "walrus " + filler(80)))
    done = await crawl([site.base], crawl={"workers": 1})
    return done.archive


@pytest.fixture
def reader(archive: Path) -> Iterator[ManifestReader]:
    m = ManifestReader(archive / "manifest.sqlite3")
    try:
        yield m
    finally:
        m.close()


@pytest.mark.parametrize("query", ["walrus", "walr*", "walrus OR zebra"])
def test_the_pages_shown_get_their_variants_however_low_they_rank(
        reader: ManifestReader, query: str) -> None:
    pages = best_pages(reader.texts, query, 3)
    assert len(pages.found) == 3
    first = pages.found[0]
    assert first.hit.url.endswith("/list")
    assert [u.rsplit("/", 1)[1] for u in first.variants] == ["list?page=2", "list?page=3"]
    ranked = reader.texts.search(query, limit=100)
    last = [h.url.rsplit("/", 1)[1] for h in ranked[-2:]]
    assert sorted(last) == ["list?page=2", "list?page=3"]  # they rank last indeed
    assert pages.total == NOTES + 1 and not pages.at_least  # the listing once
    assert all(not p.variants for p in pages.found[1:])


def test_the_variants_of_one_run(reader: ManifestReader) -> None:
    pages = best_pages(reader.texts, "walrus", 2, run_id=1)
    assert [u.rsplit("/", 1)[1] for u in pages.found[0].variants] == ["list?page=2",
                                                                       "list?page=3"]
    assert best_pages(reader.texts, "walrus", 2, run_id=2).found == []


def test_variants_that_do_not_match_are_left_out(reader: ManifestReader) -> None:
    """Only /list says mammoth: its variants match walrus, not the query."""
    pages = best_pages(reader.texts, "walrus AND mammoth", 5)
    assert [p.hit.url.rsplit("/", 1)[1] for p in pages.found] == ["list"]
    assert pages.found[0].variants == ()
    keys = [fold_key(pages.found[0].hit.url)]
    assert reader.texts.matching_variants("walrus AND mammoth", keys) == {keys[0]: [
        pages.found[0].hit.url]}
    assert reader.texts.matching_variants("walrus", []) == {}


def test_the_count_stops_and_says_at_least(reader: ManifestReader,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    exact = best_pages(reader.texts, "walrus", 5)
    monkeypatch.setattr(searchpages, "COUNTED_AT_MOST", 10)
    capped = best_pages(reader.texts, "walrus", 5)
    assert capped.at_least and 9 <= capped.total <= 10  # 10 URLs, the listing's may fold
    assert capped.found == exact.found  # the results do not depend on the count
    few = best_pages(reader.texts, "walrus AND mammoth", 5)
    assert (few.total, few.at_least) == (1, False)
    monkeypatch.setattr(searchpages, "COUNTED_AT_MOST", NOTES + 3)
    assert (best_pages(reader.texts, "walrus", 5).total, exact.total) == (NOTES + 1,) * 2


def test_more_hits_are_asked_for_when_variants_fold_them(
        reader: ManifestReader) -> None:
    """Asked for as many pages as there are, the variants folded leave fewer pages than
    hits: the search asks again until it has them all."""
    pages = best_pages(reader.texts, "walrus", NOTES + 1)
    assert len(pages.found) == NOTES + 1
    assert len({fold_key(p.hit.url) for p in pages.found}) == NOTES + 1


def test_the_replay_search_page_says_at_least(reader: ManifestReader) -> None:
    found = best_pages(reader.texts, "walrus", 2).found
    form = SearchForm("walrus")
    shown = search_html(form, SearchResults([1], found, True, 0, total=1000, at_least=True))
    assert '<p class="total">at least 1,000 pages · results 1–2, best first</p>' in shown
    exact = search_html(form, SearchResults([1], found, False, 0, total=31))
    assert '<p class="total">31 pages, best first</p>' in exact


@pytest.mark.slow
async def test_the_app_and_the_cli_say_at_least_for_a_common_word(
        tmp_path: Path, make_site) -> None:  # noqa: ANN001
    """A site of more pages than a search counts, crawled by `mirror run`: the app's search
    screen and `mirror search WORDS` say "at least 1,000 pages"; a rarer word is counted."""
    site = await make_site()
    many = searchpages.COUNTED_AT_MOST + 5
    site.page("/", page("Home", "The index.", tuple(f"/p{i}" for i in range(many))))
    for i in range(many):
        site.page(f"/p{i}", page(f"Page {i}", "walrus" + (" narwhal" if i < 7 else "")))
    library = tmp_path / "library"
    library.mkdir()
    assert await crawl(site_file(library, "big", site.base, workers=8), timeout=120) == 0
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "MIRROR_LIBRARY": str(library)}
    said = {}
    for word in ("walrus", "narwhal"):
        done = subprocess.run([sys.executable, "-m", "mirror", "search", word], cwd=home,
                              env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        said[word] = done.stdout.splitlines()[0]
    assert said == {"walrus": "at least 1,000 pages in 1 site, best first (the first 20 shown)",
                    "narwhal": "7 pages in 1 site, best first"}
    ui = UiProcess.start(library)
    try:
        for word, total in (("walrus", "at least 1,000 pages in 1 site"),
                            ("narwhal", "7 pages in 1 site")):
            async with ui.session() as s, s.get(ui.base + "search", params={"q": word}) as r:
                assert r.status == 200
                assert f'<p class="note total">{total}' in await r.text()
    finally:
        ui.stop()
