"""Pages built by scripts: a Chromium-family browser driven over the DevTools protocol
(issue 35). `BrowserPool.render(url, answer)` loads a page whose every request the caller
answers (`Answerer`), and gives back the `Rendered` DOM, text and links.

Modules: `api` (the records, settings and errors; pure), `cdp` (the protocol client over
aiohttp's WebSocket), `launch` (finding and running the browser, its process group and
memory), `page` (one page: interception, load, network idle, autoscroll, reading), `pool`
(tabs, restarts, crashes). Below crawl/: imports nothing of mirror but errors and model."""

from mirror.browser.api import (
           Answerer,
           BrowserAnswer,
           BrowserError,
           BrowserNotFound,
           BrowserRequest,
           BrowserSettings,
           Rendered,
)
from mirror.browser.launch import find_browser
from mirror.browser.pool import BrowserPool

__all__ = ["Answerer", "BrowserAnswer", "BrowserError", "BrowserNotFound", "BrowserPool",
           "BrowserRequest", "BrowserSettings", "Rendered", "find_browser"]
