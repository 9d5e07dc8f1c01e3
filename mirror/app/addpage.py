"""The app's Add a site: the form (the new site's address and name first, then the settings
of a site file, with their defaults) and its POST, which writes the site file
(mirror.app.newsite) or shows the form again with the problem beside its field."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol
from urllib.parse import urlencode

from aiohttp import web

from mirror.app import newsite, sitefile, startpage
from mirror.app.library import Library
from mirror.app.settingspage import by_field
from mirror.config import ConfigError

_ADD_OWN = frozenset({"site.start_urls", "site.name"})  # the add form's own first fields


class App(Protocol):
    """What the form uses of the app (server.LibraryApp): its folder and its templates."""

    library: Library

    def page(self, template: str, status: int = 200, **context: Any) -> web.Response: ...


class AddPage:
    """The handlers of GET and POST /add."""

    def __init__(self, app: App) -> None:
        self.app = app

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/add", self.form)
        router.add_post("/add", self.add)

    def page(self, values: dict[str, str], error: ConfigError | None = None,
             status: int = 200, detail: str = "",
             detail_key: str = "site.name") -> web.Response:
        key = error.key if error else (detail_key if detail else None)
        if error is not None:
            detail = error.detail  # the first; the fields below show all
        return self.app.page("add.html", status=status, values=values, error=detail, key=key,
                             beside=by_field(error.errors if error else [])[0],
                             fields=[f for f in sitefile.FORM_FIELDS if f.key not in _ADD_OWN],
                             known={f.key for f in sitefile.FORM_FIELDS} | _ADD_OWN)

    async def form(self, request: web.Request) -> web.Response:
        values = sitefile.form_values(newsite.new_site_text("https://example.com/"))
        return self.page({**values, "site.start_urls": "", "site.name": ""})

    async def add(self, request: web.Request) -> web.Response:
        form = await request.post()
        values = {f.key: str(form.get(f.key, "")).strip() for f in sitefile.FORM_FIELDS
                  if f.key in form}
        url, name = values.pop("site.start_urls", ""), values.pop("site.name", "")
        try:
            path = await asyncio.to_thread(newsite.add_site, self.app.library.folder, url,
                                           name or None, values, look=startpage.look_now)
        except ConfigError as exc:
            return self.page({**values, "site.start_urls": url, "site.name": name}, exc,
                             status=400)
        except newsite.SiteFileError as exc:
            return self.page({**values, "site.start_urls": url, "site.name": name},
                             status=409, detail=str(exc),
                             detail_key=("site.start_urls" if isinstance(
                                 exc, newsite.Covered) else "site.name"))
        raise web.HTTPSeeOther(f"/site/{path.stem}?" + urlencode({"message": f"added {path}"}))
