"""`mirror ui`: the library's pages and actions (aiohttp.web), live by server-sent events."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from aiohttp import web

from mirror.app import removepage
from mirror.app.actions import SiteActions
from mirror.app.addpage import AddPage
from mirror.app.exportforms import ExportForms
from mirror.app.guard import CSRF_FIELD, Secrets, guard
from mirror.app.jobs import Jobs, Launcher
from mirror.app.library import Library, SiteEntry
from mirror.app.pages import ArchivePages
from mirror.app.replays import Replays
from mirror.app.reportpage import report_context
from mirror.app.schedules import Schedules, routes
from mirror.app.search import Results, SearchError, clamp_page, search_library
from mirror.app.settingspage import SettingsPages
from mirror.app.status import Reports, SiteState, SiteStatus, live_progress, site_status
from mirror.app.uistate import StateFile
from mirror.app.views import environment
from mirror.archive.lock import ArchiveLock
from mirror.layout import ArchiveLayout
from mirror.webapp import read_only_guard

log = logging.getLogger(__name__)

TICK = 0.5  # seconds between two looks at the library for the live pages
FULL_EVERY = 5.0  # seconds between two full reads of a running site's row
STATIC = Path(__file__).parent / "static"


class Signature(NamedTuple):
    """What a row is made of that can be checked cheaply, twice a second, for every site:
    when none of it changed, neither did the row."""

    holder: str | None  # the lock's holder
    epoch: int  # FULL_EVERY-second slot while the lock is held (else 0)
    live: float | None  # `updated` of the holder's progress.json
    reports: int  # mtimes: a report is written by a rename into reports/
    manifest: int
    site_file: int
    starting: bool  # launched by this app, not yet seen holding the lock
    exit_code: int | None  # of this app's last launch
    timers: int = 0  # version of the OS's timers (crontab, systemd) read last


@dataclasses.dataclass(frozen=True)
class Row:
    """One site as the home screen shows it."""

    entry: SiteEntry
    status: SiteStatus
    shown_state: str  # the status's state, or "starting", or "broken"
    note: str = ""  # why the last launch from the app failed

    @property
    def id(self) -> str:
        return self.entry.id


async def favicon(request: web.Request) -> web.FileResponse:
    """What browsers ask for on their own, for any page: the app's icon, not a 404."""
    return web.FileResponse(STATIC / "icon.svg")


