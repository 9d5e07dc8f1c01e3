"""The app's Remove action: a confirmation page naming what goes (the site file, its timer)
and what stays unless asked (the archive, with its size on disk), then the POST."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol
from urllib.parse import urlencode

from aiohttp import web

from mirror.app import removal
from mirror.app.library import Library, SiteEntry


class LibraryApp(Protocol):
    """What of the app (server.LibraryApp) these handlers use."""

    library: Library

    def entry(self, request: web.Request) -> SiteEntry: ...

    def page(self, template: str, status: int = 200, **context: Any) -> web.Response: ...


def routes(app: LibraryApp, router: web.UrlDispatcher) -> None:
    async def form(request: web.Request) -> web.Response:
        return await page(app, request, "")

    async def post(request: web.Request) -> web.Response:
        return await remove(app, request)

    router.add_get("/site/{id}/remove", form)
    router.add_post("/site/{id}/remove", post)


async def page(app: LibraryApp, request: web.Request, error: str,
               status: int = 200) -> web.Response:
    entry = app.entry(request)
    plan = await asyncio.to_thread(removal.plan, app.library, entry)
    return app.page("remove.html", status=status, entry=entry, plan=plan, error=error)


async def remove(app: LibraryApp, request: web.Request) -> web.Response:
    entry = app.entry(request)
    delete_archive = (await request.post()).get("delete_archive") == "1"

    def work() -> list[str]:
        return removal.remove(removal.plan(app.library, entry), delete_archive=delete_archive)
    try:
        lines = await asyncio.to_thread(work)
    except removal.RemovalError as exc:
        return await page(app, request, str(exc), status=409)
    raise web.HTTPSeeOther("/?" + urlencode({"message": "; ".join(lines)}))
