"""Small things a person notices in the app: its icon (no 404 in the console on every
page) and a Verify of the app's own shown as "verifying", not as "busy, pid <the app's>"."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

from uiproc import UiProcess, site_file

from mirror.app.guard import Secrets
from mirror.app.server import LibraryApp
from mirror.archive.lock import ArchiveLock


async def test_every_page_has_the_apps_icon_and_favicon_ico_answers(tmp_path: Path) -> None:
    site_file(tmp_path, "a", "http://127.0.0.1:9/")
    ui = UiProcess.start(tmp_path)
    try:
        async with ui.session() as session:
            for page in ("", "add", "site/a", "site/a/settings", "search?q=x"):
                async with session.get(ui.base + page) as r:
                    html = await r.text()
                assert r.status == 200, page
                (href,) = re.findall(r'<link rel="icon" href="([^"]+)"', html)
            for path in (href, "/favicon.ico"):
                async with session.get(ui.origin + path) as r:
                    body = await r.read()
                assert (r.status, r.content_type) == (200, "image/svg+xml"), path
                assert body.startswith(b"<svg") and b"</svg>" in body
    finally:
        assert ui.stop() == 0


def holding(archive: Path, held: threading.Event, release: threading.Event
            ) -> Callable[[Callable[[int, int], None]], str]:
    """A job's work that holds the archive's lock, as the app's verify does, until released."""
    def work(progress: Callable[[int, int], None]) -> str:
        with ArchiveLock(archive):
            held.set()
            release.wait(10)
        return "done"
    return work


async def test_the_apps_own_verify_shows_as_verifying(tmp_path: Path) -> None:
    site_file(tmp_path, "v", "http://127.0.0.1:9/")
    archive = tmp_path / "archive" / "v"
    archive.mkdir(parents=True)
    app = LibraryApp(tmp_path, keys=Secrets(), hosts=lambda: frozenset({"127.0.0.1"}))
    (entry,) = app.library.sites()
    for kind, shown in (("verify", "verifying"), ("export folder", "busy")):  # and a control
        held, release = threading.Event(), threading.Event()
        app.jobs.start("v", kind, holding(archive, held, release))
        try:
            assert await asyncio.to_thread(held.wait, 10)
            row = app.row(entry)
            html = app.render_row(row)
        finally:
            release.set()
            await app.jobs.close()
        assert row.shown_state == shown, kind
        assert f'<span class="badge run">{shown}</span>' in html
        assert (f"pid {os.getpid()}" in html) == (shown == "busy")
        assert "/site/v/verify" not in html  # no second Verify while the lock is held
        assert app.row(entry).shown_state == "never run"  # the lock free again
