"""A paused request of a tab (Fetch domain, Request stage): what it asks, as a BrowserRequest,
and how it is answered: fulfilled with the Answerer's answer, or failed."""

from __future__ import annotations

import base64
import logging
from typing import Any

from mirror.browser.api import Answerer, BrowserAnswer, BrowserError, BrowserRequest
from mirror.browser.cdp import CDPConnection

log = logging.getLogger(__name__)

#: headers a decoded, whole body no longer bears out
DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def without_fragment(url: str) -> str:
    return url.split("#", 1)[0]


def answer_headers(answer: BrowserAnswer) -> list[dict[str, str]]:
    """The answer's headers as Fetch.fulfillRequest takes them, without those a decoded
    body no longer bears out."""
    return [{"name": name, "value": value} for name, value in answer.headers
            if name.lower() not in DROPPED_HEADERS]


def request_body(request: dict[str, Any]) -> bytes | None:
    """The body of a paused request (Network.Request), if it has one."""
    entries = request.get("postDataEntries")
    if entries:
        return b"".join(base64.b64decode(e.get("bytes", "")) for e in entries)
    if "postData" in request:
        return str(request["postData"]).encode("utf-8")
    return None


async def ask(answer: Answerer, request: BrowserRequest) -> BrowserAnswer | None:
    """The Answerer's answer; None (the request fails, not the page) when it failed."""
    try:
        return await answer(request)
    except Exception:  # noqa: BLE001 - the answerer's failure fails the request only
        log.exception("browser: answering %s %s failed", request.method, request.url)
        return None


async def fulfil(conn: CDPConnection, session: str, request_id: str,
                 answer: BrowserAnswer | None) -> None:
    """Fulfil the paused request with `answer`; fail it when there is none or the browser
    refuses the answer."""
    if answer is not None:
        params: dict[str, Any] = {
            "requestId": request_id, "responseCode": answer.status,
            "responseHeaders": answer_headers(answer),
            "body": base64.b64encode(answer.body).decode("ascii")}
        if answer.reason:
            params["responsePhrase"] = answer.reason
        try:
            await conn.call("Fetch.fulfillRequest", params, session)
            return
        except BrowserError as exc:
            if exc.kind != "protocol":
                raise
            log.warning("browser: an answer was refused (%s): the request fails", exc)
    await conn.call("Fetch.failRequest", {"requestId": request_id,
                                          "errorReason": "BlockedByClient"}, session)
