"""`mirror ui --db`: the Fleet page over a real PostgreSQL with `mirror worker` processes:
workers and their runs, the queue (running, waiting, failed), each site's last and next
run; the app's doors (token, Host) hold for it; and the page in Chromium."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TestSite
from fleetproc import WorkerProcess, jobs, mirror, runs, site_file, until
from test_fleet import chain
from uiproc import UiProcess

pytestmark = pytest.mark.slow

#: MIRROR_SCREENSHOTS=DIR keeps the page's screenshot there (else in tmp_path)
SHOTS = os.environ.get("MIRROR_SCREENSHOTS")


def _fleet(tmp_path: Path, dsn: str, s3: Any, site: TestSite) -> tuple[Path, WorkerProcess]:
    """Three sites: `slow` running with another run waiting, `broken` failed (its bucket
    does not exist), `later` never run; one worker."""
    lib = tmp_path / "library"
    slow = site_file(lib, "slow", site.base, s3.url + "/slow", workers=1, per_host=1)
    broken = site_file(lib, "broken", site.base, "s3://no-such-bucket-here/x")
    site_file(lib, "later", site.base, s3.url + "/later", every="weekly sun 04:00")
    assert mirror("schedule", "apply", str(lib), "--db", dsn).returncode == 0
    worker = WorkerProcess.start(dsn, tmp_path / "w1", "--concurrency", "2", name="alpha-box")
    assert mirror("schedule", "run-now", str(broken), "--db", dsn).returncode == 0
    until(lambda: jobs(dsn, "failed"), 30, "the broken site's run to fail", workers=(worker,))
    assert mirror("schedule", "run-now", str(slow), "--db", dsn).returncode == 0
    until(lambda: any((r["progress"] or {}).get("done") for r in runs(dsn, "slow")), 30,
          "the slow run's progress", workers=(worker,))
    assert mirror("schedule", "run-now", str(slow), "--db", dsn).returncode == 0
    return lib, worker


async def test_the_fleet_page_shows_workers_runs_queue_and_sites(
        tmp_path: Path, pg_dsn: str, s3: Any, site_in_thread: Callable[[], TestSite]) -> None:
    site = chain(site_in_thread(), 60, latency=0.3)
    lib, worker = _fleet(tmp_path, pg_dsn, s3, site)
    ui = UiProcess.start(lib, "--db", pg_dsn)
    try:
        assert any("and the fleet at postgres@127.0.0.1" in line for line in ui.lines)
        async with ui.session() as session:
            async with session.get(ui.base) as home:
                assert '<a href="/fleet">Fleet</a>' in await home.text()
            async with session.get(ui.base + "fleet") as resp:
                assert resp.status == 200
                page = await resp.text()
            async with session.get(ui.base + "fleet",
                                   headers={"Host": "evil.example"}) as resp:
                assert resp.status == 421  # DNS rebinding: the app's doors hold
            async with session.post(ui.base + "fleet", data={},
                                    headers={"Origin": ui.origin}) as resp:
                assert resp.status in (403, 405)
        async with ui.session() as stranger:
            stranger.cookie_jar.clear()
            async with stranger.get(ui.base + "fleet") as resp:
                assert resp.status == 403  # no token, no fleet
        assert 'id="worker-' in page and "alpha-box" in page and "alive" in page
        assert '<span class="badge ok">1 worker alive</span>' in page
        assert 'id="fleet-site-slow"' in page and 'id="fleet-site-later"' in page
        assert "Sun" in page or "in " in page  # later's next run
        assert 'data-status="doing"' in page and 'data-status="todo"' in page
        assert 'data-status="failed"' in page
        assert "no-such-bucket-here" in page  # why broken's run failed
        assert "done ·" in page  # the slow run's live numbers
        await _look(ui, tmp_path)
    finally:
        ui.stop()
        worker.stop()


async def _look(ui: UiProcess, tmp_path: Path) -> None:
    from replayers import chromium

    shots = Path(SHOTS) if SHOTS else tmp_path
    async with chromium() as browser:
        context = await browser.new_context(viewport={"width": 1360, "height": 900})
        page = await context.new_page()
        await page.goto(f"{ui.base}?token={ui.token}")
        await page.click("header >> text=Fleet")
        await page.wait_for_selector("tr[data-status='doing']")
        assert await page.title() == "Fleet · mirror"
        text = await page.inner_text("main")
        assert "Workers" in text and "Sites" in text and "Queue" in text
        await page.screenshot(path=str(shots / "app-fleet.png"), full_page=True)
        # the page reloads itself: a second look later shows the run further on
        first = await page.inner_text("#fleet-site-slow")
        await page.wait_for_timeout(6000)
        assert await page.inner_text("#fleet-site-slow") != first


def test_without_db_there_is_no_fleet_page(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    monkeypatch.delenv("MIRROR_DB", raising=False)
    ui = UiProcess.start(tmp_path / "lib")

    async def look() -> tuple[int, str]:
        async with ui.session() as session:
            async with session.get(ui.base + "fleet") as resp:
                status = resp.status
            async with session.get(ui.base) as home:
                return status, await home.text()
    try:
        status, home = asyncio.run(look())
    finally:
        ui.stop()
    assert status == 404 and "/fleet" not in home
