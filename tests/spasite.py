"""A site of plain pages and single-page-app pages on 127.0.0.1, for the browser capture.

`plain` pages are server-rendered articles (one with a small analytics script, which the
HTTP-only detection must not flag); `apps` app pages are empty shells that a script fills,
each of one kind, in turn (`KINDS`):

- "json": its text is fetched as JSON with a cache-busting `?_=<Date.now()>`;
- "routes": the same, plus client-side routes (`history.pushState`) rendered as anchors to
  `/app/<i>/view/<k>`, which are app pages too (the same shell) that no server-rendered
  HTML links: only the rendered DOM finds them;
- "lazy": the same, plus images below the fold that an IntersectionObserver loads;
- "scroll": the same, plus an infinite scroll: three batches fetched as the bottom comes
  into view, then an end mark;
- "script": no request at all: an inline script writes the text, and without scripts the
  page shows nothing but its <noscript> ("enable JavaScript").

Every app page but "script" also fetches `/api/site.json` (with its own `?_=`: the same
resource asked under another URL by each page) and shows its footer (`SITE_WORD`).
Every app page also tries a POST (`/api/track`) and a GET under `/private/` (which this
site's robots.txt disallows): requests mirror does not make; `posts` counts POSTs received.
Each app page's text carries words no other page has (`words(url)`), and `requisites(url)`
names the paths the browser must fetch for it (without the cache-busting query).

Every request is logged with its arrival time and the time its answer was ready (`hits`),
for politeness checks; `slow` makes every /api/ answer take that long (so two requests
served at once show as overlaps), and a path in `flaky` answers its first GET with a 503
and Retry-After: 1. The server
runs in a thread with its own event loop (so a `mirror run` in-process or in a child process
can crawl it) and stops at `stop()` or after `lifetime` seconds, whichever comes first.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web

KINDS = ("json", "routes", "lazy", "scroll", "script")
VIEWS = 2  # routes of a "routes" page
IMAGES = 3  # lazy images of a "lazy" page
BATCHES = 3  # batches of a "scroll" page's feed, then its end
ITEMS = 4  # items in a batch
ROBOTS = "User-agent: *\nDisallow: /private/\n"
#: a server stops by itself after this many seconds unless told otherwise
LIFETIME = 300.0
#: seconds between two ticks of the site's loop (how late it runs: SpaSite.lag)
TICK = 0.01
#: seconds the site may take to read a request once its loop runs
MARGIN = 0.005

#: the word of the footer every app page but "script" fetches (one JSON for all the pages)
SITE_WORD = "siteword"

APP_JS = r"""
(function () {
  var root = document.getElementById('root');
  function get(path) {
    return fetch(path + '?_=' + Date.now()).then(function (r) { return r.json(); });
  }
  function el(tag, text) {
    var e = document.createElement(tag);
    if (text) { e.textContent = text; }
    return e;
  }
  function show(path) {
    var m = path.match(/^\/app\/(\d+)(?:\/view\/(\d+))?$/);
    if (!m) { return; }
    var api = '/api/' + m[1] + (m[2] ? '/view/' + m[2] : '') + '.json';
    get(api).then(render);
  }
  function render(data) {
    root.innerHTML = '';
    root.appendChild(el('h1', data.title));
    root.appendChild(el('p', data.text));
    if (data.routes) { nav(data.routes); }
    if (data.images || data.feed) {
      var spacer = el('div', 'below the fold');
      spacer.style.height = '1500px';
      root.appendChild(spacer);
    }
    (data.images || []).forEach(lazy);
    if (data.feed) { feed(data.feed); }
  }
  function nav(routes) {
    var list = el('nav');
    routes.forEach(function (r) {
      var a = el('a', r.label);
      a.href = r.href;
      a.addEventListener('click', function (ev) {
        ev.preventDefault();
        history.pushState({}, '', r.href);
        show(r.href);
      });
      list.appendChild(a);
      list.appendChild(document.createTextNode(' '));
    });
    root.appendChild(list);
  }
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (e.isIntersecting) { e.target.src = e.target.dataset.src; seen.unobserve(e.target); }
    });
  });
  function lazy(src) {
    var img = el('img');
    img.dataset.src = src;
    img.width = 300;
    img.height = 300;
    img.style.display = 'block';
    root.appendChild(img);
    seen.observe(img);
  }
  function feed(path) {
    var list = el('ul'), mark = el('p', 'loading more'), batch = 0, busy = false;
    root.appendChild(list);
    root.appendChild(mark);
    var more = new IntersectionObserver(function (entries) {
      if (!entries[0].isIntersecting || busy) { return; }
      busy = true;
      get(path + '/' + batch).then(function (data) {
        data.items.forEach(function (t) {
          var li = el('li', t);
          li.style.height = '400px';
          list.appendChild(li);
        });
        batch += 1;
        busy = false;
        if (data.end) { mark.textContent = data.end; more.disconnect(); }
      });
    });
    more.observe(mark);
  }
  get('/api/site.json').then(function (data) {
    document.body.appendChild(el('footer', data.footer));
  });
  fetch('/api/track', {method: 'POST', body: location.pathname}).catch(function () {});
  fetch('/private/' + location.pathname.split('/')[2] + '.json').catch(function () {});
  show(location.pathname);
})();
"""

SHELL = ('<!doctype html><html><head><meta charset="utf-8"><title>App</title>'
         '<script src="/static/app.js" defer></script></head>'
         '<body><div id="root"></div></body></html>')
SCRIPT_ONLY = ('<!doctype html><html><head><meta charset="utf-8"><title>Script only</title>'
               "</head><body><noscript>You need to enable JavaScript to see this page."
               '</noscript><div id="main"></div><script>'
               "document.getElementById('main').innerHTML = '<h1>Written by a script</h1>"
               "<p>scriptword{i} is only here when scripts run.</p>';"
               "fetch('/api/track', {{method: 'POST'}}).catch(function () {{}});"
               "</script></body></html>")
ARTICLE = ("A server-rendered paragraph that a reader came for, long enough to be read "
           "without any script at all. ") * 4


@dataclass
class Hit:
    at: float  # time.monotonic() at arrival
    method: str
    path_qs: str
    ended: float | None = None  # when its answer was written (None while it is served)


def png(seed: int) -> bytes:
    """A valid 1x1 PNG whose pixel is `seed`'s colour (each image its own bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    pixel = bytes([0, seed & 255, (seed >> 8) & 255, 7])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(pixel)) + chunk(b"IEND", b""))


