"""The search of `mirror export --to`: search.html finds pages by the words of their text,
opened from file:// in headless Chromium, with its Content-Security-Policy in force."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import replayers

from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.sitesearch import (
    INDEX_END,
    INDEX_START,
    MAX_PAGE_TEXT,
    MIN_PAGE_TEXT,
    cut,
    page_text_limit,
)

BODY_WORD = "quokkaberry"  # in the text of /notes/field.html only
SCRIPT_WORD = "zanzibarium"  # in a <script> and a <style> of that page: not text
PAGES = {
    "/": """<!doctype html><html><head><title>Start</title></head><body><h1>Start</h1>
<p><a href="/notes/field.html">Field</a> <a href="/river.html">River</a>
<a href="/dessert.html">Dessert</a> <a href="/streams.html">Streams</a>
<a href="/gone.html">Gone</a> <a href="/river-twin.html">Twin</a></p></body></html>""",
    "/notes/field.html": f"""<!doctype html><html><head><title>Field notes</title>
<style>.{SCRIPT_WORD} {{ color: red }}</style></head><body><h1>Field notes</h1>
<p>Early in the morning we walked along the old road past the mill and the bridge, and
by the water the {BODY_WORD} grows in the shade of the willows, as it did last year.</p>
<script>var {SCRIPT_WORD} = "{BODY_WORD}-in-a-script";</script></body></html>""",
    "/river.html": """<!doctype html><html><head><title>The river</title></head>
<body><p>Where the water runs.</p></body></html>""",
    "/streams.html": """<!doctype html><html><head><title>Streams</title></head>
<body><p>A river, another river, a third river: they all meet.</p></body></html>""",
    "/dessert.html": """<!doctype html><html><head><title>Dessert</title></head>
<body><p>A CRÈME BRÛLÉE for the Ångström lab, then a cafe\u0301 noir.</p></body></html>""",
}


async def exported(make_site: Any, crawl: Any, out: Path) -> str:
    """The site crawled and exported into `out`; returns the site's base URL."""
    site = await make_site()
    for path, body in PAGES.items():
        site.page(path, body)
    site.page("/gone.html", f"<title>Gone</title><p>{BODY_WORD} was here</p>", status=404)
    site.page("/river-twin.html", PAGES["/river.html"])  # the same bytes at another URL
    done = await crawl([site.base])
    export_folder(CaptureIndex.load(done.archive), out)
    return str(site.base)


def read_index(out: Path) -> list[list[str]]:
    data = (out / "search-index.js").read_bytes()
    assert data.startswith(INDEX_START) and data.endswith(INDEX_END)
    return [json.loads(line.rstrip(",")) for line in
            data[len(INDEX_START):-len(INDEX_END)].decode().splitlines()]


