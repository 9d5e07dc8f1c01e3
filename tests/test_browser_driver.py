"""mirror/browser against Debian's Chromium and an aiohttp site on 127.0.0.1 whose app page
fetches JSON, loads a lazy image and scrolls infinitely: every request of a page goes through
the Answerer (the site sees none when the Answerer answers from a dict), a hung page is
abandoned at page_timeout, a killed browser is restarted and its page retried once, the pool
restarts after N pages and past an RSS ceiling, and no browser process outlives the pool."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import struct
import sys
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import ClientSession

from mirror.browser import (
    BrowserAnswer,
    BrowserError,
    BrowserNotFound,
    BrowserPool,
    BrowserRequest,
    BrowserSettings,
    Rendered,
    find_browser,
)
from mirror.browser.launch import group_members, kill_group

pytestmark = pytest.mark.browser

ROUTES = ["/app/route/1", "/app/route/2"]
APP = """<!doctype html><html><head><title>App</title>
<style>.item { height: 400px } img { display: block; width: 10px; height: 10px }</style></head>
<body><h1>App</h1><div id="content"></div><nav id="nav"></nav>
<div style="height: 2000px">spacer</div>
<img class="lazy" data-src="/img/lazy1.png" alt="lazy">
<div id="feed"></div><div id="sentinel">end</div>
<script>
history.replaceState(null, '', '/app/start');
fetch('/api/content.json?_=' + Date.now()).then(r => r.json()).then(j => {
  document.getElementById('content').textContent = j.message;
  for (const route of j.routes) {
    const a = document.createElement('a');
    a.href = route; a.textContent = route;
    a.onclick = e => { e.preventDefault(); history.pushState(null, '', route); };
    document.getElementById('nav').appendChild(a);
  }
});
const lazy = new IntersectionObserver(es => es.forEach(e => {
  if (e.isIntersecting) { e.target.src = e.target.dataset.src; lazy.unobserve(e.target); } }));
document.querySelectorAll('img.lazy').forEach(i => lazy.observe(i));
let batch = 0, loading = false;
new IntersectionObserver(es => {
  if (!es[0].isIntersecting || loading || batch >= 3) return;
  loading = true;
  fetch('/api/batch/' + (batch + 1) + '.json').then(r => r.json()).then(j => {
    batch++;
    for (const t of j.items) {
      const d = document.createElement('div');
      d.className = 'item'; d.textContent = t;
      document.getElementById('feed').appendChild(d);
    }
    loading = false;
  });
}).observe(document.getElementById('sentinel'));
</script></body></html>"""


ENDLESS = """<!doctype html><title>Endless</title><style>#feed div { height: 600px }</style>
<div id="feed"></div><p id="sentinel">more</p><script>
let n = 0;
new IntersectionObserver(es => { if (es[0].isIntersecting) load(); })
  .observe(document.getElementById('sentinel'));
function load() {
  fetch('/api/endless/' + (++n) + '.json').then(r => r.json()).then(j => {
    for (const t of j.items) { const d = document.createElement('div'); d.textContent = t;
      document.getElementById('feed').appendChild(d); } }); }
</script>"""
#: a WebSocket (which the Fetch domain does not pause) to the site; the page's load waits
#: for its outcome (the held image is answered once /api/ws-outcome is asked for)
SOCKET = """<!doctype html><title>Socket</title><script>
const ws = new WebSocket('ws://' + location.host + '/ws');
const tell = what => () => fetch('/api/ws-outcome?' + what);
ws.onopen = tell('open'); ws.onerror = tell('error');
</script><img src="/img/held.png">"""


def png() -> bytes:
    """A 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


