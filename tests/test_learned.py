"""Learned trap patterns: url_pattern, SimHash and verdict laws, and crawls of sites with
traps (an endless calendar, sort/view variants) on 127.0.0.1 that end by themselves."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import Crawl, TestSite
from hypothesis import given
from hypothesis import strategies as st

from mirror.crawl.simhash import NearIndex, distance, fingerprint, line_keys, near, simhash
from mirror.web.patterns import (
    DUPLICATE,
    FACETS,
    NOINDEX,
    SAMPLE,
    SPREAD,
    Families,
    Figures,
    facet_keys,
    facet_rule,
    family_keys,
    matching,
    url_pattern,
    valid_pattern,
    verdict,
)

# -- url_pattern -------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "pattern"), [
    ("https://w.example/index.php?title=Foo&action=history", "w.example/index.php?action=&title="),
    ("https://w.example/index.php?title=Foo&oldid=123", "w.example/index.php?oldid=&title="),
    ("https://w.example/index.php?action=edit&title=Bar", "w.example/index.php?action=&title="),
    ("https://w.example/index.php/Foo", "w.example/index.php/Foo"),
    ("https://w.example/wiki/Foo", "w.example/wiki/Foo"),
    ("http://h/calendar/2024/05", "h/calendar/{n}/{n}"),
    ("http://h/page?id=5&sort=asc&view=grid", "h/page?id=&sort=&view="),
    ("http://h/page?view=grid&id=7&sort=desc", "h/page?id=&sort=&view="),
    ("http://h:8080/s/a8f3kz9q2b/item-2.html", "h:8080/s/{id}/item-{n}.html"),
    ("http://h/x/550e8400-e29b-41d4-a716-446655440000", "h/x/{id}"),
    ("http://h/blog/part-0/story-sailor-104.html", "h/blog/part-{n}/story-sailor-{n}.html"),
    ("http://h/wiki/Special%3ACreateAccount?returnto=Foo",
     "h/wiki/Special%3ACreateAccount?returnto="),
    ("http://h/", "h/"),
])
def test_url_pattern(url: str, pattern: str) -> None:
    assert url_pattern(url) == pattern
    assert valid_pattern(pattern)


def test_wiki_views_and_articles_have_distinct_patterns() -> None:
    article = {url_pattern(f"http://w/wiki/{t}") for t in ("Foo", "Bar")}
    views = {url_pattern(f"http://w/index.php?title={t}&action=history") for t in ("Foo", "Bar")}
    revisions = {url_pattern(f"http://w/index.php?title={t}&oldid={n}")
                 for t, n in (("Foo", 1), ("Bar", 22))}
    assert len(views) == 1 and len(revisions) == 1  # one pattern for every page's view
    assert len(article) == 2  # an article is a pattern of its own
    assert not (article & views) and views != revisions


def test_family_keys() -> None:
    assert family_keys("w/index.php/Special:WhatLinksHere/Foo") == [
        "w/index.php/{*}/Foo", "w/index.php/Special:WhatLinksHere/{*}"]
    assert family_keys("h/s/{id}/article/{n}?x=") == [
        "h/s/{*}/article/{n}?x=", "h/s/{id}/{*}/{n}?x=", "h/s/{id}/article/{*}?x="]
    # never a site's sections, never every page of a folder (every article of a wiki)
    assert family_keys("w/wiki/Foo") == family_keys("w/Foo") == family_keys("w/") == []


def test_a_family_stands_for_its_patterns_once_spread() -> None:
    families = Families()
    titles = ["Apple", "Banana", "Cherry", "Damson", "Elder", "Fig"]
    views = [f"w/index.php/Special:WhatLinksHere/{t}" for t in titles]
    for view in views[:SPREAD - 1]:
        families.add(view)
        assert families.of(view) == view
    families.add(views[SPREAD - 1])
    family = "w/index.php/Special:WhatLinksHere/{*}"
    assert families.of(views[-1]) == families.of(views[0]) == family
    assert families.of("w/index.php/Apple") == "w/index.php/Apple"
    assert matching("http://w/index.php/Special:WhatLinksHere/Zed", {family: 1}) == family
    assert matching("http://w/index.php/Zed", {family: 1}) is None
    rebuilt = Families()  # from the patterns a run recorded (the manifest's), any order
    for pattern in reversed([*views[:SPREAD], family]):
        rebuilt.add(pattern)
    assert rebuilt.wide == families.wide


def test_filters_combined_on_a_faceted_path_are_skipped() -> None:
    two = Figures(pages=2)
    figures = {"h/shop?color=": two, "h/shop?size=": two, "h/shop?brand=": Figures(pages=1),
               "h/shop": Figures(pages=1), "h/view?id=": two, "h/view?lang=": two}
    assert facet_keys(figures) == {}  # two filters seen alone (and one once): not faceted
    figures["h/shop?brand="] = two
    faceted = facet_keys(figures)
    assert faceted == {"h/shop": frozenset({"color", "size", "brand"})}
    assert facet_rule("http://h/shop?size=m&color=red", faceted) == FACETS
    assert facet_rule("http://h/shop?color=red&page=2&brand=acme", faceted) == FACETS
    for url in ("http://h/shop?color=red", "http://h/shop?color=red&page=2", "http://h/shop",
                "http://h/view?id=1&lang=de", "http://h/other?size=m&color=red"):
        assert facet_rule(url, faceted) is None, url


_segment = st.text(st.sampled_from("abcXYZ019-_.%"), min_size=1, max_size=12)


@given(st.lists(_segment, max_size=5), st.dictionaries(
    st.text("abcdefk", min_size=1, max_size=4), st.text("xyz0189", max_size=6), max_size=4))
def test_pattern_stable_and_ignores_query_values_and_order(
        segments: list[str], query: dict[str, str]) -> None:
    url = "http://h.example/" + "/".join(segments)
    pairs = [f"{k}={v}" for k, v in query.items()]
    a = url_pattern(url + ("?" + "&".join(pairs) if pairs else ""))
    b = url_pattern(url + ("?" + "&".join(reversed(pairs)) if pairs else ""))
    other_values = [f"{k}={v}9" for k, v in query.items()]
    c = url_pattern(url + ("?" + "&".join(other_values) if pairs else ""))
    assert a == b == c
    assert url_pattern.__wrapped__(url) == url_pattern.__wrapped__(url)  # not the cache's doing


# -- SimHash -----------------------------------------------------------------------------


@given(st.text(max_size=2000))
def test_simhash_of_identical_texts_is_equal(text: str) -> None:
    assert simhash(text) == simhash(str(text))
    assert 0 <= simhash(text) < 1 << 64


@given(st.lists(st.text(st.characters(blacklist_characters="\n"), min_size=1), max_size=30))
def test_simhash_ignores_line_order(lines: list[str]) -> None:
    assert simhash("\n".join(lines)) == simhash("\n".join(reversed(lines)))


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(["river", "ancient", "market", "quiet", "window", "season",
                                "repair", "teacher", "bright", "visitor", "station"])
                    + str(rng.randrange(1000)) for _ in range(n))


def test_simhash_near_for_near_texts_far_for_others() -> None:
    rng = random.Random(0)
    nav = "\n".join(f"Menu item {i}" for i in range(30))
    body = "\n".join(_words(rng, 40) for _ in range(20))
    month = nav + "\nMay 2024\n" + body
    assert near(simhash(month), simhash(month.replace("May 2024", "June 2024")))
    other = nav + "\n" + "\n".join(_words(rng, 40) for _ in range(20))
    assert distance(simhash(month), simhash(other)) > 10
    # a page of its own in a shared template is not a near-duplicate of another's
    own = [nav + "\n" + _words(rng, 60) for _ in range(2)]
    assert not near(simhash(own[0]), simhash(own[1]))


def test_near_index_finds_other_urls_only() -> None:
    index = NearIndex()
    h = simhash("a page\nwith some lines\nof text")
    assert index.match(h, 1) is None
    index.add(h, 1)
    assert index.match(h, 1) is None  # its own earlier page is no duplicate
    assert index.match(h, 2) == h
    assert index.match(h ^ 0b101, 2) == h  # two bits apart
    assert index.match(h ^ 0b11111, 2) is None  # five bits apart
    assert not index.add(h ^ 1, 1)  # a URL keeps its first fingerprint
    index.add(h, 3)
    assert index.match(h, 1) == h  # URL 3 has it too


def test_fingerprint_leaves_out_the_template() -> None:
    """A page's fingerprint is its own text's: the lines of its host's first page (the
    template) are left out, and counted out of its own bytes."""
    nav = "\n".join(f"Menu item {i}" for i in range(30))
    own = "A paragraph of its own\nand a second line"
    h, size = fingerprint(f"{nav}\n{own}\nMenu item 3", line_keys(nav + "\nFooter"))
    assert (h, size) == fingerprint(own) and size == len(own) - 1
    assert fingerprint(nav, line_keys(nav)) == (0, 0)
    assert simhash(own) == fingerprint(own)[0] != 0


# -- verdict -----------------------------------------------------------------------------


def _seen(flags: list[tuple[bool, bool]]) -> Figures:
    f = Figures()
    for i, (noindex, duplicate) in enumerate(flags):
        f = f.seen(f"http://h/p{i}", noindex=noindex, duplicate=duplicate, links=3)
    return f


def test_verdict() -> None:
    assert verdict(_seen([(True, False)] * (SAMPLE - 1))) is None  # too few yet
    assert verdict(_seen([(True, False)] * SAMPLE)) == NOINDEX
    assert verdict(_seen([(True, False)] * (SAMPLE - 1) + [(False, False)])) is None
    assert verdict(_seen([(False, True)] * 4 + [(False, False)])) == DUPLICATE
    assert verdict(_seen([(False, True)] * 3 + [(False, False)] * 2)) is None
    # a pattern whose first pages pass is judged again on each later block of pages
    f = _seen([(False, False)] * SAMPLE + [(False, True)] * 4)
    assert verdict(f) is None
    f = f.seen("http://h/x", noindex=False, duplicate=False, links=0)
    assert verdict(f) == DUPLICATE
    assert f.pages == 10 and f.duplicates == 4 and f.links == 27 and len(f.samples) == 5


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=23))
def test_verdict_depends_on_the_last_full_block_only(flags: list[tuple[bool, bool]]) -> None:
    if len(flags) % SAMPLE or not flags:
        assert verdict(_seen(flags)) is None
    else:
        assert verdict(_seen(flags)) == verdict(_seen(flags[-SAMPLE:]))


# -- crawls ------------------------------------------------------------------------------

#: learning is on by default: these tests say so, as a site file may
LEARN = {"learn_traps": True}
NAV = "".join(f'<li><a href="/article/{i}">Article {i}</a></li>' for i in range(12))
ARTICLES = 12


def _article(i: int) -> str:
    rng = random.Random(i)
    paragraphs = "".join(f"<p>{_words(rng, 50)}</p>" for _ in range(6))
    return (f"<html><head><title>Article {i}</title></head><body><ul>{NAV}</ul>"
            f'<h1>Article {i}</h1>{paragraphs}<a href="/calendar/2024/{1 + i % 12:02d}">'
            f'events</a> <a href="/list?id={i}&arrange=date&look=grid">sorted</a></body></html>')


async def _calendar(request: object) -> object:
    from aiohttp import web

    assert isinstance(request, web.Request)
    year, month = int(request.match_info.get("y", 0) or request.path.split("/")[2]), \
        int(request.path.split("/")[3])
    links = []
    for step in range(1, 4):  # the next three months and the last three: endless
        for sign in (1, -1):
            m = (year * 12 + month - 1) + sign * step
            links.append(f'<a href="/calendar/{m // 12}/{m % 12 + 1:02d}">m</a>')
    body = (f"<html><head><title>Events</title></head><body><ul>{NAV}</ul>"
            f"<h1>Events {year}-{month:02d}</h1><p>There are no events this month. "
            "Come back later to see what is planned for the season.</p>"
            f"{''.join(links)}</body></html>")
    return web.Response(text=body, content_type="text/html")


async def _list(request: object) -> object:
    from aiohttp import web

    assert isinstance(request, web.Request)
    q = request.query
    i = int(q.get("id", "0"))
    rng = random.Random(1000 + i)
    items = "".join(f"<li>{_words(rng, 30)}</li>" for _ in range(10))
    links = "".join(f'<a href="/list?id={i}&arrange={s}&look={v}">{s} {v}</a>'
                    for s in ("date", "name", "size", "rank") for v in ("grid", "rows", "cards"))
    return web.Response(text=f"<html><body><ul>{NAV}</ul><ul>{items}</ul>{links}"
                             "</body></html>", content_type="text/html")


def trap_site(site: TestSite) -> None:
    """Twelve articles, each linking an endless calendar and a list with twelve orderings
    and layouts that show the same text (under names no built-in rule knows: the trap:sort
    and trap:view rules would skip sort= and view=, and nothing would be learned)."""
    site.page("/", f"<html><body><ul>{NAV}</ul></body></html>")
    for i in range(ARTICLES):
        site.page(f"/article/{i}", _article(i))
    for y in range(1990, 2060):
        for m in range(1, 13):
            site.handler(f"/calendar/{y}/{m:02d}", _calendar)  # type: ignore[arg-type]
    site.handler("/list", _list)  # type: ignore[arg-type]


def _fetched(site: TestSite, prefix: str) -> int:
    return sum(1 for path in site.log if path.startswith(prefix))


async def test_trap_crawl_ends_with_content_stored_and_patterns_reported(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]]) -> None:
    site = await make_site()
    trap_site(site)
    c = await crawl([site.base], crawl={"workers": 1}, scope=LEARN)
    assert c.result.exit_code == 0
    host = site.base.split("://")[1].rstrip("/")
    stored = set(c.responses())
    assert {f"{site.base}article/{i}" for i in range(ARTICLES)} <= stored
    # the verdict comes with the commit of the fifth page: a few more may be fetched by then
    assert _fetched(site, "/calendar/") <= 3 * SAMPLE
    assert _fetched(site, "/list") <= 48  # of 144
    skipped = c.skipped()
    assert sum(1 for r in skipped.values() if r == DUPLICATE) > 10
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    learned = {p["pattern"]: p for p in report["learned_patterns"]}
    cal = learned[f"{host}/calendar/{{n}}/{{n}}"]
    assert cal["rule"] == DUPLICATE and cal["skipped"] > 0 and len(cal["samples"]) == SAMPLE
    assert all(u.startswith(f"{site.base}calendar/") for u in cal["samples"])
    assert learned[f"{host}/list?arrange=&id=&look="]["rule"] == DUPLICATE
    assert not any(p["rule"] for name, p in learned.items() if "/article/" in name)
    c.assert_verifies()


async def test_short_pages_in_one_template_are_all_stored(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]]) -> None:
    """A gallery: 40 pages whose own text is a few words in the site's template. Their whole
    texts are near-duplicates, their own texts are too short to judge (web.patterns
    SHORT): every page is stored, no pattern stopped."""
    site = await make_site()
    site.page("/", f'<html><body><ul>{NAV}</ul><a href="/photo/0">photos</a></body></html>')
    for i in range(40):
        site.page(f"/photo/{i}", f"<html><body><ul>{NAV}</ul><h1>Photo {i}</h1><p>A photo."
                  f'</p><a href="/photo/{(i + 1) % 40}">next</a></body></html>')
    c = await crawl([site.base], crawl={"workers": 2}, scope={**LEARN, "max_depth": 50})
    assert {f"{site.base}photo/{i}" for i in range(40)} <= set(c.responses())
    assert not any(r.startswith("learned:") for r in c.skipped().values())


TITLES = [f"{a}_{b}" for a in ("Apple", "Banana", "Cherry", "Damson", "Elder", "Fig", "Grape",
                                "Hazel") for b in ("Tree", "Jam", "Pie", "Leaf", "Seed")]


async def test_the_views_of_every_page_are_one_family(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]]) -> None:
    """A wiki with word titles: each article links its Linked_from/<title> view (a name no
    built-in rule knows, as it knows Special:), the same text for each. Each view is a
    pattern of its own until SPREAD of them were seen; then they are one family, judged
    and stopped as one pattern."""
    site = await make_site()
    nav = "".join(f'<li><a href="/wiki/{t}">{t}</a></li>' for t in TITLES)
    site.page("/", f"<html><body><ul>{nav}</ul></body></html>")
    for i, title in enumerate(TITLES):
        text = "".join(f"<p>{_words(random.Random(i * 7 + k), 40)}</p>" for k in range(4))
        site.page(f"/wiki/{title}", f"<html><body><ul>{nav}</ul><h1>{title}</h1>{text}"
                  f'<a href="/wiki/Linked_from/{title}">links here</a></body></html>')
        site.page(f"/wiki/Linked_from/{title}",
                  f"<html><body><ul>{nav}</ul><p>The following pages link to the page named "
                  "above. Pages that are linked through a redirect or transcluded as a "
                  "template are listed with it.</p><p>No pages link here.</p></body></html>")
    c = await crawl([site.base], crawl={"workers": 1}, scope=LEARN)
    assert {f"{site.base}wiki/{t}" for t in TITLES} <= set(c.responses())
    # the verdict comes with the commit of a page, and captures wait up to GROUP_WAIT for
    # their group's commit while the next are fetched: how many more are fetched by then
    # depends on the machine's speed (21 of 40 once under load in a full run), so the
    # bound is the family's being stopped before its end (below: skipped > 0)
    assert _fetched(site, "/wiki/Linked_from/") < len(TITLES)
    host = site.base.split("://")[1].rstrip("/")
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    family = next(p for p in report["learned_patterns"]
                  if p["pattern"] == f"{host}/wiki/Linked_from/{{*}}")
    assert family["rule"] == DUPLICATE and family["skipped"] > 0


async def _info(request: object) -> object:
    """/info?page=N: a distinct text each (no near-duplicates), marked noindex as a wiki's
    page-info views are, linking the next two: endless."""
    from aiohttp import web

    assert isinstance(request, web.Request)
    n = int(request.query.get("page", "0"))
    text = _words(random.Random(5000 + n), 80)
    return web.Response(
        text=f'<html><head><meta name="robots" content="noindex"></head><body><p>{text}</p>'
             f'<a href="/info?page={n + 1}">next</a> <a href="/info?page={n + 2}">after</a>'
             "</body></html>", content_type="text/html")


@pytest.mark.parametrize("meta_robots", [True, False])
async def test_a_pattern_of_noindex_pages_is_stopped(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]], meta_robots: bool) -> None:
    """The pages meta robots marks noindex (web.robotsmeta) feed the learned figures: a
    pattern whose block of pages all say noindex stops (learned:noindex). With
    meta_robots = false nothing is read as noindex, and the chain runs to max_depth."""
    site = await make_site()
    site.page("/", f'<html><body><ul>{NAV}</ul><a href="/info?page=0">info</a></body></html>')
    for i in range(ARTICLES):
        site.page(f"/article/{i}", _article(i).replace("/calendar/", "/nocal/"))
    site.handler("/info", _info)  # type: ignore[arg-type]
    c = await crawl([site.base], crawl={"workers": 1},
                    scope={**LEARN, "meta_robots": meta_robots, "max_depth": 40})
    assert c.result.exit_code in (0, 3)  # the /nocal/ and /list links answer 404 or lists
    assert {f"{site.base}article/{i}" for i in range(ARTICLES)} <= set(c.responses())
    stopped = sum(1 for r in c.skipped().values() if r == NOINDEX)
    if meta_robots:
        assert _fetched(site, "/info") <= 3 * SAMPLE and stopped > 0
    else:
        assert _fetched(site, "/info") > 30 and stopped == 0


async def test_without_learning_the_trap_runs_on(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]]) -> None:
    """The control: the same site with learn_traps = false fetches the calendar months
    until max_depth stops it."""
    site = await make_site()
    trap_site(site)
    c = await crawl([site.base], crawl={"workers": 4},
                    scope={"learn_traps": False, "max_depth": 6})
    assert c.result.exit_code == 0
    assert _fetched(site, "/calendar/") > 30
    assert not any(r.startswith("learned:") for r in c.skipped().values())


async def test_pins_keep_a_pattern_or_skip_it(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]]) -> None:
    site = await make_site()
    trap_site(site)
    host = site.base.split("://")[1].rstrip("/")
    c = await crawl([site.base], crawl={"workers": 4}, scope={
        **LEARN, "max_depth": 4, "fetch_patterns": [f"{host}/calendar/{{n}}/{{n}}"],
        "skip_patterns": [f"{host}/list?arrange=&id=&look="]})
    assert _fetched(site, "/calendar/") > 3 * SAMPLE  # pinned on: never stopped
    assert _fetched(site, "/list") == 0  # pinned off
    reasons = set(c.skipped().values())
    assert "skip_patterns" in reasons and DUPLICATE not in reasons


async def test_explain_names_the_stopped_pattern(
        make_site: Callable[[], Awaitable[TestSite]],
        crawl: Callable[..., Awaitable[Crawl]], tmp_path: Path) -> None:
    from mirror.cli.check import learned as _learned
    from mirror.config import load_config
    from mirror.explain import explain
    from mirror.run.report import learned_lines

    site = await make_site()
    trap_site(site)
    c = await crawl([site.base], crawl={"workers": 1}, scope=LEARN)
    cfg = load_config(tmp_path / "site.toml")
    host = site.base.split("://")[1].rstrip("/")
    lines = explain(cfg, f"{site.base}calendar/2031/07", 1, None, "offline", _learned(cfg))
    line = next(x for x in lines if x.startswith("pattern"))
    assert f"{host}/calendar/{{n}}/{{n}}: stopped by the last run, rule {DUPLICATE}" in line
    assert f"{site.base}calendar/2024/01" in line and "fetch_patterns" in line
    article = explain(cfg, f"{site.base}article/3", 1, None, "offline", _learned(cfg))
    assert f"pattern     {host}/article/{{n}}: not stopped" in article
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    summary = "\n".join(learned_lines(report["learned_patterns"]))
    assert f"{host}/calendar/{{n}}/{{n}}: {DUPLICATE}" in summary


def test_resume_after_kill_gives_the_same_verdicts(
        site_in_thread: Callable[[], TestSite], tmp_path: Path) -> None:
    """`mirror run` killed with SIGKILL mid-crawl, then run again, ends with the verdicts
    (rule and first URLs of each pattern) of a run never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import write_config

    site = site_in_thread()
    trap_site(site)
    site.latency = 0.01

    def run(folder: Path, kill_after: int = 0) -> None:
        folder.mkdir()
        config = write_config(folder, [site.base], crawl={"workers": 1}, scope=LEARN)
        argv = [sys.executable, "-m", "mirror", "run", str(config), "--quiet"]
        start = len(site.log)
        proc = subprocess.Popen(argv, cwd=folder, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            if kill_after:
                deadline = time.monotonic() + 60
                while len(site.log) - start < kill_after and proc.poll() is None \
                        and time.monotonic() < deadline:
                    time.sleep(0.01)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                return
            assert proc.wait(120) in (0, 4)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def verdicts(folder: Path) -> dict[str, tuple[str | None, str]]:
        with sqlite3.connect(folder / "archive" / "manifest.sqlite3") as db:
            return {p: (rule, samples) for p, rule, samples in db.execute(
                "SELECT pattern, rule, samples FROM learned_patterns WHERE run_id=1")}

    def pages(folder: Path) -> int:
        with sqlite3.connect(folder / "archive" / "manifest.sqlite3") as db:
            return int(db.execute("SELECT SUM(pages) FROM learned_patterns").fetchone()[0])

    run(tmp_path / "whole")
    run(tmp_path / "killed", kill_after=30)
    assert pages(tmp_path / "killed") < pages(tmp_path / "whole")  # killed mid-crawl
    subprocess.run([sys.executable, "-m", "mirror", "run", "site.toml", "--quiet"],
                   cwd=tmp_path / "killed", timeout=120, check=False)
    whole, resumed = verdicts(tmp_path / "whole"), verdicts(tmp_path / "killed")
    assert resumed == whole
    assert sum(1 for rule, _ in whole.values() if rule == DUPLICATE) == 2