@dataclass
class SpaSite:
    """The site's pages and its request log; `serve()` runs it."""

    plain: int = 4
    apps: int = len(KINDS)
    base: str = ""
    hits: list[Hit] = field(default_factory=list)
    #: seconds each /api/ answer takes (a slow server: two requests served at once show)
    slow: float = 0.0
    #: /api/ paths whose first GET is answered 503 with Retry-After: 1
    flaky: frozenset[str] = frozenset()
    #: seconds every answer takes (a site across a network, not on loopback)
    latency: float = 0.0
    #: the home page links the app pages spread evenly among the plain ones (as a real
    #: site's would be), not all after them
    spread: bool = False
    #: (when, seconds late) of each wake-up of the site's loop ticking every TICK seconds
    lateness: list[tuple[float, float]] = field(default_factory=list)

    __test__ = False

    # -- what a test looks for ----------------------------------------------------------------
    def kind(self, i: int) -> str:
        return KINDS[i % len(KINDS)]

    def plain_paths(self) -> list[str]:
        return ["/"] + [f"/plain/{k}" for k in range(self.plain)]

    def app_paths(self) -> list[str]:
        """Every app page: the linked ones, and the routes only the rendered DOM links."""
        out = []
        for i in range(self.apps):
            out.append(f"/app/{i}")
            if self.kind(i) == "routes":
                out += [f"/app/{i}/view/{k}" for k in range(VIEWS)]
        return out

    def linked_app_paths(self) -> list[str]:
        """The app pages server-rendered HTML links (what an HTTP-only crawl can find)."""
        return [f"/app/{i}" for i in range(self.apps)]

    def words(self, path: str) -> list[str]:
        """Words an app page shows only when its scripts ran (none of them in its HTML)."""
        i, view = _parts(path)
        if view is not None:
            return [f"viewword{i}x{view}"]
        kind = self.kind(i)
        if kind == "script":
            return [f"scriptword{i}"]
        out = [f"appword{i}"]
        if kind == "scroll":
            out += [f"feedword{i}x{b}x{n}" for b in range(BATCHES) for n in range(ITEMS)]
            out.append(f"feedend{i}")
        return out

    def requisites(self, path: str) -> list[str]:
        """The paths the browser fetches for an app page (cache-busting query left off),
        besides the POST and the robots-disallowed GET mirror must not make."""
        i, view = _parts(path)
        kind = self.kind(i)
        if kind == "script":
            return []
        out = ["/static/app.js", "/api/site.json", f"/api/{i}/view/{view}.json"
               if view is not None else f"/api/{i}.json"]
        if kind == "lazy":
            out += [f"/img/{i}/{k}.png" for k in range(IMAGES)]
        if kind == "scroll":
            out += [f"/api/{i}/feed/{b}" for b in range(BATCHES)]
        return out

    def received(self, path: str) -> int:
        """GET requests the site received for `path` (any query)."""
        return sum(1 for h in self.hits if h.method == "GET" and h.path_qs.split("?")[0] == path)

    def counts(self) -> Counter[str]:
        """GET requests by path, the query left off."""
        return Counter(h.path_qs.split("?")[0] for h in self.hits if h.method == "GET")

    def posts(self) -> int:
        return sum(1 for h in self.hits if h.method != "GET")

    def lag(self, at: float) -> float:
        """How late the site may have logged a request it logged `at`: the site's loop
        (a thread sharing the GIL with the test's process, on a loaded machine) runs late
        at times, and a request that arrived while it could not run is logged when it runs
        again. A tick due in that stretch woke when it ran again, late by at least the
        stretch less one TICK: the lag is at most the lateness of the ticks that woke around
        `at` (within five ticks), plus a TICK, plus MARGIN for reading the request."""
        near = [late for when, late in self.lateness if abs(when - at) <= 5 * TICK]
        return max(near, default=0.0) + TICK + MARGIN

    def too_close(self, delay: float) -> list[tuple[float, Hit, Hit]]:
        """Consecutive requests whose logged arrivals are closer than `delay`, even allowing
        for how late the earlier one may have been logged (`lag`): (gap, earlier, later)."""
        hits = sorted(self.hits, key=lambda h: h.at)
        return [(b.at - a.at, a, b) for a, b in zip(hits, hits[1:], strict=False)
                if b.at - a.at < delay - self.lag(a.at)]

    async def watch(self) -> None:
        """Tick every TICK seconds, noting how late each wake-up is (`lag`)."""
        while True:
            before = time.monotonic()
            await asyncio.sleep(TICK)
            now = time.monotonic()
            self.lateness.append((now, now - before - TICK))

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of requests served at once: one arrived before the other's answer was
        written (with per_host = 1, none)."""
        hits = sorted(self.hits, key=lambda h: h.at)
        return [(a.path_qs, b.path_qs) for a, b in zip(hits, hits[1:], strict=False)
                if a.ended is None or b.at < a.ended]

    # -- the pages ----------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.middlewares.append(self._log)
        add = app.router.add_get
        add("/", self._home)
        add("/robots.txt", _fixed(ROBOTS, "text/plain"))
        add("/plain/{k:\\d+}", self._plain)
        add("/static/app.js", _fixed(APP_JS, "text/javascript"))
        add("/static/analytics.js", _fixed("void 0;", "text/javascript"))
        add("/app/{i:\\d+}", self._shell)
        add("/app/{i:\\d+}/view/{k:\\d+}", self._shell)
        add("/api/site.json", _fixed(json.dumps({"footer": f"{SITE_WORD} is in every footer."}),
                                     "application/json"))
        add("/api/{i:\\d+}.json", self._content)
        add("/api/{i:\\d+}/view/{k:\\d+}.json", self._view)
        add("/api/{i:\\d+}/feed/{b:\\d+}", self._batch)
        add("/img/{i:\\d+}/{k:\\d+}.png", self._image)
        app.router.add_post("/api/track", _fixed("", "text/plain"))
        add("/private/{name}", _fixed('{"secret": "mirror must not fetch this"}',
                                      "application/json"))
        return app

    @web.middleware
    async def _log(self, request: web.Request, handler: web.RequestHandler
                   ) -> web.StreamResponse:
        hit = Hit(time.monotonic(), request.method, request.path_qs)
        self.hits.append(hit)
        try:
            if request.path.startswith("/api/") and self.slow:
                await asyncio.sleep(self.slow)
            if self.latency:
                await asyncio.sleep(self.latency)
            first = sum(1 for h in self.hits if h.path_qs.split("?")[0] == request.path) == 1
            if request.path in self.flaky and first:
                return web.Response(status=503, text="busy", headers={"Retry-After": "1"})
            return await handler(request)
        finally:
            hit.ended = time.monotonic()

    async def _home(self, request: web.Request) -> web.StreamResponse:
        links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in self._home_links())
        return _html(f"<title>Home</title><h1>Home</h1><p>{ARTICLE}</p><ul>{links}</ul>")

    def _home_links(self) -> list[str]:
        plain, apps = self.plain_paths()[1:], self.linked_app_paths()
        if not self.spread or not apps:
            return plain + apps
        every = max(1, len(plain) // len(apps))
        out: list[str] = []
        for n, path in enumerate(plain):
            if n % every == every // 2 and len(out) - n < len(apps):
                out.append(apps[len(out) - n])
            out.append(path)
        return out + apps[len(out) - len(plain):]

    async def _plain(self, request: web.Request) -> web.StreamResponse:
        k = int(request.match_info["k"])
        if k >= self.plain:
            raise web.HTTPNotFound()
        script = '<script src="/static/analytics.js"></script>' if k == 0 else ""
        nxt = f"/plain/{(k + 1) % self.plain}"
        return _html(f"<title>Plain {k}</title>{script}<h1>Plain page {k}</h1>"
                     f"<p>plainword{k} {ARTICLE}</p><a href='{nxt}'>next</a> <a href='/'>home</a>")

    def _index(self, request: web.Request) -> int:
        i = int(request.match_info["i"])
        if i >= self.apps:
            raise web.HTTPNotFound()
        return i

    async def _shell(self, request: web.Request) -> web.StreamResponse:
        i = self._index(request)
        if "k" in request.match_info and (self.kind(i) != "routes"
                                          or int(request.match_info["k"]) >= VIEWS):
            raise web.HTTPNotFound()
        if self.kind(i) == "script":
            return _html(SCRIPT_ONLY.format(i=i), whole=True)
        return _html(SHELL, whole=True)

    async def _content(self, request: web.Request) -> web.StreamResponse:
        i = self._index(request)
        kind = self.kind(i)
        if kind == "script":
            raise web.HTTPNotFound()
        data: dict[str, object] = {"title": f"App {i}",
                                   "text": f"appword{i} is the content of app page {i}."}
        if kind == "routes":
            data["routes"] = self._routes(i)
        if kind == "lazy":
            data["images"] = [f"/img/{i}/{k}.png" for k in range(IMAGES)]
        if kind == "scroll":
            data["feed"] = f"/api/{i}/feed"
        return _json(data)

    def _routes(self, i: int) -> list[dict[str, str]]:
        return [{"label": f"view {k}", "href": f"/app/{i}/view/{k}"} for k in range(VIEWS)]

    async def _view(self, request: web.Request) -> web.StreamResponse:
        i, k = self._index(request), int(request.match_info["k"])
        if self.kind(i) != "routes" or k >= VIEWS:
            raise web.HTTPNotFound()
        return _json({"title": f"App {i} view {k}", "routes": self._routes(i),
                      "text": f"viewword{i}x{k} is what view {k} of app {i} shows."})

    async def _batch(self, request: web.Request) -> web.StreamResponse:
        i, b = self._index(request), int(request.match_info["b"])
        if self.kind(i) != "scroll" or b >= BATCHES:
            raise web.HTTPNotFound()
        data: dict[str, object] = {"items": [f"feedword{i}x{b}x{n}" for n in range(ITEMS)]}
        if b == BATCHES - 1:
            data["end"] = f"feedend{i}: nothing more"
        return _json(data)

    async def _image(self, request: web.Request) -> web.StreamResponse:
        i, k = self._index(request), int(request.match_info["k"])
        if self.kind(i) != "lazy" or k >= IMAGES:
            raise web.HTTPNotFound()
        return web.Response(body=png(i * IMAGES + k), content_type="image/png")


def _parts(path: str) -> tuple[int, int | None]:
    m = re.fullmatch(r"/app/(\d+)(?:/view/(\d+))?", path)
    if m is None:
        raise ValueError(f"not an app page: {path}")
    return int(m[1]), int(m[2]) if m[2] is not None else None


def _html(body: str, whole: bool = False) -> web.Response:
    text = body if whole else f"<!doctype html><html><body>{body}</body></html>"
    return web.Response(text=text, content_type="text/html", charset="utf-8")


def _fixed(body: str, content_type: str) -> Callable[[web.Request],
                                                     Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, content_type=content_type)
    return handler


def _json(data: object) -> web.Response:
    return web.Response(text=json.dumps(data), content_type="application/json")


@contextmanager
def serve(plain: int = 4, apps: int = len(KINDS), lifetime: float = LIFETIME, *,
          slow: float = 0.0, flaky: frozenset[str] = frozenset(), latency: float = 0.0,
          spread: bool = False) -> Iterator[SpaSite]:
    """`with serve(plain=3, apps=5) as site:` the site on 127.0.0.1 (`site.base`) in a thread
    of its own, stopped on leaving the block or after `lifetime` seconds."""
    site = SpaSite(plain=plain, apps=apps, slow=slow, flaky=flaky, latency=latency,
                   spread=spread)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="spa-site", daemon=True)
    thread.start()
    runner = web.AppRunner(site.app(), access_log=None)
    watching: list[asyncio.Task[None]] = []

    async def start() -> str:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        loop.call_later(lifetime, lambda: loop.create_task(runner.cleanup()))
        watching.append(loop.create_task(site.watch()))
        return f"http://{host}:{port}/"

    try:
        site.base = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
        yield site
    finally:
        try:
            for task in watching:
                loop.call_soon_threadsafe(task.cancel)
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
