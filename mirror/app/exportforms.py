"""The Export section of a site's page and its POST, made from the exporters' registry
(mirror.replay.exporters): one form per format, its destination and its options as fields;
an export runs as a job of the app (mirror.app.jobs), with its progress on the page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from mirror.app.jobs import ActionError, Jobs
from mirror.app.library import SiteEntry
from mirror.app.work import export_work
from mirror.replay.exporters import Exporter, Option, by_name, either, exporters

Act = Callable[..., Awaitable[web.Response]]  # actions.SiteActions.act(request, action, to_site=)


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    help: str
    flag: bool  # a checkbox, else a text field


@dataclass(frozen=True)
class Form:
    kind: str  # the exporter's name
    shown: str
    label: str
    dest: str  # the default destination
    fields: tuple[Field, ...]


def field(option: Option) -> Field:
    return Field(option.name, option.label, option.help.replace("{formats}", "the destination"),
                 option.kind is bool)


def default_dest(folder: Path, site_id: str, exporter: Exporter) -> Path:
    return folder / "exports" / f"{site_id}{exporter.suffix}"


def form_values(exporter: Exporter, form: Mapping[str, Any]) -> dict[str, Any]:
    """The options posted (a flag: checked or not; a text: stripped, empty is not given),
    checked as the command line checks them."""
    values: dict[str, Any] = {}
    for option in exporter.options:
        if option.kind is bool:
            values[option.name] = form.get(option.name) == "1"
            continue
        value = str(form.get(option.name, "")).strip() or None
        if problem := option.problem(value):
            raise ActionError(f"{option.label} {value!r}: {problem}")
        values[option.name] = value
    return values


def destination(given: str, default: Path, folder: Path) -> Path:
    """~ and ~user/ first, as a shell does; then a relative path is in the library folder."""
    to = Path(given.strip() or default).expanduser()
    return to if to.is_absolute() else folder / to


class ExportForms:
    """The forms of a site's Export section, and the handler they post to."""

    def __init__(self, folder: Path, jobs: Jobs, act: Act) -> None:
        self.folder, self.jobs, self.act = folder, jobs, act

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/site/{id}/export", self.export)

    def forms(self, site_id: str) -> list[Form]:
        return [Form(e.name, e.shown, e.label, str(default_dest(self.folder, site_id, e)),
                     tuple(field(o) for o in e.options)) for e in exporters()]

    async def export(self, request: web.Request) -> web.Response:
        form = await request.post()

        async def start(entry: SiteEntry) -> str:
            assert entry.config is not None
            kind = str(form.get("kind", "folder"))
            exporter = by_name(kind)
            if exporter is None:
                names = either([e.name for e in exporters()])
                raise ActionError(f"export kind must be {names}, not {kind!r}")
            values = form_values(exporter, form)
            to = destination(str(form.get("to", "")),
                             default_dest(self.folder, entry.id, exporter), self.folder)
            self.jobs.start(entry.id, f"export {exporter.shown}",
                            export_work(entry.config, exporter, to, values))
            return ""
        return await self.act(request, start, to_site=True)