class LibraryApp:
    """The request handlers and what they share; one per `mirror ui` process."""

    def __init__(self, folder: Path, *, keys: Secrets, hosts: Callable[[], frozenset[str]],
                 replay_host: str = "127.0.0.1", extra_hosts: frozenset[str] = frozenset(),
                 exposed: bool = False, read_only: bool = False,
                 state_dir: Path | None = None, fleet_db: str | None = None,
                 saved: StateFile | None = None) -> None:
        self.library = Library(folder)
        self.fleet_db = fleet_db  # `--db`: the fleet page reads this database
        self.keys = keys
        self.hosts = hosts
        self.read_only = read_only  # --lan: every request that is not GET/HEAD is refused
        self.env = environment()
        self.env.globals["read_only"] = read_only  # the pages then show no action
        self.env.globals["fleet"] = fleet_db is not None  # the Fleet link in the header
        self.reports = Reports()
        self.launcher = Launcher(state_dir or folder / ".mirror-ui")
        self.jobs = Jobs()
        self.replays = Replays(replay_host, keys, extra_hosts, exposed=exposed, saved=saved)
        self.archive_pages = ArchivePages(self.page, self.entry, self.replays)
        self._rows: dict[str, tuple[Signature, Row]] = {}
        self._closing = asyncio.Event()  # set on shutdown: the event streams end
        self.actions = SiteActions(self)  # Run, Stop, Verify, and how every action answers
        self.schedules = Schedules(self.env, self.actions.act)  # each site's OS timer
        self.exports = ExportForms(self.library.folder, self.jobs, self.actions.act)

    # -- the application -------------------------------------------------------------------
    def make(self) -> web.Application:
        # read-only goes first: no other door (token, CSRF) can let a change through
        doors = [read_only_guard] if self.read_only else []
        app = web.Application(middlewares=[*doors, guard(self.keys, self.hosts)])
        r = app.router
        r.add_get("/", self.home)
        r.add_get("/events", self.events)
        AddPage(self).add_routes(r)
        r.add_get("/site/{id}", self.site)
        self.actions.add_routes(r)
        self.exports.add_routes(r)
        SettingsPages(self).add_routes(r)
        r.add_get("/site/{id}/runs/{run}", self.report)
        r.add_get("/site/{id}/explain", self.explain)
        r.add_get("/site/{id}/browse", self.browse)
        r.add_get("/site/{id}/compare", self.archive_pages.compare)
        r.add_get("/site/{id}/history", self.archive_pages.history)
        r.add_get("/search", self.search)
        r.add_routes(routes(self.schedules))
        removepage.routes(self, r)
        if self.fleet_db is not None:
            r.add_get("/fleet", self.fleet)
        r.add_static("/static", STATIC, append_version=False)
        r.add_get("/favicon.ico", favicon)
        app.on_shutdown.append(self._shutdown)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _shutdown(self, app: web.Application) -> None:
        self._closing.set()

    async def _cleanup(self, app: web.Application) -> None:
        await self.launcher.close()
        await self.jobs.close()
        await self.replays.close()

    def page(self, template: str, status: int = 200, **context: Any) -> web.Response:
        html = self.env.get_template(template).render(csrf=self.keys.csrf,
                                                      csrf_field=CSRF_FIELD, **context)
        return web.Response(status=status, text=html, content_type="text/html")

    def entry(self, request: web.Request) -> SiteEntry:
        entry = self.library.get(request.match_info["id"])
        if entry is None:
            raise web.HTTPNotFound(text=f"no site file {request.match_info['id']}.toml "
                                        f"in {self.library.folder}")
        return entry

    # -- rows: read from disk only when something changed ------------------------------------
    def _signature(self, entry: SiteEntry) -> Signature:
        """Cheap facts that change whenever the row would."""
        launch = self.launcher.launches.get(entry.id)
        # the version of the site file `entry` was read from, not the file's mtime now: a
        # row built from an entry read before a save, by a look that raced the save, must not
        # pass for the row of the saved file (its page showed the old settings)
        site_file = entry.stamp
        if entry.config is None:
            return Signature(None, 0, None, 0, 0, site_file, False, None)
        layout = ArchiveLayout(entry.config.site.output_dir)
        holder = ArchiveLock.holder(layout.root)
        live = live_progress(layout, holder)
        # while a run goes on, its live numbers change the row at every tick, and the rest
        # of it (pages, bytes on disk) is read again every FULL_EVERY seconds
        epoch = int(time.monotonic() // FULL_EVERY) if holder else 0
        return Signature(holder, epoch, live.updated if live else None,
                         _mtime(layout.reports), _mtime(layout.manifest), site_file,
                         self.launcher.starting(entry.id, holder),
                         launch.exit_code if launch else None, self.schedules.cache.stamp())

    def row(self, entry: SiteEntry) -> Row:
        signature = self._signature(entry)
        cached = self._rows.get(entry.id)
        if cached and cached[0] == signature:
            return cached[1]
        if entry.config is None:
            row = Row(entry, SiteStatus(SiteState.BROKEN), "broken")
        elif (cached and signature.live is not None
              and cached[0][:2] == signature[:2]):
            # the same run, further on: only its live numbers changed
            layout = ArchiveLayout(entry.config.site.output_dir)
            live = live_progress(layout, cached[1].status.holder)
            row = dataclasses.replace(cached[1], status=dataclasses.replace(
                cached[1].status, live=live))
        else:
            status = site_status(entry.config.site.output_dir, self.reports)
            shown = status.state.value
            if signature.starting and status.state != SiteState.RUNNING:
                shown = "starting"
            elif self.jobs.verifying(entry.id, status.holder):  # not "busy pid <the app's>"
                shown = "verifying"
            row = Row(entry, status, shown, self.launcher.last_output(entry.id))
        self._rows[entry.id] = (signature, row)
        return row

    def forget(self, site_id: str) -> None:
        """After an action on the site: its row is read again at the next look."""
        self._rows.pop(site_id, None)

    def rows(self, entries: list[SiteEntry]) -> list[Row]:
        return [self.row(e) for e in entries]

    def render_row(self, row: Row) -> str:
        return self.env.get_template("_row.html").render(
            row=row, csrf=self.keys.csrf, csrf_field=CSRF_FIELD)

    # -- pages -----------------------------------------------------------------------------
    async def home(self, request: web.Request) -> web.Response:
        rows = await asyncio.to_thread(self.rows, self.library.sites())
        return self.page("home.html", rows=rows, folder=self.library.folder,
                         render_row=self.render_row, message=request.query.get("message", ""))

    async def site(self, request: web.Request) -> web.Response:
        return await self.site_page(self.entry(request), request.query.get("message", ""))

    async def site_page(self, entry: SiteEntry, message: str,
                        status: int = 200) -> web.Response:
        row = await asyncio.to_thread(self.row, entry)
        runs = await asyncio.to_thread(self._runs, entry)
        return self.page("site.html", status=status, row=row, runs=runs,
                         jobs=self.jobs.of(entry.id), render_row=self.render_row,
                         exports=self.exports.forms(entry.id), message=message)

    def _runs(self, entry: SiteEntry) -> list[Any]:
        from mirror.manifest.reader import ManifestError, ManifestReader

        if entry.config is None:
            return []
        layout = ArchiveLayout(entry.config.site.output_dir)
        try:
            manifest = ManifestReader(layout.manifest)
        except ManifestError:
            return []
        try:
            runs = manifest.runs.all()
        finally:
            manifest.close()
        return [self.reports.summary(layout, r) for r in reversed(runs)]

    async def report(self, request: web.Request) -> web.Response:
        entry = self.entry(request)
        if entry.config is None:
            raise web.HTTPNotFound(text=str(entry.error))
        run = request.match_info["run"]
        if not run.isdigit():
            raise web.HTTPNotFound(text="no such run")
        context = await asyncio.to_thread(report_context, entry.config, int(run), self.reports)
        if context is None:
            raise web.HTTPNotFound(text=f"{entry.title} has no run {run}")
        return self.page("report.html", entry=entry, **context)

    async def explain(self, request: web.Request) -> web.Response:
        from mirror.crawl.robotslookup import robots_rules
        from mirror.explain import explain

        entry = self.entry(request)
        url = request.query.get("url", "").strip()
        lines: list[str] = []
        if url and entry.config is not None:
            rules, source = await robots_rules(entry.config, url, offline=True)
            lines = explain(entry.config, url, 1, rules, source)
        return self.page("explain.html", entry=entry, url=url, lines=lines)

    async def browse(self, request: web.Request) -> web.Response:
        """To the site's replay server (its own origin), whose banner leads back here."""
        server = await self.archive_pages.server(self.entry(request))
        url, ts = request.query.get("url", ""), request.query.get("ts", "")
        ts = ts if ts.isdigit() and len(ts) <= 14 else "99991231235959"  # else the newest
        raise web.HTTPSeeOther(server.entry(f"/{ts}/{url}" if url else "/"))

    async def search(self, request: web.Request) -> web.Response:
        """Full-text search across every site of the library (or one, with ?site=)."""
        query = request.query.get("q", "").strip()
        only = request.query.get("site", "")
        page = clamp_page(request.query.get("page", ""))

        choices: list[tuple[str, str]] = []  # the site filter's: (id, name)

        def run() -> Results:  # reads site files and manifests: in a thread
            entries = self.library.sites()
            choices.extend((e.id, e.title) for e in entries)
            return search_library([e for e in entries if only in ("", e.id)], query, page)
        try:
            results = await asyncio.to_thread(run)
        except SearchError as exc:
            return self.page("search.html", status=400, query=query, only=only,
                             results=None, error=str(exc), choices=choices)
        return self.page("search.html", query=query, only=only, results=results, error="",
                         choices=choices)

    async def fleet(self, request: web.Request) -> web.Response:
        """The fleet of `--db`: workers, their runs, the queue, each site's last and next run."""
        from mirror.app.fleet import fleet_context

        assert self.fleet_db is not None
        context = await asyncio.to_thread(fleet_context, self.fleet_db)
        return self.page("fleet.html", status=503 if context["error"] else 200, **context)

    # -- live ------------------------------------------------------------------------------
    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `row` (a site's row, re-rendered when it changed), `jobs`
        (a site's exports and verifies) and `library` (site files added or removed)."""
        only = request.query.get("site")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-store"})
        await response.prepare(request)
        sent: dict[str, Row] = {}
        files, jobs_seen = None, -1
        try:
            while not self._closing.is_set():
                now_files = [p.name for p in self.library.files()]
                if files is not None and now_files != files and only is None:
                    await _send(response, "library", {})
                files = now_files
                entries = [e for e in self.library.sites() if only in (None, e.id)]
                rows = await asyncio.to_thread(self.rows, entries)
                for row in rows:
                    if sent.get(row.id) is not row:
                        sent[row.id] = row
                        await _send(response, "row", {"id": row.id, "html": self.render_row(row)})
                if only is not None and self.jobs.version != jobs_seen:
                    jobs_seen = self.jobs.version
                    html = self.env.get_template("_jobs.html").render(jobs=self.jobs.of(only))
                    await _send(response, "jobs", {"id": only, "html": html})
                try:
                    await asyncio.wait_for(self._closing.wait(), TICK)
                except TimeoutError:
                    pass
        except ConnectionResetError:  # the page was closed
            pass
        return response


async def _send(response: web.StreamResponse, event: str, data: dict[str, object]) -> None:
    await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0