#: path -> (content type, body): what the site serves and the dict answerer answers
CONTENT: dict[str, tuple[str, bytes]] = {
    "/app": ("text/html; charset=utf-8", APP.encode()),
    "/plain": ("text/html; charset=utf-8",
               b"<!doctype html><title>Plain</title><p>plain text <a href='/app'>app</a>"),
    "/hang-js": ("text/html", b"<title>Hang</title><script>for (;;) {}</script>"),
    "/hang-request": ("text/html", b"<title>Waits</title><script>fetch('/never')</script>"),
    "/polling": ("text/html", b"<title>Polling</title><p>polled</p><script>setInterval("
                 b"() => fetch('/api/content.json?_=' + Date.now()), 100)</script>"),
    "/endless": ("text/html", ENDLESS.encode()),
    "/socket": ("text/html", SOCKET.encode()),
    "/worker": ("text/html", b"<title>Worker</title><p id=out></p><script>new Worker("
                b"'/worker.js').onmessage = e => { out.textContent = e.data; }</script>"),
    "/worker.js": ("text/javascript", b"fetch('/api/content.json?from=worker')"
                   b".then(r => r.json()).then(j => postMessage('worker: ' + j.message))"),
    "/framed": ("text/html", b"<title>Framed</title><iframe src='http://other.test/inner'>"
                b"</iframe>"),
    "/inner": ("text/html", b"<p id=out></p><script>fetch('/api/content.json?from=frame')"
               b".then(r => r.json()).then(j => { out.textContent = j.message; })</script>"),
    "/sw": ("text/html", b"<title>SW</title><p id=out>waiting</p><script>"
            b"navigator.serviceWorker.register('/sw.js').then(() => fetch('/api/content.json'))"
            b".then(r => r.text()).then(x => { out.textContent = x; })"
            b".catch(e => { out.textContent = 'refused'; })</script>"),
    "/sw.js": ("text/javascript", b"self.addEventListener('fetch', e => "
               b"e.respondWith(new Response('from the service worker')))"),
    "/api/content.json": ("application/json", json.dumps(
        {"message": "content from JSON", "routes": ROUTES}).encode()),
    "/img/lazy1.png": ("image/png", png()),
    **{f"/api/batch/{n}.json": ("application/json", json.dumps(
        {"items": [f"batch {n} item {i}" for i in (1, 2, 3)]}).encode()) for n in (1, 2, 3)},
}
NEVER = "/never"  # a request the answerers never answer
REDIRECTS = {"/old": "/plain"}


def browser_settings(**changes: Any) -> BrowserSettings:
    try:
        executable = find_browser(os.environ.get("MIRROR_CHROMIUM") or None)
    except BrowserNotFound:
        executable = None
    if executable is None:
        pytest.skip("no Chromium (apt-get install chromium; .ci/run does)")
    return BrowserSettings(executable=executable, **{"page_timeout": 30.0, "scroll": 20,
                                                     **changes})


class DictAnswerer:
    """Answers from CONTENT, never from the network; logs each request's path and query."""

    def __init__(self, on_request: Callable[[BrowserRequest], None] | None = None) -> None:
        self.log: list[str] = []
        self.requests: list[BrowserRequest] = []
        self.on_request = on_request
        self.ws_outcome = asyncio.Event()

    async def __call__(self, request: BrowserRequest) -> BrowserAnswer | None:
        parts = urlsplit(request.url)
        self.log.append(parts.path + (f"?{parts.query}" if parts.query else ""))
        self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)
        if parts.path == NEVER:
            await asyncio.Event().wait()
        if parts.path == "/api/ws-outcome":
            self.ws_outcome.set()
        if parts.path == "/img/held.png":
            await self.ws_outcome.wait()
            return BrowserAnswer(200, [("Content-Type", "image/png")], png())
        if parts.path in REDIRECTS:
            return BrowserAnswer(301, [("Location", REDIRECTS[parts.path])], b"")
        if parts.path.startswith("/api/endless/"):
            return BrowserAnswer(200, [("Content-Type", "application/json")], json.dumps(
                {"items": [f"{parts.path} {i}" for i in (1, 2)]}).encode())
        if parts.path not in CONTENT:
            return BrowserAnswer(404, [("Content-Type", "text/plain")], b"not here")
        kind, body = CONTENT[parts.path]
        return BrowserAnswer(200, [("Content-Type", kind)], body)


async def serve_content(make_site: Callable[[], Awaitable[Any]]) -> Any:
    site = await make_site()
    for path, (kind, body) in CONTENT.items():
        site.page(path, body, content_type=kind)
    return site


