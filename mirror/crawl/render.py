"""Pages rendered in a browser during a run ([browser] in the site file).

Which pages (`wants_render`): `off`, none; `always`, every HTML page (2xx, or a 304 that
confirms an archived one); `auto`, the HTML pages discovery flagged as built by scripts
(`Discovered.note` is their needs_browser reason). The page is rendered after its links are
read and before it is stored (crawl/urlwork.py): its requests are answered through mirror
(crawl/browserfetch.py), the rendered DOM's links join its links, and it is stored with the
render. A render that fails (timeout, a crash twice) leaves the page stored as fetched over
HTTP, its note saying why ("browser: timeout after 30 s").

The browser is launched on the first page that needs it (a run of plain pages never starts
one) and closed, its whole process group, when the run ends, is stopped or fails
(`Renderer` is an async context manager around the run's work).
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mirror.model import PARSE_BUDGET, Discovered, LinkKind, NewUrl, UrlItem
from mirror.web.http import HTML_TYPES, mime_of

if TYPE_CHECKING:
    from mirror.browser import BrowserPool, Rendered
    from mirror.crawl.browserfetch import BrowserFetcher, PageRequests
    from mirror.crawl.parsehelper import Page

log = logging.getLogger(__name__)

MODES = ("auto", "always", "off")
#: how a failed render's note begins (the report lists such pages with the reason)
NOTE = "browser"


def wants_render(mode: str, page: Page, found: Discovered) -> bool:
    """Whether a fetched page is loaded in the browser (pure)."""
    if mode == "off" or not 200 <= page.status < 300 or page.body is None:
        return False
    if mime_of(page.headers.get("content-type")) not in HTML_TYPES:
        return False
    if mode == "always":
        return True
    return found.note is not None and not found.note.startswith(PARSE_BUDGET)


def with_render(found: Discovered, rendered: Rendered, used: list[NewUrl],
                decide: Any, page: UrlItem) -> Discovered:
    """The page's links with the rendered DOM's and the requisites the browser used."""
    have = {u.url for u in found.links}
    extra: list[NewUrl] = []
    for new in used:
        if new.url not in have:
            have.add(new.url)
            extra.append(new)
    for raw in rendered.links:
        new = decide(raw, page.depth + 1, 0, False, LinkKind.LINK)
        if new.url not in have:
            have.add(new.url)
            extra.append(new)
    return found._replace(links=found.links + extra)


def failed_note(exc: Exception) -> str:
    return f"{NOTE}: {exc}"


class Renderer:
    """The run's browser: the mode, the pool (opened lazily), the count of page loads."""

    def __init__(self, mode: str, settings: Any | None) -> None:
        self.mode = mode if settings is not None else "off"
        self.settings = settings
        self._pool: BrowserPool | None = None
        self._closed_loads = 0  # loads of pools closed before
        self._closed_version: str | None = None  # the browser's, once its pool is closed
        self.failures = 0

    @classmethod
    def from_config(cls, cfg: Any) -> Renderer:
        """[browser] of the site file; `off` when the section says so or no browser is
        found (the report says how to enable it)."""
        section = getattr(cfg, "browser", None)
        if section is None or section.mode == "off":
            return cls("off", None)
        from mirror.browser import find_browser  # only a run that may render loads it

        executable = find_browser(section.executable)
        if executable is None:
            log.warning("[browser] mode = %r, but no browser was found: pages built by "
                        "scripts are archived as fetched", section.mode)
            return cls("off", None)
        return cls(section.mode, section.settings(executable, cfg.crawl.user_agent))

    @property
    def loads(self) -> int:
        """Pages loaded in the browser in this run (by this process)."""
        return self._closed_loads + (self._pool.loads if self._pool is not None else 0)

    @property
    def version(self) -> str | None:
        return self._pool.version if self._pool is not None else self._closed_version

    def wants(self, page: Page, found: Discovered) -> bool:
        return wants_render(self.mode, page, found)

    async def render(self, fetcher: BrowserFetcher, requests: PageRequests
                     ) -> Rendered | str:
        """The page rendered, or why not (its note)."""
        from mirror.browser import BrowserError, BrowserPool

        if self._pool is None:
            assert self.settings is not None  # mode "off" without settings renders nothing
            self._pool = BrowserPool(self.settings)
            await self._pool.__aenter__()
        try:
            return await self._pool.render(requests.page.url, fetcher.answerer(requests))
        except BrowserError as exc:
            self.failures += 1
            if exc.kind == "launch":  # no browser to be had: the other pages as fetched
                self.mode = "off"
            log.warning("rendering %s failed: %s", requests.page.url, exc)
            return failed_note(exc)

    async def __aenter__(self) -> Renderer:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            self._closed_loads += pool.loads
            self._closed_version = pool.version or self._closed_version
            await pool.__aexit__(None, None, None)