async def test_the_index_holds_the_text_of_each_page(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    base = await exported(make_site, crawl, tmp_path / "export")
    entries = {e[1]: (e[0], e[2], e[3]) for e in read_index(
        tmp_path / "export")}
    shown = base.removeprefix("http://")
    pages = {shown + p.lstrip("/") for p in PAGES} | {shown + "river-twin.html"}
    assert len(entries) == len(PAGES) and set(entries) < pages  # 2xx pages: not the 404 ...
    assert len({shown + "river.html", shown + "river-twin.html"} & set(entries)) == 1  # once
    href, title, text = entries[shown + "notes/field.html"]
    assert (tmp_path / "export" / href).is_file() and href.endswith("field.html")
    assert title == "Field notes" and BODY_WORD in text
    assert SCRIPT_WORD not in text and "color" not in text
    contents = (tmp_path / "export" / "index.html").read_text()
    assert '<form action="search.html">' in contents


def test_texts_are_cut_at_a_word_and_share_a_budget() -> None:
    assert cut("alpha beta gamma", 12) == "alpha beta"
    assert cut("alpha beta", 10) == "alpha beta"
    assert cut("x" * 30, 10) == "x" * 10  # no space in the second half: cut in the word
    assert page_text_limit(1) == page_text_limit(2000) == MAX_PAGE_TEXT
    assert page_text_limit(100_000) == 500
    assert page_text_limit(10**9) == MIN_PAGE_TEXT


#: records CSP violations from the start of each document: the page's own listeners could
#: not be trusted to, and an init script runs before them, whatever the CSP
RECORD_VIOLATIONS = """window.violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.violations.push(e.violatedDirective + " " + e.blockedURI));"""
#: an inline script, which the search page's CSP must block
INLINE_PROBE = """() => {
  const s = document.createElement("script");
  s.textContent = "window.inlineRan = true";
  document.body.append(s);
}"""


async def results(page: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = await page.eval_on_selector_all(
        "#results li", """items => items.map(li => ({
            href: li.querySelector("a").href, title: li.querySelector("a").textContent,
            snippet: li.querySelector(".s").textContent,
            marks: Array.from(li.querySelectorAll("mark"), m => m.textContent)}))""")
    return got


async def ask(page: Any, words: str) -> list[dict[str, Any]]:
    await page.fill("#q", words)
    await page.wait_for_function(
        "(words) => document.getElementById('results').dataset.query === words", arg=words)
    return await results(page)


@pytest.mark.browser
async def test_search_page_finds_pages_by_their_words_from_file_urls(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    replayers.require_browser()
    out = tmp_path / "export"
    await exported(make_site, crawl, out)
    field = next(out.glob("http_*/notes/field.html"))
    async with replayers.chromium() as browser:
        context = await browser.new_context(viewport={"width": 900, "height": 650})
        await context.add_init_script(RECORD_VIOLATIONS)
        page = await context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto((out / "search.html").as_uri())
        csp = await page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
        assert csp is not None and "default-src 'none'" in csp and "unsafe" not in csp
        assert re.fullmatch(r"\d+ pages to search\.", await page.inner_text("#status"))

        found = await ask(page, BODY_WORD.upper())
        await page.screenshot(path=str(tmp_path / "search.png"))
        assert [r["href"] for r in found] == [field.as_uri()]
        assert found[0]["title"] == "Field notes" and found[0]["marks"] == [BODY_WORD]
        assert f"the {BODY_WORD} grows" in found[0]["snippet"]
        assert found[0]["snippet"].startswith("… ")  # cut before the first hit, at a space

        found = await ask(page, "creme brulee angstrom")  # accents and case left aside
        assert [r["title"] for r in found] == ["Dessert"]
        # marked where they are, in a text that folding shortens (its decomposed e\u0301)
        assert found[0]["marks"] == ["CRÈME", "BRÛLÉE", "Ångström"]
        assert (await ask(page, "cafe"))[0]["marks"] == ["cafe\u0301"]
        assert await ask(page, f"{BODY_WORD} dessert") == []  # every word, on one page
        assert "No page" in await page.inner_text("#status")
        assert await ask(page, SCRIPT_WORD) == []
        assert await ask(page, "iver") == []  # words match at their start only
        ranked = await ask(page, "river")  # a hit in the title first, then 3 hits, 1 hit
        assert [r["title"] for r in ranked] == ["The river", "Streams", "Start"]

        assert errors == [] and await page.evaluate("window.violations") == []
        await page.evaluate(INLINE_PROBE)  # yet the CSP is in force
        assert await page.evaluate("window.inlineRan") is None
        violations = await page.evaluate("window.violations")
        assert len(violations) == 1 and violations[0].startswith("script-src"), violations

        await page.click("#results a")
        await page.wait_for_url(ranked[0]["href"])
        assert await page.title() == "The river"

        await page.goto((out / "index.html").as_uri())  # the contents page's search box
        await page.fill("form input[name=q]", BODY_WORD)
        await page.click("form button")
        await page.wait_for_url(lambda url: "search.html?q=" in url)
        assert [r["href"] for r in await results(page)] == [field.as_uri()]
        await context.close()
    assert (tmp_path / "search.png").read_bytes()[:4] == b"\x89PNG"
