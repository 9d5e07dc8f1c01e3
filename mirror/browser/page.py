"""One page in the browser: a tab in its own browser context whose every request is paused
(Fetch domain, Request stage) and answered by the caller's Answerer; the page loaded, waited
for until the network is idle, autoscrolled, read. Bounded as a whole by page_timeout; a
crash of the tab or of the browser ends it with BrowserError("crashed")."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from mirror.browser.api import (
    Answerer,
    BrowserError,
    BrowserRequest,
    BrowserSettings,
    Rendered,
)
from mirror.browser.cdp import CDPConnection
from mirror.browser.fulfil import ask, fulfil, request_body, without_fragment

log = logging.getLogger(__name__)

#: the network is idle when no request has been in flight for this long (seconds)
IDLE = 0.5
#: a scroll step short of the bottom waits this long for a request it brought on (seconds)
STEP_QUIET = 0.2
#: past this share of page_timeout, a page whose network never rests (polling) is read as
#: soon as no request is in flight: one whose request is never answered still times out
PATIENCE = 0.75
#: closing a tab (its browser context) may take this long before the browser is suspect
CLOSE_TIMEOUT = 5.0

READ_PAGE = """(() => {
  const d = document, seen = new Set(), links = [];
  for (const a of d.querySelectorAll('a[href], area[href]')) {
    let u;
    try { u = new URL(a.getAttribute('href'), d.baseURI); } catch (e) { continue; }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') continue;
    u.hash = '';
    if (!seen.has(u.href)) { seen.add(u.href); links.push(u.href); }
  }
  const doctype = d.doctype ? new XMLSerializer().serializeToString(d.doctype) : '';
  return {url: location.href, links,
          html: doctype + (d.documentElement ? d.documentElement.outerHTML : ''),
          text: d.body ? d.body.innerText : '',
          title: d.querySelector('title') ? d.title : null};
})()"""
SCROLL = "window.scrollBy(0, window.innerHeight)"
HEIGHT = """(() => { const e = document.scrollingElement || document.documentElement;
  return [e.scrollHeight, window.scrollY + window.innerHeight >= e.scrollHeight - 2]; })()"""


@dataclass(frozen=True)
class Window:
    """A tab kept open between two pages (blank, its requests still paused)."""

    context: str
    target: str
    session: str


class Tab:
    """A page load. `run(url)` gives the Rendered page; `close()` disposes of the tab, and
    returns False when the browser did not do so in time (then it is best restarted);
    `keep()` instead blanks it for the next page and gives its Window. A tab made with a
    Window loads its page there: opening a new tab costs a renderer process and 0.2-0.5 s
    of a 1 s render."""

    def __init__(self, conn: CDPConnection, settings: BrowserSettings, answer: Answerer,
                 window: Window | None = None) -> None:
        self.conn, self.settings, self.answer = conn, settings, answer
        self.window = window
        self.done = False  # the page is read: its requests are no longer answered
        self.requests = 0
        self.scrolls = 0
        self.in_flight = 0
        self.context: str | None = None
        self.target: str | None = None
        self.session: str | None = None
        self.sessions: set[str] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.lifecycle: list[tuple[str, str, str]] = []  # (frame, loader, name)
        self.failure: asyncio.Future[BrowserError] = asyncio.get_running_loop().create_future()
        self.last_activity = asyncio.get_running_loop().time()
        self.patience_ends = self.last_activity + settings.page_timeout * PATIENCE

    # ----------------------------------------------------------------- the whole render

    async def run(self, url: str) -> Rendered:
        """Render `url`, within page_timeout, or BrowserError ("timeout", "crashed", ...)."""
        steps = asyncio.ensure_future(self._steps(url))
        racing: set[asyncio.Future[Any]] = {steps, self.failure}
        try:
            done, _ = await asyncio.wait(racing, timeout=self.settings.page_timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            if steps in done:
                return steps.result()
            if self.failure in done:
                raise self.failure.result()
            raise BrowserError("timeout", f"timeout after {self.settings.page_timeout:g} s")
        finally:
            if not steps.done():
                steps.cancel()
                await asyncio.gather(steps, return_exceptions=True)

    async def _steps(self, url: str) -> Rendered:
        clock = asyncio.get_running_loop().time
        marks = [clock()]
        for step in (self._open, lambda: self._load(url), self._idle, self._scroll):
            await step()
            marks.append(clock())
        page = await self._eval(READ_PAGE)
        shot = await self._screenshot() if self.settings.screenshot else None
        spans = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        log.info("browser: rendered %s in %.2f s (tab %.2f, load %.2f, idle %.2f, scroll "
                 "%.2f over %d steps; %d requests)", url, clock() - marks[0], *spans,
                 self.scrolls, self.requests)
        return Rendered(url=page["url"], html=page["html"], text=page["text"],
                        title=page["title"], links=tuple(page["links"]),
                        requests=self.requests, screenshot=shot)

    async def keep(self) -> Window | None:
        """After a page rendered: the tab blanked (its page's scripts stopped), for the
        next page; None when that failed (then the tab is closed)."""
        if self.context is None or self.target is None or self.session is None \
                or self.conn.closed.done() or self.failure.done():
            return None
        self.done = True  # a request the page still makes is failed, not answered
        await self._cancel_tasks()
        try:
            await asyncio.wait_for(self._load("about:blank"), CLOSE_TIMEOUT)
        except (BrowserError, TimeoutError) as exc:
            log.debug("browser: a tab not blanked for the next page (%s)", exc)
            return None
        self._unlisten()
        window, self.context = Window(self.context, self.target, self.session), None
        return window

    async def close(self) -> bool:
        await self._cancel_tasks()
        self._unlisten()
        if self.context is None or self.conn.closed.done():
            return self.context is None
        try:
            await self.conn.call("Target.disposeBrowserContext",
                                 {"browserContextId": self.context}, timeout=CLOSE_TIMEOUT)
        except BrowserError as exc:
            log.warning("browser: the tab of a page did not close: %s", exc)
            return False
        return True

    async def _cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def _unlisten(self) -> None:
        for session in self.sessions:
            self.conn.unlisten(session)

    # ----------------------------------------------------------------- steps

    async def _open(self) -> None:
        if self.window is not None:
            self.context, self.target = self.window.context, self.window.target
            self.session = self.window.session
            self._listen(self.session)
            return
        context = await self.conn.call("Target.createBrowserContext", {"disposeOnDetach": True})
        self.context = context["browserContextId"]
        target = await self.conn.call("Target.createTarget", {
            "url": "about:blank", "browserContextId": self.context})
        self.target = target["targetId"]
        attached = await self.conn.call("Target.attachToTarget",
                                        {"targetId": self.target, "flatten": True})
        self.session = attached["sessionId"]
        self._listen(self.session)
        width, height = self.settings.viewport
        await asyncio.gather(
            self._intercept(self.session),
            self.call("Page.enable"), self.call("Page.setLifecycleEventsEnabled", enabled=True),
            self.call("Inspector.enable"),
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                      deviceScaleFactor=1, mobile=False),
            *([self.call("Network.setUserAgentOverride", userAgent=self.settings.user_agent)]
              if self.settings.user_agent else []),
            self.call("Target.setAutoAttach", autoAttach=True, waitForDebuggerOnStart=True,
                      flatten=True))

    async def _intercept(self, session: str) -> None:
        """Pause every request of `session` and bypass service workers."""
        await self.conn.call("Network.enable", {"maxTotalBufferSize": 0,
                                                "maxResourceBufferSize": 0}, session)
        await self.conn.call("Network.setBypassServiceWorker", {"bypass": True}, session)
        await self.conn.call("Fetch.enable", {"patterns": [
            {"urlPattern": "*", "requestStage": "Request"}]}, session)

    async def _load(self, url: str) -> None:
        before = {loader for _, loader, _ in self.lifecycle}
        self._touch()
        nav = await self.call("Page.navigate", url=url)
        if nav.get("errorText"):
            raise BrowserError("protocol", f"the browser could not load {url}: "
                                           f"{nav['errorText']}")
        while not any(frame == self.target and name == "load" and loader not in before
                      for frame, loader, name in self.lifecycle):
            await asyncio.sleep(0.05)

    async def _idle(self, wait: float = IDLE, after: float | None = None) -> None:
        """Until no request has been in flight for `wait` seconds, or for `after` seconds
        once a request was made meanwhile (or, once patience has run out, until none is in
        flight)."""
        loop = asyncio.get_running_loop()
        made = self.requests
        while True:
            need = wait if after is None or self.requests == made else after
            quiet = loop.time() - self.last_activity
            if not self.in_flight and (quiet >= need or loop.time() >= self.patience_ends):
                return
            await asyncio.sleep(0.05 if self.in_flight else max(0.02, need - quiet))

    async def _scroll(self) -> None:
        """Scroll down a viewport at a time (at most `scroll` times), waiting for the network
        between steps, until the bottom is reached and the page no longer grows.

        A step that leaves the bottom out of view waits STEP_QUIET without a request (what
        it brings into view, a lazy image, is asked for within a frame or two; a request it
        starts is waited for to the end); a step that reaches the bottom waits up to the
        whole IDLE for a request, as an endless feed may ask for its next batch only after a
        pause. Once requests were made, STEP_QUIET without one ends the wait: the batch
        arrived, and the next step looks for more."""
        if self.settings.scroll <= 0:
            return
        height, bottom = await self._eval(HEIGHT)
        if bottom:  # the page fits in the viewport: nothing below to bring into view
            return
        for _ in range(self.settings.scroll):
            self.scrolls += 1
            await self._eval(SCROLL)
            _, at_bottom = await self._eval(HEIGHT)
            self._touch()  # the quiet period counts from the scroll: observers see it first
            await self._idle(IDLE if at_bottom else STEP_QUIET, after=STEP_QUIET)
            grown, bottom = await self._eval(HEIGHT)
            if bottom and grown <= height:
                break
            height = grown
        await self._eval("window.scrollTo(0, 0)")

    async def _screenshot(self) -> bytes:
        shot = await self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])

    # ----------------------------------------------------------------- protocol helpers

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        return await self.conn.call(method, params, self.session)

    async def _eval(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                                 awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError("protocol", "a script of the driver failed in the page: "
                               f"{details.get('exception', {}).get('description', details)}")
        return result["result"].get("value")

    def _listen(self, session: str) -> None:
        self.sessions.add(session)
        self.conn.listen(session, lambda method, params: self._event(session, method, params))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _touch(self) -> None:
        self.last_activity = asyncio.get_running_loop().time()

    def _fail(self, error: BrowserError) -> None:
        if not self.failure.done():
            self.failure.set_result(error)

    def _event(self, session: str, method: str, params: dict[str, Any]) -> None:
        handlers: dict[str, Callable[[], None]] = {
            "Fetch.requestPaused": lambda: self._spawn(self._paused(session, params)),
            "Page.lifecycleEvent": lambda: self.lifecycle.append(
                (params.get("frameId", ""), params.get("loaderId", ""), params.get("name", ""))),
            "Target.attachedToTarget": lambda: self._spawn(self._child(params)),
            "Page.javascriptDialogOpening": lambda: self._spawn(self._dialog(session)),
            "Inspector.targetCrashed": lambda: self._fail(
                BrowserError("crashed", "crashed: the page's renderer crashed")),
            "Connection.closed": lambda: self._fail(
                BrowserError("crashed", "crashed: the browser's connection closed")),
        }
        handler = handlers.get(method)
        if handler is not None and (session == self.session or method != "Inspector.targetCrashed"):
            handler()

    # ----------------------------------------------------------------- event work

    async def _child(self, params: dict[str, Any]) -> None:
        """A frame of another site (its own process, its own session) or a worker of the
        page: a frame's requests are paused too (a dedicated worker's already are, by the
        page's Fetch domain), then it runs."""
        session = params["sessionId"]
        kind = params.get("targetInfo", {}).get("type", "")
        self._listen(session)
        try:
            if kind == "iframe":
                await self._intercept(session)
                await self.conn.call("Target.setAutoAttach", {
                    "autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                    session)
        except BrowserError as exc:
            log.warning("browser: the requests of a frame of the page cannot be paused: %s",
                        exc)
        finally:
            with contextlib.suppress(BrowserError):
                await self.conn.call("Runtime.runIfWaitingForDebugger", {}, session)

    async def _dialog(self, session: str) -> None:
        with contextlib.suppress(BrowserError):
            await self.conn.call("Page.handleJavaScriptDialog", {"accept": False}, session)

    async def _paused(self, session: str, params: dict[str, Any]) -> None:
        """Answer one paused request through the Answerer."""
        request_id, request = params["requestId"], params["request"]
        url = request["url"]
        scheme = url.split(":", 1)[0].lower()
        self.in_flight += 1
        self._touch()
        try:
            if self.done:
                await fulfil(self.conn, session, request_id, None)
                return
            if scheme in ("data", "blob"):  # the page's own bytes: never the Answerer's
                await self.conn.call("Fetch.continueRequest", {"requestId": request_id}, session)
                return
            self.requests += 1
            answer = None
            if scheme in ("http", "https"):
                answer = await ask(self.answer, BrowserRequest(
                    url=without_fragment(url), method=request.get("method", "GET"),
                    headers=dict(request.get("headers", {})), body=request_body(request),
                    resource_type=params.get("resourceType", "Other"),
                    is_navigation=params.get("resourceType") == "Document"
                    and params.get("frameId") == self.target))
            await fulfil(self.conn, session, request_id, answer)
        except BrowserError as exc:  # the tab went away under it
            log.debug("browser: a paused request of %s was not answered: %s", url, exc)
        finally:
            self.in_flight -= 1
            self._touch()
