"""A thin Chrome DevTools Protocol client over aiohttp's WebSocket: commands with ids,
events routed by flat session (Target.attachToTarget / setAutoAttach with flatten=true), and a
closed socket turning every waiting call, and every later one, into BrowserError("crashed")."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from mirror.browser.api import BrowserError

log = logging.getLogger(__name__)

#: an event handler: (method, params), called in the reading task; it must not block
Handler = Callable[[str, dict[str, Any]], None]


class CDPConnection:
    """One WebSocket to the browser. `call` sends a command (to the browser, or to a
    session) and waits for its answer; `listen(session, handler)` receives that session's
    events (None: the browser's own). `closed` is done once the socket is gone."""

    def __init__(self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._http, self._ws = http, ws
        self._next_id = 0
        self._waiting: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._handlers: dict[str | None, Handler] = {}
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(), name="cdp-reader")

    @classmethod
    async def connect(cls, url: str, timeout: float = 10.0) -> CDPConnection:
        """Connect to a browser's DevTools WebSocket (ws://127.0.0.1:PORT/devtools/browser/..)."""
        http = aiohttp.ClientSession()
        try:
            ws = await http.ws_connect(url, max_msg_size=0, autoping=True,
                                       timeout=aiohttp.ClientWSTimeout(ws_close=2),
                                       proxy=None)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await http.close()
            raise BrowserError("launch", f"cannot connect to the browser at {url}: {exc}") \
                from exc
        return cls(http, ws)

    def listen(self, session: str | None, handler: Handler) -> None:
        self._handlers[session] = handler

    def unlisten(self, session: str | None) -> None:
        self._handlers.pop(session, None)

    async def call(self, method: str, params: dict[str, Any] | None = None,
                   session: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Send a command; its result, or BrowserError ("protocol" for an error answer,
        "crashed" when the socket closes, "timeout" after `timeout` seconds)."""
        if self.closed.done():
            raise BrowserError("crashed", f"crashed: the browser's connection closed ({method})")
        self._next_id += 1
        ident = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = (method, future)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            await self._ws.send_str(json.dumps(message))
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise BrowserError("timeout", f"timeout: {method} unanswered after {timeout} s") \
                from None
        except (ConnectionError, aiohttp.ClientError) as exc:
            raise BrowserError("crashed", f"crashed: the browser's connection closed ({exc})") \
                from exc
        finally:
            self._waiting.pop(ident, None)

    async def _read(self) -> None:
        try:
            async for message in self._ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                self._dispatch(json.loads(message.data))
        except (aiohttp.ClientError, ConnectionError, ValueError) as exc:
            log.debug("CDP connection ended: %s", exc)
        finally:
            self._end()

    def _dispatch(self, data: dict[str, Any]) -> None:
        if "id" in data:
            method, future = self._waiting.get(data["id"], ("", None))
            if future is None or future.done():
                return
            if "error" in data:
                error = data["error"]
                future.set_exception(BrowserError(
                    "protocol", f"{method}: {error.get('message', error)}"
                                f"{' (' + str(error['data']) + ')' if 'data' in error else ''}"))
            else:
                future.set_result(data.get("result", {}))
            return
        handler = self._handlers.get(data.get("sessionId"))
        if handler is not None:
            try:
                handler(data.get("method", ""), data.get("params", {}))
            except Exception:  # a handler's bug must not end the connection  # noqa: BLE001
                log.exception("CDP event handler failed on %s", data.get("method"))

    def _end(self) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for method, future in list(self._waiting.values()):
            if not future.done():
                future.set_exception(BrowserError(
                    "crashed", f"crashed: the browser's connection closed ({method})"))
        for handler in list(self._handlers.values()):
            try:
                handler("Connection.closed", {})
            except Exception:  # noqa: BLE001
                log.exception("CDP event handler failed on the connection's end")

    async def close(self) -> None:
        """Close the socket (the browser process is stopped by its owner)."""
        try:
            await asyncio.wait_for(self._ws.close(), 2)
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            pass
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        self._end()
        await self._http.close()
