"""Replay-equivalence harness: one archived URL at one time asked of mirror serve, pywb and
ReplayWeb.page, each answer reduced to (final URL as archived, status, archived bytes)."""

from __future__ import annotations

import asyncio
import html
import os
import re
import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from aiohttp import ClientSession, ClientTimeout, web
from test_pywb import pywb, wayback

from mirror.replay.serve import Site, start_replay_server

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("MIRROR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: where .ci/run unpacks the npm package `replaywebpage` (its built ui.js and sw.js)
REPLAYWEB_DIRS = [os.environ.get("MIRROR_REPLAYWEB", ""), str(ROOT / ".replayweb"),
                  str(ROOT / ".replayweb" / "package"),
                  str(ROOT / ".replayweb" / "node_modules" / "replaywebpage")]
COLL = "mirror"  # the ReplayWeb.page collection id (its `coll` attribute)
MAX_REDIRECTS = 10
TIMEOUT = 30.0  # seconds for any one answer, and for ReplayWeb.page to load the WACZ
#: a replay address: [:<WACZ page id>/]<timestamp>[<modifier>]/<archived URL>
_REPLAY_PATH = re.compile(r"((?::[^/]+/)?)(\d{1,14})(?:[a-z]{2}_)?/(.+)", re.S)


@dataclass(frozen=True)
class Answer:
    """What a replayer (or the live site) answered for one URL at one time."""

    url: str  # where the redirects led, as archived (the replayer's own prefix taken off)
    status: int  # the final response's status, as the replay (or the live site) gave it
    raw_status: int  # the status of the final URL asked again in raw (id_) mode
    body: bytes  # the body of that raw answer: the archived bytes

    def describe(self, base: str) -> str:
        shown = self.body[:60].decode("utf-8", "replace")
        return (f"{self.url.removeprefix(base) or '/'} {self.status}/{self.raw_status} "
                f"{shown!r}{'...' if len(self.body) > 60 else ''}")


class Replayer(Protocol):
    name: str

    async def ask(self, timestamp: str, url: str) -> Answer: ...


@dataclass(frozen=True)
class ReplayAddress:
    """A replay URL taken apart: everything before the timestamp, the timestamp, the URL."""

    head: str
    timestamp: str
    url: str

    def raw(self) -> str:
        return f"{self.head}{self.timestamp}id_/{self.url}"


def split_replay_url(address: str, prefix: str) -> ReplayAddress | None:
    """`address` under `prefix` taken apart, or None when it left the replay."""
    if not address.startswith(prefix):
        return None
    match = _REPLAY_PATH.fullmatch(address[len(prefix):])
    if match is None:
        return None
    page_id, timestamp, url = match.groups()
    return ReplayAddress(prefix + page_id, timestamp, url)


def left_replay(address: str, status: int) -> Answer:
    """The answer when a redirect led out of the replay (to the live web or elsewhere)."""
    return Answer(f"(left the replay: {address})", status, 0, b"")


# -- what to ask: every capture of every run -----------------------------------------------

@dataclass(frozen=True, order=True)
class Query:
    run: int
    url: str
    timestamp: str  # the capture's own 14-digit timestamp


def captures_by_run(archive: Path) -> list[Query]:
    """Every capture the manifest records, with its run and 14-digit timestamp."""
    db = sqlite3.connect(f"file:{archive / 'manifest.sqlite3'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT run_id, url, warc_date FROM captures").fetchall()
    finally:
        db.close()
    return sorted(Query(run, url, re.sub(r"\D", "", date)[:14]) for run, url, date in rows)


# -- tools: found, or the test skips and says why -----------------------------------------

def replaywebpage_dir() -> Path:
    """The folder with ReplayWeb.page's built ui.js and sw.js, or skip."""
    for folder in filter(None, REPLAYWEB_DIRS):
        if (Path(folder) / "ui.js").is_file() and (Path(folder) / "sw.js").is_file():
            return Path(folder)
    pytest.skip("ReplayWeb.page not found: .ci/run unpacks the npm package `replaywebpage` "
                "into .replayweb/ (needs npm), or set MIRROR_REPLAYWEB=/folder/with/ui.js+sw.js")


def require_browser() -> None:
    """Skip unless Playwright (from PyPI) and a system Chromium are there."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        pytest.skip("playwright not installed: pip install -e '.[test]'")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")


def require_tools() -> None:
    """Skip now, before any crawl, unless pywb, Playwright, Chromium and ReplayWeb.page are
    all there."""
    wayback()
    require_browser()
    replaywebpage_dir()


# -- mirror serve and pywb: plain HTTP -----------------------------------------------------

class HttpReplayer:
    """A Wayback-style server: `<prefix><ts><mode>/<url>` replays (redirects rewritten to
    stay inside the replay), `<prefix><ts>id_/<url>` gives the archived bytes."""

    def __init__(self, name: str, prefix: str, mode: str, session: ClientSession) -> None:
        self.name, self.prefix, self.mode, self.session = name, prefix, mode, session

    async def ask(self, timestamp: str, url: str) -> Answer:
        start = f"{self.prefix}{timestamp}{self.mode}/{url}"
        async with self.session.get(start, max_redirects=MAX_REDIRECTS) as resp:
            await resp.read()
            final, status = str(resp.url), resp.status
        where = split_replay_url(final, self.prefix)
        if where is None:
            return left_replay(final, status)
        async with self.session.get(where.raw(), allow_redirects=False) as raw:
            return Answer(where.url, status, raw.status, await raw.read())


# -- ReplayWeb.page: its <replay-web-page> embed, driven by Playwright ---------------------

EMBED_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>replay</title><script src="ui.js"></script></head>
<body style="margin:0">
<replay-web-page style="display:block;width:1000px;height:700px" source="archive.wacz"
  url="{url}" replayBase="./replay/" coll="{coll}" embed="replayonly"></replay-web-page>
</body></html>"""

#: in a page the service worker controls: follow the replay's redirects, then take the final
#: URL's archived bytes in raw mode (never following a raw redirect: it would leave)
FETCH_JS = """async ([address, redirect]) => {
  try {
    const r = await fetch(address, {redirect, cache: "no-store", credentials: "omit"});
    const body = new Uint8Array(await r.arrayBuffer());
    return {url: r.url, status: r.status, body: Array.from(body)};
  } catch (e) {
    return {url: "(fetch failed: " + e + ")", status: -1, body: []};
  }
}"""


def static_app(folder: Path, wacz: Path, start_url: str) -> web.Application:
    """The embed page, a blank page, ui.js, replay/sw.js and archive.wacz (with Range
    support); 404 for anything else."""
    pages = {"/": EMBED_PAGE.format(url=html.escape(start_url), coll=COLL),
             "/blank.html": "<!doctype html><title>blank</title>"}
    files = {"/ui.js": folder / "ui.js", "/replay/ui.js": folder / "ui.js",
             "/replay/sw.js": folder / "sw.js", "/archive.wacz": wacz}

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path in pages:
            return web.Response(text=pages[request.path], content_type="text/html")
        if request.path in files:
            return web.FileResponse(files[request.path])
        return web.Response(status=404, text="not a file of this server")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


class ReplayWebPage:
    """One browser context on the embed: the WACZ loaded into wabac.js's service worker,
    asked through fetch() from a frame that worker controls."""

    name = "replayweb.page"

    def __init__(self, frame: Any, prefix: str, start_title: str) -> None:
        self.frame, self.prefix = frame, prefix
        self.start_title = start_title  # the title of the start page the embed replayed

    async def _fetch(self, address: str, redirect: str) -> dict[str, Any]:
        got: dict[str, Any] = await asyncio.wait_for(
            self.frame.evaluate(FETCH_JS, [address, redirect]), TIMEOUT)
        return got

    async def ask(self, timestamp: str, url: str) -> Answer:
        replay = await self._fetch(f"{self.prefix}{timestamp}mp_/{url}", "follow")
        where = split_replay_url(replay["url"], self.prefix)
        if where is None:
            return left_replay(replay["url"], replay["status"])
        raw = await self._fetch(where.raw(), "manual")  # an opaque redirect has status 0
        return Answer(where.url, replay["status"], raw["status"], bytes(raw["body"]))


#: the service worker the embed registers (`replayBase` + `sw.js?serveIndex=1`), registered
#: and activated first: on a cold start the embed's own registration can activate after the
#: embed gave up reloading its frame, which then stays an uncontrolled 404
REGISTER_JS = """async () => {
  const reg = await navigator.serviceWorker.register("replay/sw.js?serveIndex=1",
                                                     {scope: "./replay/"});
  const worker = reg.installing || reg.waiting || reg.active;
  await new Promise(resolve => {
    const check = () => worker.state === "activated" && resolve();
    worker.addEventListener("statechange", check);
    check();
  });
}"""


async def wait_for_replay(page: Any, prefix: str, console: list[str]) -> Any:
    """The replay iframe once ReplayWeb.page has loaded the WACZ and shows the start page."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        for frame in page.frames:
            if frame.url.startswith(prefix) and await _loaded(frame):
                return frame
        await asyncio.sleep(0.1)
    raise AssertionError(f"ReplayWeb.page did not replay within {TIMEOUT:.0f}s: "
                         f"{[f.url for f in page.frames]}; console: {console[-20:]}")


async def _loaded(frame: Any) -> bool:
    try:
        return bool(await frame.evaluate("document.readyState === 'complete'"))
    except Exception:  # a frame navigating or detached: look again
        return False


@asynccontextmanager
async def replaywebpage_server(wacz: Path, start_url: str) -> AsyncIterator[str]:
    """The static server ReplayWeb.page runs from, on 127.0.0.1; yields its base URL."""
    runner = web.AppRunner(static_app(replaywebpage_dir(), wacz, start_url))
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """The system Chromium through Playwright, closed at the end."""
    require_browser()
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=TIMEOUT * 1000)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def replaywebpage_context(browser: Any, base: str,
                                screenshot: Path | None = None) -> AsyncIterator[ReplayWebPage]:
    """A fresh browser context (nothing cached by wabac.js) with the WACZ loaded."""
    context = await browser.new_context(viewport={"width": 1000, "height": 700})
    try:
        page = await context.new_page()
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text[:300]))
        await page.goto(f"{base}blank.html", timeout=TIMEOUT * 1000)
        await asyncio.wait_for(page.evaluate(REGISTER_JS), TIMEOUT)
        await page.goto(base, timeout=TIMEOUT * 1000)
        prefix = f"{base}replay/w/{COLL}/"
        replayed = await wait_for_replay(page, prefix, console)
        title = await replayed.evaluate("document.title")
        if screenshot is not None:
            await page.screenshot(path=str(screenshot))
        controlled = next(f for f in page.frames if f.url.startswith(f"{base}replay/?"))
        yield ReplayWebPage(controlled, prefix, title)
    finally:
        await context.close()


# -- asking everyone, in several orders ----------------------------------------------------

@dataclass
class Tally:
    """Answers by (run, URL), each keyed by who answered ("live", "pywb[reversed]"...)."""

    answers: dict[tuple[int, str], dict[str, Answer]] = field(default_factory=dict)

    def add(self, query: Query, who: str, answer: Answer) -> None:
        self.answers.setdefault((query.run, query.url), {})[who] = answer

    def disagreements(self, base: str) -> list[str]:
        """One line per (URL, run) whose answers are not all the live site's, each answer
        shown as `<final URL> <status>/<raw status> <body>`."""
        out = []
        for (run, url), by_who in sorted(self.answers.items()):
            live = by_who.get("live")
            wrong = {who: a for who, a in by_who.items() if a != live}
            if wrong:
                shown = "; ".join(f"{who}: {a.describe(base)}" for who, a in wrong.items())
                expected = live.describe(base) if live else "(no live answer)"
                out.append(f"{url.removeprefix(base)} run {run}: live {expected}; {shown}")
        return out


async def ask_in_order(replayer: Replayer, queries: Iterable[Query], label: str,
                       tally: Tally) -> None:
    for query in queries:
        answer = await asyncio.wait_for(replayer.ask(query.timestamp, query.url), TIMEOUT)
        tally.add(query, f"{replayer.name}[{label}]", answer)


@asynccontextmanager
async def http_replayers(archive: Path, pywb_folder: Path) -> AsyncIterator[list[Replayer]]:
    """mirror serve (in-process) and pywb (a subprocess) over the same archive folder."""
    async with AsyncExitStack() as stack:
        session = await stack.enter_async_context(
            ClientSession(timeout=ClientTimeout(total=TIMEOUT)))
        runner, mirror_base = await start_replay_server(archive, Site("test"))
        stack.push_async_callback(runner.cleanup)
        pywb_base = await stack.enter_async_context(pywb({"site": archive}, pywb_folder))
        yield [HttpReplayer("mirror-serve", mirror_base, "", session),
               HttpReplayer("pywb", f"{pywb_base}site/", "mp_", session)]