async def group_gone(pid: int) -> bool:
    """Whether the process group `pid` leads is gone (within 5 s of its being stopped)."""
    for _ in range(100):
        if not group_members(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def render_one(make_site: Callable[[], Awaitable[Any]], path: str,
                     **settings: Any) -> tuple[Any, DictAnswerer, Rendered]:
    """The site, the Answerer and the page at `path`, rendered by a pool of its own."""
    site = await serve_content(make_site)
    answer = DictAnswerer()
    async with BrowserPool(browser_settings(**settings)) as pool:
        rendered = await pool.render(site.base + path, answer)
    return site, answer, rendered


async def render_plain(pool: BrowserPool, base: str, times: int) -> list[int | None]:
    """Render /plain `times` times; the browser's pid after each."""
    pids = []
    for _ in range(times):
        await pool.render(base + "plain", DictAnswerer())
        pids.append(pool.pid)
    return pids


def assert_app_rendered(rendered: Any, base: str) -> None:
    assert rendered.title == "App"
    assert rendered.url == base + "app/start"  # replaceState: the URL after routing
    assert "content from JSON" in rendered.text
    assert all(f"batch {n} item {i}" in rendered.text for n in (1, 2, 3) for i in (1, 2, 3))
    assert 'src="/img/lazy1.png"' in rendered.html  # the IntersectionObserver saw it
    assert rendered.html.startswith("<!DOCTYPE html><html>")
    assert [base + r.lstrip("/") for r in ROUTES] == list(rendered.links)  # pushState routes


async def test_every_request_is_answered_by_the_answerer_and_the_site_sees_none(
        make_site: Any) -> None:
    site = await serve_content(make_site)
    answer = DictAnswerer()
    async with BrowserPool(browser_settings()) as pool:
        rendered = await pool.render(site.base + "app", answer)
        assert pool.version and pool.loads == 1 and pool.restarts == 0
    assert site.log == []
    assert_app_rendered(rendered, site.base)
    assert rendered.requests == len(answer.log)
    paths = [p.split("?")[0] for p in answer.log]
    assert {"/app", "/api/content.json", "/img/lazy1.png", "/api/batch/1.json",
            "/api/batch/2.json", "/api/batch/3.json"} <= set(paths)
    assert "/api/batch/4.json" not in paths  # three batches, then the scroll stopped
    navigations = [r.url for r in answer.requests if r.is_navigation]
    assert navigations == [site.base + "app"]
    assert answer.requests[0].resource_type == "Document"
    assert rendered.screenshot is None


async def test_a_fetching_answerer_is_the_sites_only_client(make_site: Any) -> None:
    site = await serve_content(make_site)
    log: list[str] = []
    async with ClientSession() as http:
        async def answer(request: BrowserRequest) -> BrowserAnswer | None:
            parts = urlsplit(request.url)
            log.append(parts.path + (f"?{parts.query}" if parts.query else ""))
            async with http.request(request.method, request.url, data=request.body,
                                    allow_redirects=False) as response:
                body = await response.read()
                return BrowserAnswer(response.status, list(response.headers.items()), body)

        async with BrowserPool(browser_settings(screenshot=True)) as pool:
            rendered = await pool.render(site.base + "app", answer)
    assert sorted(site.log) == sorted(log)
    assert any(p.startswith("/api/content.json?_=") for p in log)  # the cache-buster went too
    assert_app_rendered(rendered, site.base)
    assert rendered.screenshot is not None and rendered.screenshot.startswith(b"\x89PNG")


@pytest.mark.parametrize("hang", ["/hang-js", "/hang-request"])
async def test_a_hung_page_is_abandoned_at_page_timeout_and_the_next_renders(
        make_site: Any, hang: str) -> None:
    site = await serve_content(make_site)
    answer = DictAnswerer()
    async with BrowserPool(browser_settings(page_timeout=4.0, tabs=1)) as pool:
        with pytest.raises(BrowserError) as caught:
            await pool.render(site.base + hang.lstrip("/"), answer)
        assert caught.value.kind == "timeout" and str(caught.value) == "timeout after 4 s"
        rendered = await pool.render(site.base + "plain", answer)
        assert rendered.title == "Plain" and rendered.links == (site.base + "app",)
    assert site.log == []


@pytest.mark.parametrize("point", ["/app", "/api/content.json", "/img/lazy1.png",
                                   "/api/batch/2.json"])
async def test_a_browser_killed_during_a_render_is_restarted_and_the_page_retried_once(
        make_site: Any, point: str) -> None:
    """Each request of the app page is a point where kill -9 of the browser lands: the
    document, the JSON fetched at load, the lazy image and a batch seen while scrolling."""
    site = await serve_content(make_site)
    killed: list[int] = []

    def kill_once(request: BrowserRequest) -> None:
        if urlsplit(request.url).path == point and not killed:
            assert pool.pid is not None
            killed.append(pool.pid)
            os.kill(pool.pid, signal.SIGKILL)

    async with BrowserPool(browser_settings()) as pool:
        rendered = await pool.render(site.base + "app", DictAnswerer(kill_once))
        assert (pool.restarts, pool.loads) == (1, 2)
        assert killed and pool.pid != killed[0]
        assert await group_gone(killed[0])
    assert_app_rendered(rendered, site.base)


async def test_a_browser_killed_twice_fails_the_page_as_crashed(make_site: Any) -> None:
    site = await serve_content(make_site)
    pids: list[int] = []

    def kill(request: BrowserRequest) -> None:
        if request.is_navigation and pool.pid is not None:
            pids.append(pool.pid)
            os.kill(pool.pid, signal.SIGKILL)

    async with BrowserPool(browser_settings()) as pool:
        with pytest.raises(BrowserError) as caught:
            await pool.render(site.base + "app", DictAnswerer(kill))
        assert caught.value.kind == "crashed"
        assert (len(set(pids)), pool.loads, pool.restarts) == (2, 2, 1)
        rendered = await pool.render(site.base + "plain", DictAnswerer())
        assert rendered.title == "Plain" and pool.restarts == 2


async def test_the_browser_restarts_after_restart_pages_loads(make_site: Any,
                                                              caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="mirror.browser")
    site = await serve_content(make_site)
    async with BrowserPool(browser_settings(restart_pages=2)) as pool:
        pids = await render_plain(pool, site.base, 5)
        assert (pool.loads, pool.restarts) == (5, 2), caplog.text
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4], caplog.text
    assert all([await group_gone(pid) for pid in set(pids) if pid is not None])


