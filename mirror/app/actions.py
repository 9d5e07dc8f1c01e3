"""A site's actions in `mirror ui`: Run, Stop and Verify, and the way every action of the
app (these, Export, the schedule's Apply and Remove) is done and answered (`act`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import urlencode

from aiohttp import web

from mirror.app.jobs import ActionError, Jobs, Launcher
from mirror.app.library import SiteEntry

Action = Callable[[SiteEntry], Awaitable[str]]  # does it; says what it did ("" for nothing)


class App(Protocol):
    """What the actions use of the app (server.LibraryApp)."""

    launcher: Launcher
    jobs: Jobs

    def entry(self, request: web.Request) -> SiteEntry: ...

    async def site_page(self, entry: SiteEntry, message: str,
                        status: int = 200) -> web.Response: ...

    def forget(self, site_id: str) -> None: ...


class SiteActions:
    """The handlers of POST /site/{id}/run, /stop and /verify, and their shared `act`."""

    def __init__(self, app: App) -> None:
        self.app = app

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/site/{id}/run", self.run)
        router.add_post("/site/{id}/stop", self.stop)
        router.add_post("/site/{id}/verify", self.verify)

    async def act(self, request: web.Request, action: Action, *,
                  to_site: bool = False) -> web.Response:
        """Do `action`, then back to the page the form was on (the site's page for a job,
        which shows its progress); a refusal is shown on the site's page (409)."""
        entry = self.app.entry(request)
        try:
            if entry.config is None:
                raise ActionError(f"the site file has an error: {entry.error}")
            message = await action(entry)
        except ActionError as exc:
            return await self.app.site_page(entry, str(exc), status=409)
        self.app.forget(entry.id)
        back = request.headers.get("Referer", "")
        home = back.endswith(f"{request.host}/") and not to_site
        target = "/" if home else f"/site/{entry.id}"
        raise web.HTTPSeeOther(target + ("?" + urlencode({"message": message})
                                         if message else ""))

    async def run(self, request: web.Request) -> web.Response:
        new_run = (await request.post()).get("new_run") == "1"

        async def start(entry: SiteEntry) -> str:
            assert entry.config is not None
            launch = await self.app.launcher.start_run(
                entry.id, entry.file, entry.config.site.output_dir, new_run=new_run)
            return f"started a run (pid {launch.pid})"
        return await self.act(request, start)

    async def stop(self, request: web.Request) -> web.Response:
        async def stop(entry: SiteEntry) -> str:
            assert entry.config is not None
            pid = Launcher.stop(entry.config.site.output_dir)
            return f"asked the run (pid {pid}) to stop; it finishes what is in flight"
        return await self.act(request, stop)

    async def verify(self, request: web.Request) -> web.Response:
        from mirror.app.work import verify_work

        async def verify(entry: SiteEntry) -> str:
            assert entry.config is not None
            self.app.jobs.start(entry.id, "verify", verify_work(entry.config))
            return ""
        return await self.act(request, verify, to_site=True)
