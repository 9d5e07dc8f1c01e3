"""Pages built by scripts: a Chromium-family browser driven over the DevTools protocol
(issue 35). `BrowserPool.render(url, answer)` loads a page whose every request the caller
answers (`Answerer`), and gives back the `Rendered` DOM, text and links.

Modules: `api` (the records, settings and errors; pure), `cdp` (the protocol client over
aiohttp's WebSocket), `find` (finding the browser), `launch` (running it, its process group and
memory), `page` (one page: interception, load, network idle, autoscroll, reading), `pool`
(tabs, restarts, crashes). Below crawl/: imports nothing of mirror but errors and model."""

from typing import TYPE_CHECKING, Any

from mirror.browser.api import (
           Answerer,
           BrowserAnswer,
           BrowserError,
           BrowserNotFound,
           BrowserRequest,
           BrowserSettings,
           Rendered,
)
from mirror.browser.find import find_browser

if TYPE_CHECKING:
    from mirror.browser.pool import BrowserPool

__all__ = ["Answerer", "BrowserAnswer", "BrowserError", "BrowserNotFound", "BrowserPool",
           "BrowserRequest", "BrowserSettings", "Rendered", "find_browser"]


def __getattr__(name: str) -> Any:
    """BrowserPool on first use (PEP 562): `mirror check` finds the browser through this
    package without loading asyncio and aiohttp."""
    if name == "BrowserPool":
        from mirror.browser.pool import BrowserPool

        return BrowserPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
