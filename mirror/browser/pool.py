"""The browser pool: one browser, launched at the first render, `tabs` pages at a time;
restarted between pages after `restart_pages` loads, when its RSS passes `max_rss_mb`, or
when it crashed (the page then retried once); stopped, its whole process group, at close.
A tab whose page rendered is blanked and kept for the next page (page.Window)."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType

from mirror.browser.api import Answerer, BrowserError, BrowserSettings, Rendered
from mirror.browser.cdp import CDPConnection
from mirror.browser.launch import BrowserProcess, start_browser
from mirror.browser.page import Tab, Window

log = logging.getLogger(__name__)


class Browser:
    """A running browser and its DevTools connection."""

    def __init__(self, process: BrowserProcess, conn: CDPConnection, version: str) -> None:
        self.process, self.conn, self.version = process, conn, version
        self.windows: list[Window] = []  # tabs kept open, blank, for the next pages
        self.loads = 0
        self.broken: str | None = None  # why it must be restarted before the next page

    @classmethod
    async def start(cls, settings: BrowserSettings) -> Browser:
        process = await start_browser(settings.executable, settings.viewport)
        try:
            conn = await CDPConnection.connect(process.ws_url)
            try:
                info = await conn.call("Browser.getVersion", timeout=10)
            except BaseException:
                await conn.close()
                raise
        except BaseException:
            await asyncio.shield(process.stop())
            raise
        return cls(process, conn, str(info.get("product", "")))

    @property
    def dead(self) -> bool:
        return self.conn.closed.done() or self.process.proc.returncode is not None

    async def stop(self) -> None:
        """Close the connection and stop the process group; also when cancelled."""
        try:
            await self.conn.close()
        finally:
            await self.process.stop()


class BrowserPool:
    """Renders pages in one browser, `tabs` at once (`async with BrowserPool(s) as pool:
    await pool.render(url, answer)`). The browser is launched at the first render."""

    def __init__(self, settings: BrowserSettings) -> None:
        self.settings = settings
        self.loads = 0
        self.restarts = 0
        self.version: str | None = None
        self._browser: Browser | None = None
        self._tabs = asyncio.Semaphore(max(1, settings.tabs))
        self._switch = asyncio.Lock()  # launching and restarting
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._closed = False

    async def __aenter__(self) -> BrowserPool:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the browser (its whole process group), also when cancelled."""
        self._closed = True
        browser, self._browser = self._browser, None
        if browser is not None:
            stopping = asyncio.ensure_future(browser.stop())
            try:
                await asyncio.shield(stopping)
            except asyncio.CancelledError:
                browser.process.kill()  # no waiting for a cancelled caller: killed now
                raise

    @property
    def pid(self) -> int | None:
        """The running browser's pid (its process group), None before the first render."""
        return self._browser.process.pid if self._browser is not None else None

    async def render(self, url: str, answer: Answerer) -> Rendered:
        """Load `url` in a tab, every request answered by `answer`; see page.Tab. A crash of
        the browser: restarted and the page tried once more."""
        async with self._tabs:
            try:
                return await self._attempt(url, answer)
            except BrowserError as exc:
                if exc.kind != "crashed":
                    raise
                log.warning("browser: %s while loading %s; restarting it and trying again",
                            exc, url)
            return await self._attempt(url, answer)

    async def _attempt(self, url: str, answer: Answerer) -> Rendered:
        browser = await self._acquire()
        tab = Tab(browser.conn, self.settings, answer,
                  browser.windows.pop() if browser.windows else None)
        rendered: Rendered | None = None
        try:
            self.loads += 1
            browser.loads += 1
            rendered = await tab.run(url)
            return rendered
        except BrowserError as exc:
            if exc.kind == "crashed":
                browser.broken = str(exc)
            raise
        finally:
            try:  # a second cancellation may land here: the page is released all the same
                await asyncio.shield(self._put_away(browser, tab, rendered is not None))
            finally:
                self._release()

    async def _put_away(self, browser: Browser, tab: Tab, rendered: bool) -> None:
        """A tab whose page rendered is kept, blank, for the next page; any other (a page
        that failed, timed out, or a browser due for a restart) is closed."""
        window = await tab.keep() if rendered and browser.broken is None \
            and not self._closed and not self._restart_reason(browser) else None
        if window is not None:
            browser.windows.append(window)
        elif not await tab.close() and browser.broken is None:
            browser.broken = "a tab did not close"

    async def _acquire(self) -> Browser:
        """The browser for one more page: launched, or restarted first when it is due (once
        no page is in flight on it)."""
        async with self._switch:
            if self._closed:
                raise BrowserError("crashed", "the browser pool is closed")
            browser = self._browser
            reason = browser and self._restart_reason(browser)
            if browser is not None and reason:
                await self._drained.wait()
                log.info("browser: restarting it (%s)", reason)
                self._browser = None
                await asyncio.shield(browser.stop())
                self.restarts += 1
            if self._browser is None:
                self._browser = await Browser.start(self.settings)
                self.version = self._browser.version
            self._in_flight += 1
            self._drained.clear()
            return self._browser

    def _release(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._drained.set()

    def _restart_reason(self, browser: Browser) -> str | None:
        if browser.dead:
            return "it stopped"
        if browser.broken:
            return browser.broken
        if browser.loads >= self.settings.restart_pages:
            return f"{browser.loads} pages loaded"
        rss = browser.process.rss_mb()
        if rss is not None and rss > self.settings.max_rss_mb:
            return f"its memory, {rss:.0f} MB, passed {self.settings.max_rss_mb} MB"
        return None
