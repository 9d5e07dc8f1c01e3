"""The records and errors between the browser driver and its callers (the contract of
issue 35, /work/wt/_brief/BROWSER_API.md): what a page asks for, what it is answered, what a
render gives back, the pool's settings. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mirror.errors import MirrorError
from mirror.model import ExitCode

#: what BrowserError.kind may be
KINDS = ("timeout", "crashed", "launch", "protocol")


class BrowserError(MirrorError):
    """A render or the browser failed; `kind` is one of KINDS, str() says what happened
    ("timeout after 30 s", "crashed: the browser's connection closed")."""

    def __init__(self, kind: str, detail: str = "") -> None:
        assert kind in KINDS, kind
        self.kind = kind
        super().__init__(detail or kind)


class BrowserNotFound(BrowserError):
    """The configured browser (`[browser] executable`) is not there: a user mistake."""

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE

    def __init__(self, configured: str) -> None:
        super().__init__("launch", f"browser not found: {configured!r} is neither a file nor "
                                   "a command on PATH ([browser] executable)")
        self.configured = configured


@dataclass(frozen=True)
class BrowserRequest:
    """A request the page made, paused by the driver until the Answerer answers it."""

    url: str                 # absolute URL the page asked for (fragment removed)
    method: str              # "GET", "POST", ...
    headers: dict[str, str]  # the browser's request headers
    body: bytes | None       # POST body, if any
    resource_type: str       # CDP ResourceType: "Document", "Script", "XHR", "Fetch", "Image", ...
    is_navigation: bool      # the top-level document request of the tab


@dataclass(frozen=True)
class BrowserAnswer:
    """The response given to the page. `body` is decoded of any Content-Encoding: the driver
    drops the Content-Encoding, Content-Length and Transfer-Encoding headers."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    reason: str = ""


#: None = the request fails in the page (Fetch.failRequest, errorReason "BlockedByClient")
Answerer = Callable[[BrowserRequest], Awaitable[BrowserAnswer | None]]


@dataclass(frozen=True)
class Rendered:
    """A page after load, network idle, autoscroll and settling, read from its DOM."""

    url: str                  # location.href at the end (after client-side routing)
    html: str                 # doctype + documentElement.outerHTML
    text: str                 # document.body.innerText
    title: str | None
    links: tuple[str, ...]    # a[href], area[href]: absolute, http(s), no fragment, no repeats
    requests: int             # requests the page made (answered or failed)
    screenshot: bytes | None  # PNG, only with screenshot=True


@dataclass(frozen=True)
class BrowserSettings:
    """How the pool runs the browser ([browser] in the site file)."""

    executable: Path
    tabs: int = 2                 # pages loaded at once
    page_timeout: float = 30.0    # a page is abandoned after this (BrowserError "timeout")
    scroll: int = 10              # at most this many viewport heights of autoscroll (0: none)
    screenshot: bool = False
    restart_pages: int = 100      # restart the browser after this many page loads
    max_rss_mb: int = 1024        # restart when the browser's process tree passes this RSS
    user_agent: str | None = None
    viewport: tuple[int, int] = (1280, 900)
