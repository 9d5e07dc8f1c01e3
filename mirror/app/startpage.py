"""A look at a new site's start page (one GET, a short deadline) to recognise its software
for `mirror add` and the app's Add form; offline, it says why it could not look."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mirror.config import CrawlSection
from mirror.crawl.fetch import FetchError, Limits, open_session, send_form
from mirror.crawl.software import Detected, detect
from mirror.web.charset import decode_text, sniff_charset
from mirror.web.codings import decode_body

#: seconds the look may take in all; `mirror add` must not hang on a slow or absent host
LOOK_TIMEOUT = 5.0
MAX_PAGE_BYTES = 2_000_000


@dataclass(frozen=True)
class Look:
    found: Detected | None  # the software recognised, None when none was
    problem: str  # why the page could not be looked at ("" when it was)


async def look(url: str, timeout: float = LOOK_TIMEOUT) -> Look:
    """Fetch `url` (redirects followed) and recognise the software that made it."""
    limits = Limits(timeout=timeout, connect_timeout=timeout, read_timeout=timeout,
                    max_bytes=MAX_PAGE_BYTES)
    try:
        async with open_session(CrawlSection().user_agent, 2) as session:
            answer = await send_form(session, url.strip(), "GET", (), limits)
    except FetchError as exc:
        return Look(None, str(exc))
    except (ValueError, TimeoutError) as exc:  # not a URL aiohttp takes; the deadline
        return Look(None, f"{type(exc).__name__}: {exc}".rstrip(": "))
    if answer.statuses[-1] >= 400:
        return Look(None, f"it answered HTTP {answer.statuses[-1]}")
    body, _ = decode_body(answer.body, answer.headers.get("content-encoding"), MAX_PAGE_BYTES)
    content_type = answer.headers.get("content-type")
    return Look(detect(decode_text(body, sniff_charset(body, content_type))), "")


def look_now(url: str, timeout: float = LOOK_TIMEOUT) -> Look:
    """look() from code without an event loop (the command line)."""
    return asyncio.run(look(url, timeout))
