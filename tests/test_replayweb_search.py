"""ReplayWeb.page, in headless Chromium, finds a page of our WACZ by a word of its body: the
word typed into the search box of its Pages view, as a reader would, in a WACZ whose page
texts are more than the 1 MiB that ReplayWeb.page reads of a separate text index."""

from __future__ import annotations

import asyncio
import random
import zipfile
from pathlib import Path
from typing import Any

import pytest
import replayers

from mirror.replay.captures import CaptureIndex
from mirror.replay.wacz import write_wacz

pytestmark = [pytest.mark.interop, pytest.mark.browser]

#: in no title and no URL: only the text of /notes/field.html has it
BODY_WORD = "quokkaberry"
SCRIPT_WORD = "zanzibarium"  # in a <script> of the same page: not text
ABSENT_WORD = "wombatine"  # nowhere on the site
NOTES = f"""<!doctype html><html><head><title>Field notes</title>
<style>.zz {{ color: red }}</style></head>
<body><h1>Field notes</h1><p>The {BODY_WORD} grows by the river.</p>
<script>var {SCRIPT_WORD} = 1;</script></body></html>"""
START = """<!doctype html><html><head><title>Start</title></head>
<body><h1>Start</h1><p><a href="/notes/field.html">Notes</a> <a href="/other.html">Other</a></p>
</body></html>"""
OTHER = """<!doctype html><html><head><title>Other page</title></head>
<body><p>Nothing to see here.</p></body></html>"""
FILLERS = 30  # pages of FILLER_WORDS made-up words: 1.3 MiB of pages.jsonl once deflated
FILLER_WORDS = 12_000

#: the Pages view of the collection: the embed shows it when it has no `url` to replay
SHOW_PAGES_JS = """() => {
  const embed = document.querySelector("replay-web-page");
  embed.setAttribute("embed", "default");
  embed.setAttribute("view", "pages");
  embed.setAttribute("url", "");
}"""
#: the Pages view (wr-page-view, in shadow roots): the query it answers, whether it is still
#: searching, and the URLs of the pages it lists
RESULTS_JS = """() => {
  const state = {query: null, loading: true, urls: []};
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.tagName === "WR-PAGE-VIEW") Object.assign(state, {query: el.query,
                                                              loading: el.loading});
      if (el.tagName === "WR-PAGE-ENTRY" && el.page) state.urls.push(el.page.url);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return state;
}"""


async def app_frame(page: Any, base: str) -> Any:
    """The frame of ReplayWeb.page's app (`replay/?source=...`) once it shows a search box."""
    deadline = asyncio.get_running_loop().time() + replayers.TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        for frame in page.frames:
            if frame.url.startswith(f"{base}replay/?") and "embed=default" in frame.url:
                box = frame.locator("wr-page-view input[type=text]")
                if await box.count():
                    return frame
        await asyncio.sleep(0.1)
    raise AssertionError(f"no Pages view: {[f.url for f in page.frames]}")


async def search(frame: Any, word: str) -> list[str]:
    """Type `word` in the search box; the URLs listed once the view has searched for it
    (it waits 250 ms after the last key) and its list stays the same for half a second."""
    box = frame.locator("wr-page-view input[type=text]")
    await box.fill("")
    await box.type(word)
    deadline = asyncio.get_running_loop().time() + replayers.TIMEOUT
    last = None
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
        state = await frame.evaluate(RESULTS_JS)
        if state["query"] == word and not state["loading"]:
            if state["urls"] == last:
                return list(last)
            last = state["urls"]
    raise AssertionError(f"the search for {word!r} did not settle: {last}")


def filler_page(number: int, rng: random.Random) -> str:
    """A page of made-up words (deflate gains little on them), listed before /notes/ in
    pages.jsonl: its URL sorts first."""
    words = ("".join(rng.choices("bcdfghklmnprstvz", k=rng.randint(3, 8))) + "o"
             for _ in range(FILLER_WORDS))
    return (f"<!doctype html><title>Filler {number}</title><body><p>{' '.join(words)}</p>"
            "</body>")


def build(site: Any) -> None:
    rng = random.Random(5)
    links = "".join(f'<a href="/filler/{n}.html">{n}</a> ' for n in range(FILLERS))
    site.page("/", START.replace("</p>", links + "</p>"))
    site.page("/notes/field.html", NOTES)
    site.page("/other.html", OTHER)
    for n in range(FILLERS):
        site.page(f"/filler/{n}.html", filler_page(n, rng))


async def test_replaywebpage_finds_a_page_by_a_word_of_its_body(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    replayers.require_browser()
    replayers.replaywebpage_dir()
    site = await make_site()
    build(site)
    done = await crawl([site.base])
    wacz = write_wacz(CaptureIndex.load(done.archive), tmp_path / "site.wacz", title="search",
                      start_urls=(site.base,)).path
    with zipfile.ZipFile(wacz) as zf:
        assert zf.getinfo("pages/pages.jsonl").compress_size > 1 << 20
    async with replayers.replaywebpage_server(wacz, site.base) as base, \
            replayers.chromium() as browser:
        async with replayers.replaywebpage_context(browser, base) as rwp:
            page = rwp.frame.page
            await page.evaluate(SHOW_PAGES_JS)
            frame = await app_frame(page, base)
            found = await search(frame, BODY_WORD)
            await page.screenshot(path=str(tmp_path / "rwp-search.png"))
            assert found == [site.base + "notes/field.html"]
            assert await search(frame, ABSENT_WORD) == []
            assert await search(frame, SCRIPT_WORD) == []
            assert sorted(await search(frame, "page")) == [site.base + "other.html"]