async def test_the_browser_restarts_past_its_memory_ceiling(make_site: Any) -> None:
    site = await serve_content(make_site)
    async with BrowserPool(browser_settings(max_rss_mb=1)) as pool:
        pids = await render_plain(pool, site.base, 3)
        assert (pool.loads, pool.restarts) == (3, 2)
    assert len(set(pids)) == 3


async def test_no_browser_process_outlives_the_pool_even_when_cancelled(
        make_site: Any) -> None:
    site = await serve_content(make_site)
    waiting = asyncio.Event()
    pids = []

    def seen(request: BrowserRequest) -> None:
        if urlsplit(request.url).path == NEVER:
            waiting.set()

    async def crawl() -> None:
        async with BrowserPool(browser_settings(tabs=2)) as pool:
            await pool.render(site.base + "plain", DictAnswerer())
            assert pool.pid is not None
            pids.append(pool.pid)
            assert group_members(pool.pid)  # the browser's processes, seen in /proc
            await asyncio.gather(pool.render(site.base + "hang-request", DictAnswerer(seen)),
                                 pool.render(site.base + "hang-js", DictAnswerer()))

    task = asyncio.create_task(crawl())
    await asyncio.wait_for(waiting.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await group_gone(pids[0])


async def test_find_browser_names_a_configured_browser_that_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-chromium"
    with pytest.raises(BrowserNotFound) as caught:
        find_browser(str(missing))
    assert str(missing) in str(caught.value) and caught.value.kind == "launch"
    with pytest.raises(BrowserNotFound, match="no-such-browser-name"):
        find_browser("no-such-browser-name")
    if Path("/usr/bin/chromium").exists():
        assert find_browser("/usr/bin/chromium") == Path("/usr/bin/chromium")
        assert find_browser() is not None


async def test_a_page_answered_with_nothing_fails_to_load(make_site: Any) -> None:
    site = await serve_content(make_site)

    async def nothing(request: BrowserRequest) -> BrowserAnswer | None:
        return None

    async with BrowserPool(browser_settings()) as pool:
        with pytest.raises(BrowserError, match="ERR_BLOCKED_BY_CLIENT"):
            await pool.render(site.base + "plain", nothing)
    assert site.log == []


async def test_a_page_that_polls_forever_is_read_before_page_timeout(make_site: Any) -> None:
    site, answer, rendered = await render_one(make_site, "polling", page_timeout=6.0)
    assert rendered.title == "Polling" and rendered.text == "polled"
    assert rendered.requests == len(answer.log) >= 2


async def test_a_tab_is_kept_for_the_next_page_and_hears_nothing_of_the_last(
        make_site: Any) -> None:
    """A tab whose page rendered is blanked and loads the next page (no new tab, no new
    renderer per page); the page before, polling every 100 ms, has nothing answered by the
    next page's Answerer. A page that fails (a timeout) takes its tab with it."""
    site = await serve_content(make_site)
    async with BrowserPool(browser_settings(tabs=1, page_timeout=4.0)) as pool:
        await pool.render(site.base + "polling", DictAnswerer())
        browser = pool._browser
        assert browser is not None and len(browser.windows) == 1
        kept = browser.windows[0]
        after = DictAnswerer()
        rendered = await pool.render(site.base + "plain", after)
        await asyncio.sleep(0.5)  # the polling page's next poll would have come by now
        assert rendered.title == "Plain" and pool._browser is browser
        assert browser.windows == [kept]  # the same tab, kept again
        assert [p for p in after.log if not p.startswith("/favicon")] == ["/plain"], after.log
        with pytest.raises(BrowserError):
            await pool.render(site.base + "hang-request", DictAnswerer())
        assert browser.windows == []  # closed with its failed page
        assert (await pool.render(site.base + "plain", DictAnswerer())).title == "Plain"


@pytest.mark.parametrize("scroll", [0, 3])
async def test_autoscroll_is_bounded_on_an_endless_page(make_site: Any, scroll: int) -> None:
    site, answer, rendered = await render_one(make_site, "endless", scroll=scroll)
    batches = [p for p in answer.log if p.startswith("/api/endless/")]
    if scroll == 0:
        assert batches == ["/api/endless/1.json"]
    else:  # one at load, at most one per scroll step
        assert 2 <= len(batches) <= scroll + 1 and "/api/endless/2.json 1" in rendered.text


async def test_a_websocket_never_reaches_the_site(make_site: Any) -> None:
    """The Fetch domain does not pause WebSockets: the browser's dead proxy refuses them."""
    site, answer, rendered = await render_one(make_site, "socket")
    assert rendered.title == "Socket"
    assert "/api/ws-outcome?error" in answer.log and site.log == []


async def test_a_redirect_answered_is_followed(make_site: Any) -> None:
    site, answer, rendered = await render_one(make_site, "old")
    assert (rendered.url, rendered.title) == (site.base + "plain", "Plain")
    assert answer.log[:2] == ["/old", "/plain"]
    assert [r.is_navigation for r in answer.requests[:2]] == [True, True]


async def test_a_renderer_killed_during_a_render_restarts_the_browser_once(
        make_site: Any) -> None:
    """Inspector.targetCrashed: the renderers killed, not the browser."""
    site = await serve_content(make_site)
    killed: list[int] = []

    def kill_renderers(request: BrowserRequest) -> None:
        if urlsplit(request.url).path == "/api/content.json" and not killed:
            assert pool.pid is not None
            for pid in group_members(pool.pid):
                if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    async with BrowserPool(browser_settings()) as pool:
        rendered = await pool.render(site.base + "app", DictAnswerer(kill_renderers))
        assert killed and (pool.restarts, pool.loads) == (1, 2)
    assert_app_rendered(rendered, site.base)


async def test_the_requests_of_a_worker_and_a_cross_site_frame_go_through_the_answerer(
        make_site: Any) -> None:
    site = await serve_content(make_site)
    answer = DictAnswerer()
    async with BrowserPool(browser_settings()) as pool:
        worker = await pool.render(site.base + "worker", answer)
        framed = await pool.render(site.base + "framed", answer)
    assert worker.text == "worker: content from JSON"
    asked = [r.url for r in answer.requests]
    assert site.base + "api/content.json?from=worker" in asked
    assert "http://other.test/inner" in asked  # a frame of another site: its own process
    assert "http://other.test/api/content.json?from=frame" in asked
    assert framed.title == "Framed" and site.log == []


async def test_a_service_worker_never_reaches_the_site(make_site: Any) -> None:
    """The page's Fetch domain does not pause a service worker's script: the dead proxy
    refuses it, so no service worker answers for the page either."""
    site, answer, rendered = await render_one(make_site, "sw")
    assert rendered.text == "refused" and site.log == []
    assert "/sw.js" not in answer.log


#: a process that renders a page, says its browser's pid, and dies as by kill -9
DIES_MID_RUN = """
import asyncio, os, sys
sys.path.insert(0, sys.argv[1])
from test_browser_driver import DictAnswerer, browser_settings
from mirror.browser import BrowserPool

async def main():
    pool = BrowserPool(browser_settings())
    await pool.render("http://127.0.0.1:1/plain", DictAnswerer())
    print(pool.pid, flush=True)
    os._exit(9)

asyncio.run(main())
"""


async def test_no_browser_process_outlives_a_killed_mirror(tmp_path: Path) -> None:
    """The kernel kills the browser with the process that started it (PR_SET_PDEATHSIG);
    a temporary folder too long for Chromium's socket is not used for the profile."""
    browser_settings()  # skips without Chromium
    long_tmp = tmp_path / ("t" * 80)
    long_tmp.mkdir()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DIES_MID_RUN, str(Path(__file__).parent),
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "TMPDIR": str(long_tmp)})
    out, _ = await asyncio.wait_for(child.communicate(), 120)
    assert child.returncode == 9
    pid = int(out.split()[-1])
    try:
        assert await group_gone(pid)
    finally:
        kill_group(pid, signal.SIGKILL)  # what a failure would leave behind
