"""Settings in `mirror ui`: the form over a site file and the editor of its whole text.
Both show every problem of the file at once (the form beside each field), when they open
and after a Save that was refused; nothing is written while a problem remains."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol
from urllib.parse import urlencode

from aiohttp import web

from mirror.app import rawfile, sitefile
from mirror.app.library import SiteEntry
from mirror.config import ConfigError

SAVED = "saved"  # the banner after a Save


class App(Protocol):
    """What the pages need of the app (server.LibraryApp): its sites and its templates."""

    def entry(self, request: web.Request) -> SiteEntry: ...

    def page(self, template: str, status: int = 200, **context: Any) -> web.Response: ...


def by_field(errors: list[ConfigError]) -> tuple[dict[str, list[str]], list[str]]:
    """The errors' messages by form field ("crawl.workers"), and those of no field (an
    unknown key, a whole section, invalid TOML), which only the file editor can mend."""
    known = {f.key for f in sitefile.FORM_FIELDS}
    beside: dict[str, list[str]] = {}
    others: list[str] = []
    for error in errors:
        if error.key in known:
            beside.setdefault(error.key, []).append(error.detail)
        else:
            others.append(error.detail)
    return beside, others


class SettingsPages:
    """The handlers of /site/{id}/settings (the form) and /site/{id}/settings/file."""

    def __init__(self, app: App) -> None:
        self.app = app

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/site/{id}/settings", self.form)
        router.add_post("/site/{id}/settings", self.save_form)
        router.add_get("/site/{id}/settings/file", self.file)
        router.add_post("/site/{id}/settings/file", self.save_file)

    # -- the form ----------------------------------------------------------------------------
    async def form(self, request: web.Request) -> web.Response:
        entry = self.app.entry(request)
        text = _read(entry)
        try:
            values = sitefile.form_values(text, entry.file)
        except ConfigError as exc:  # not TOML: only the file editor can mend it
            return self.file_page(entry, text, exc.errors, rawfile.digest(text))
        return self.form_page(entry, text, values, sitefile.problems(text, entry.file),
                              message=request.query.get("message", ""))

    def form_page(self, entry: SiteEntry, text: str, values: dict[str, str],
                  errors: list[ConfigError], *, message: str = "", status: int = 200,
                  refused: bool = False) -> web.Response:
        beside, others = by_field(errors)
        return self.app.page("settings.html", status=status, entry=entry,
                             fields=sitefile.FORM_FIELDS, values=values, beside=beside,
                             others=others, count=len(errors), refused=refused,
                             message=message, text=text)

    async def save_form(self, request: web.Request) -> web.Response:
        entry = self.app.entry(request)
        form = await request.post()
        values = {f.key: str(form.get(f.key, "")) for f in sitefile.FORM_FIELDS
                  if f.key in form}
        text = _read(entry)
        try:
            new = sitefile.apply_form(text, entry.file, values)
        except ConfigError as exc:
            try:
                shown = {**sitefile.form_values(text), **values}
            except ConfigError:  # not TOML (changed since the form was shown)
                return self.file_page(entry, text, exc.errors, rawfile.digest(text), 400)
            return self.form_page(entry, text, shown, exc.errors, status=400, refused=True)
        await asyncio.to_thread(sitefile.write_site_file, entry.file, new)
        raise web.HTTPSeeOther(f"/site/{entry.id}/settings?" + urlencode({"message": SAVED}))

    # -- the whole file ----------------------------------------------------------------------
    async def file(self, request: web.Request) -> web.Response:
        entry = self.app.entry(request)
        text = _read(entry)
        return self.file_page(entry, text, sitefile.problems(text, entry.file),
                              rawfile.digest(text))

    def file_page(self, entry: SiteEntry, text: str, errors: list[ConfigError] | list[str],
                  seen: str, status: int = 200, *, refused: bool = False) -> web.Response:
        shown = [e.detail if isinstance(e, ConfigError) else e for e in errors]
        return self.app.page("sitefile.html", status=status, entry=entry, text=text,
                             errors=shown, seen=seen, refused=refused,
                             rows=min(40, max(12, text.count("\n") + 3)))

    async def save_file(self, request: web.Request) -> web.Response:
        entry = self.app.entry(request)
        form = await request.post()
        typed, seen = str(form.get("text", "")), str(form.get("seen", ""))
        current = _read(entry)
        try:
            new = rawfile.checked_text(typed, current, entry.file, seen)
        except rawfile.StaleText as exc:
            return self.file_page(entry, typed, [str(exc)], rawfile.digest(current), 409,
                                  refused=True)
        except ConfigError as exc:
            return self.file_page(entry, typed, exc.errors, seen, 400, refused=True)
        await asyncio.to_thread(sitefile.write_site_file, entry.file, new)
        raise web.HTTPSeeOther(f"/site/{entry.id}/settings?" + urlencode({"message": SAVED}))


def _read(entry: SiteEntry) -> str:
    return entry.file.read_text(encoding="utf-8-sig")
