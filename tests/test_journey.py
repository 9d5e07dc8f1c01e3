"""A day with mirror, end to end (issue 31's proof): a person's day in the library app,
from a fresh home holding the default library ~/mirror, in Chromium, once with the editable
install the tests run in and once with a regular one in a fresh venv.

`cd ~ && mirror ui --no-browser` in a small environment (HOME, PATH, LANG, XDG_STATE_HOME;
the crontab of a private spool), then: add two sites on 127.0.0.1 (named by host and port),
Run now, watch the numbers move, Stop (pending, never gone), Resume to the end, the run's
report, Browse a page (on its own origin) and back by the banner's "◀ library", run the
second site twice with a change between, search, a page's history and compare, Settings
(schedule and retention), Apply the schedule, run the command the crontab line holds as
cron would, see the scheduled run in the app, and remove a site (its archive kept). Every
step asserts what the page shows. Screenshots of the home, site, report, compare and
search pages at 390x844 and 1280x800 go to MIRROR_SCREENSHOTS (else tmp_path)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import TestSite
from replayers import chromium
from test_app_browser import archived_page
from test_launch import cron_command
from test_phone import DESKTOP, PHONE, Shots, context_for
from test_schedule import crontab_command
from uiproc import UiProcess, archive_runs, chain_site

from mirror.archive.lock import ArchiveLock
from mirror.schedule.crontab import CRONTAB_ENV, TAG

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000  # ms: for anything a page should show
RUN_TIMEOUT = 120_000  # ms: for a run to end
CHAIN_PAGES = 40
#: what the slow site's first run captures: its index and pages, 3 missing pages, and
#: robots.txt and sitemap.xml (404: the site has none)
CAPTURED = 1 + CHAIN_PAGES + 3 + 2
GONE_OR_MORE = re.compile(r"\b[1-9]\d* gone\b")


def garden(site: TestSite, version: int) -> TestSite:
    """A small site whose article gains a sentence in version 2; the index links to the
    article twice (once with ?ref=index, a variant search folds under it)."""
    site.page("/", "<html><head><title>Balcony garden</title></head><body><h1>Balcony garden"
                   '</h1><a href="/tomatoes.html">tomatoes</a> '
                   '<a href="/tomatoes.html?ref=index">more tomatoes</a> '
                   '<a href="/herbs.html">herbs</a></body></html>')
    extra = " Water them in the evening, never at noon." if version == 2 else ""
    site.page("/tomatoes.html", "<html><head><title>Growing tomatoes on a balcony</title>"
                                "</head><body><p>Tomatoes want six hours of sun and a deep "
                                f"pot.{extra}</p>\n<p>Feed them once the first truss has set."
                                "</p></body></html>")
    site.page("/herbs.html", "<html><head><title>Herbs that survive the winter</title></head>"
                             "<body><p>Thyme, sage and rosemary ask for little.</p>"
                             "</body></html>")
    return site


def field_id(key: str) -> str:
    """The selector of a form field's input: "#f-crawl\\.per_host"."""
    return "#f-" + key.replace(".", "\\.")


def name_of(site: TestSite) -> str:
    """The name `mirror add` gives a site on 127.0.0.1:PORT."""
    return "127-0-0-1-" + str(urlsplit(site.base).port)


@dataclass
class Day:
    """The person's browser on the app, and what the test knows of their home."""

    page: Any
    ui: UiProcess
    home: Path
    env: dict[str, str]  # what `mirror ui` was started with
    crontab: str  # the crontab command of the private spool

    @property
    def library(self) -> Path:
        return self.home / "mirror"

    def row(self, name: str) -> Any:
        return self.page.locator(f"#site-{name}")

    async def text(self, selector: str = "main") -> str:
        return str(await self.page.inner_text(selector))

    async def see(self, selector: str, timeout: float = TIMEOUT) -> None:
        await self.page.wait_for_selector(selector, timeout=timeout)

    async def open_home(self) -> None:
        await self.page.goto(self.ui.base)
        assert await self.page.title() == "Library · mirror"

    # -- the steps ----------------------------------------------------------------------------
    async def first_visit(self) -> None:
        await self.page.goto(f"{self.ui.base}?token={self.ui.token}")
        assert str(self.library) in await self.text("h1")
        assert "No site files in" in await self.text()

    async def add(self, site: TestSite, **fields: str) -> str:
        """The Add form with the start URL (and `fields` by key); the site's page after."""
        await self.page.click("header >> text=Add a site")
        await self.page.fill("#f-site\\.start_urls", site.base)
        for key, value in fields.items():
            await self.page.fill(field_id(key), value)
        await self.page.click("button:has-text('Add')")
        name = name_of(site)
        await self.page.wait_for_url(re.compile(f"/site/{name}([?]|$)"), timeout=TIMEOUT)
        assert await self.text("h1") == name
        assert await self.text("p.message") == f"added {self.library / name}.toml"
        assert "No runs yet." in await self.text()
        return name

    async def run_now(self, name: str) -> None:
        await self.row(name).locator("button:has-text('Run now')").click()

    async def until_idle(self, name: str, run: int) -> None:
        """The row of `name` says idle with run `run` as its last (without a reload)."""
        await self.see(f"#site-{name}:has(.badge:has-text('idle'))"
                       f":has(td.last a:text-is('run {run}'))", RUN_TIMEOUT)

    async def first_run(self, name: str) -> None:
        """From the home page: Run now, to the end."""
        await self.page.click("header >> text=Library")
        assert await self.page.locator("tr.site").count() == 2
        await self.run_now(name)
        await self.until_idle(name, 1)
        changes = await self.row(name).locator(".changes").inner_text()
        assert changes == f"{CAPTURED} new · 0 changed · 0 gone · 0 failed", changes

    async def watch_and_stop(self, name: str) -> None:
        """Run now again, the numbers move without a reload, Stop."""
        await self.run_now(name)
        await self.see(f"#site-{name} .badge:has-text('running')")
        done = self.row(name).locator(".done")
        seen: list[int] = []
        deadline = time.monotonic() + 60
        while len(set(seen)) < 3 and time.monotonic() < deadline:
            seen.append(int(await done.inner_text(timeout=TIMEOUT)))
            await self.page.wait_for_timeout(250)
        assert len(set(seen)) >= 3 and seen == sorted(seen), seen
        assert "queued" in await self.row(name).inner_text()
        await self.row(name).locator("button:has-text('Stop')").click()  # confirm: accepted
        await self.see(f"#site-{name} .badge:has-text('interrupted')")

    async def nothing_gone(self, name: str) -> None:
        """The row and the runs table say the pages not reached yet are pending, none gone."""
        await self.see(f"#site-{name}:has(td.last a:text-is('run 2')) .changes .pending")
        changes = await self.row(name).locator(".changes").inner_text()
        assert re.search(r"\b[1-9]\d* pending\b", changes) and " 0 gone" in changes, changes
        assert "resumable" in await self.row(name).inner_text()
        await self.page.goto(self.ui.base + f"site/{name}")
        second, _ = await self.page.locator("table.runs tr:has(td)").all_inner_texts()
        assert second.startswith("run 2\tinterrupted"), second
        assert re.search(r"\b[1-9]\d* pending\b", second), second
        assert not GONE_OR_MORE.search(second), second

    async def resume(self, name: str) -> None:
        await self.row(name).locator("button:has-text('Resume')").click()
        await self.until_idle(name, 2)
        changes = await self.row(name).locator(".changes").inner_text()
        assert changes == "0 new · 0 changed · 0 gone · 0 failed", changes
        await self.page.reload()
        second, _ = await self.page.locator("table.runs tr:has(td)").all_inner_texts()
        assert second.startswith("run 2\tcomplete") and "pending" not in second, second

    async def report(self, name: str) -> str:
        """The resumed run's report from the row's link; its address."""
        await self.row(name).locator("td.last a:has-text('run 2')").click()
        await self.see("h2#broken")
        assert await self.text("h1") == f"{name}: run 2"
        body = await self.text()
        assert "complete" in body and "exit 0" in body, body[:500]
        changes = await self.text("table.facts tr:has(th:text-is('changes')) td")
        unchanged = CHAIN_PAGES + 1  # the 404s were missing before too: nothing to say
        assert changes == f"0 new · 0 changed · {unchanged} unchanged · 0 gone · 0 failed", \
            changes
        assert "Broken links (3)" in body
        return str(self.page.url)

    async def browse_and_back(self, name: str) -> None:
        """A page the report links to, on the replay server's origin; back by its banner."""
        link = self.page.locator("table.broken td.url a").first
        linked = await link.inner_text()
        number = re.search(r"/p(\d+)\.html$", linked)
        assert number, linked
        await link.click()
        frame = await archived_page(self.page)
        assert urlsplit(self.page.url).port != urlsplit(self.ui.base).port, self.page.url
        assert await frame.title() == f"Page {number[1]}"
        assert f"text {number[1]}" in await frame.inner_text("body")
        back = self.page.locator("#mb-library")
        assert await back.inner_text() == "◀ library"
        await back.click()
        await self.page.wait_for_url(self.ui.base + f"site/{name}", timeout=TIMEOUT)
        assert await self.text("h1") == name

    async def two_runs(self, name: str, site: TestSite) -> None:
        """Run the garden, change its article, run it again."""
        await self.open_home()
        await self.run_now(name)
        await self.until_idle(name, 1)
        garden(site, 2)
        await self.run_now(name)
        await self.until_idle(name, 2)
        changes = await self.row(name).locator(".changes").inner_text()
        assert changes == "0 new · 2 changed · 0 gone · 0 failed", changes

    async def search(self) -> str:
        """From the home page's box: the total line and the hit; the results' address."""
        await self.open_home()
        await self.page.fill("form.search input[name=q]", "truss")
        await self.page.click("form.search button:has-text('Search')")
        await self.see("p.total")
        assert await self.text("p.total") == "1 page in 1 site, best first"
        hit = self.page.locator("li.hit")
        assert await hit.count() == 1
        assert await hit.locator("a.open").inner_text() == "Growing tomatoes on a balcony"
        assert "truss" in await hit.locator(".snippet").inner_text()
        assert await hit.locator(".variants summary").inner_text() == "+1 variant"
        return str(self.page.url)

    async def history_and_compare(self, name: str) -> str:
        """The hit's history: two captures; compare them; the compare page's address."""
        await self.page.locator("li.hit a:has-text('history')").click()
        await self.see("table.history")
        assert await self.text("h1") == f"{name}: history of {await self.text('h1 .url')}"
        assert "2 captures, newest first" in await self.text()
        await self.page.click("button:has-text('Compare the two')")
        await self.see("p.stats")
        assert (await self.text("h1")).startswith(f"{name}: changes to ")
        assert await self.text("p.stats") == "8 words added, 0 removed."
        added = " ".join(await self.page.locator("div.diff ins").all_inner_texts())
        assert "Water them in the evening, never at noon." in added, added
        assert re.search(r"\(run 1\) to .*\(run 2\)", await self.text()), await self.text()
        return str(self.page.url)

    async def settings(self, name: str) -> None:
        await self.page.goto(self.ui.base + f"site/{name}")
        await self.row(name).locator("a:has-text('Settings')").click()
        await self.page.fill("#f-schedule\\.every", "daily 03:15")
        await self.page.fill("#f-retention\\.keep_last", "5")
        await self.page.click("button:has-text('Save')")
        await self.see("p.message")
        assert await self.text("p.message") == "saved"
        assert await self.page.input_value("#f-schedule\\.every") == "daily 03:15"
        assert await self.page.input_value("#f-retention\\.keep_last") == "5"
        assert await self.page.locator(".field.invalid").count() == 0

    async def apply(self, name: str) -> None:
        """The site's page says the schedule is not installed; Apply installs it."""
        await self.page.click(f"h1 a:has-text('{name}')")
        await self.see("section#schedule")
        block = await self.text("section#schedule")
        assert "Every daily 03:15" in block and "not installed" in block, block
        await self.page.click("section#schedule button:has-text('Apply')")
        await self.see("section#schedule [data-timer=installed]")
        block = await self.text("section#schedule")
        assert "Timer: crontab installed; the OS runs it next" in block, block
        assert re.search(r"runs it next .*03:15", block), block
        assert "Last scheduled run: none yet" in block, block
        assert "daily 03:15" in await self.row(name).locator("td.schedule").inner_text()

    async def installed_line(self) -> str:
        """The command the crontab line holds, as cron hands it to /bin/sh."""
        proc = await asyncio.create_subprocess_exec(
            self.crontab, "-l", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err
        (line,) = [s for s in out.decode().splitlines() if TAG in s]
        assert line.startswith("15 3 * * * "), line
        return cron_command(line)

    async def as_cron_runs_it(self, command: str) -> None:
        """`/bin/sh -c COMMAND` from the home, in cron's environment; awaited, for the test
        sites run on this event loop."""
        cron_env = {"HOME": str(self.home), "LOGNAME": "root", "SHELL": "/bin/sh",
                    "PATH": "/usr/bin:/bin"}
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=self.home, env=cron_env, start_new_session=True,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:  # the shell and the mirror it started
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        assert proc.returncode == 0, out.decode()

    async def scheduled_run_shows(self, name: str) -> None:
        """The site's page, open all along, shows run 3 and 'last scheduled' (no reload);
        after a reload, the schedule block and the runs table too."""
        await self.until_idle(name, 3)
        last = self.row(name).locator(".last-scheduled")
        assert re.fullmatch(r"last scheduled: run 3, .* ago, exit 0", await last.inner_text())
        await self.page.reload()
        block = await self.text("section#schedule")
        assert re.search(r"Last scheduled run: run 3, .* ago, exit 0", block), block
        runs = await self.page.locator("table.runs tr:has(td)").all_inner_texts()
        assert [r.split("\t")[0] for r in runs] == ["run 3", "run 2", "run 1"], runs

    async def remove(self, name: str, other: str) -> None:
        """Remove `name` from its page: the confirmation names the archive's size; the
        site leaves the home page, its archive stays."""
        await self.page.goto(self.ui.base + f"site/{name}")
        await self.page.click("text=Remove from the library…")
        await self.see("b.size")
        assert await self.text("h1") == f"Remove {name} from the library?"
        size = await self.text("b.size")
        assert re.fullmatch(r"[\d.]+ (bytes|KB|MB|KiB|MiB|kB)", size), size
        assert f"({size} on disk) is kept unless you tick the box below" in await self.text()
        await self.page.click(f"button:has-text('Remove {name}')")
        await self.page.wait_for_url(re.compile(r"/\?message="), timeout=TIMEOUT)
        archive = self.library / "archive" / name
        assert await self.row(name).count() == 0
        assert await self.row(other).count() == 1
        assert name not in await self.text("table.sites")
        assert not (self.library / f"{name}.toml").exists()
        assert f"kept its archive {archive} ({size} on disk)" in await self.text("p.message")
        assert [r.state for r in archive_runs(archive)] == ["complete", "complete"]

    async def screenshots(self, browser: Any, folder: Path, urls: dict[str, str]) -> None:
        """Each page at a phone's and a desktop's size: kept, and none scrolls sideways."""
        problems: list[str] = []
        for size, label in ((PHONE, "390"), (DESKTOP, "1280")):
            context = await context_for(browser, size)
            try:
                page = await context.new_page()
                page.set_default_timeout(TIMEOUT)
                await page.goto(f"{self.ui.base}?token={self.ui.token}")
                shots = Shots(page, folder, label, problems)
                for name, url in urls.items():
                    await shots.check(f"journey-{name}", url)
            finally:
                await context.close()
        assert not problems, "\n".join(problems)


def stop_runs(archives: Path) -> None:
    """Stop, by the pid in its archive's lock, any run the app started that is still going
    (a step failed while it ran): runs go on after the app stops."""
    for archive in archives.glob("*"):
        holder = ArchiveLock.holder(archive)
        if holder and holder.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(holder), signal.SIGTERM)


def small_home(home: Path, bin_dir: Path, crontab: str) -> dict[str, str]:
    """The environment of `mirror ui` started by a person in a fresh home."""
    return {"HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8",
            "XDG_STATE_HOME": str(home / ".local" / "state"), CRONTAB_ENV: crontab}


def private_crontab(tmp_path: Path) -> str:
    """Debian's crontab on a spool of this test (test_schedule.crontab_command); a skip
    where that cannot be (no root, no unshare)."""
    command = crontab_command(tmp_path)
    probe = subprocess.run([command, "-l"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0 and "no crontab for" not in probe.stderr:
        pytest.skip(f"no private crontab here (needs root, unshare, cron): {probe.stderr}")
    return command


async def test_a_day_with_mirror(installed: Path, tmp_path: Path,
                                 make_site: Callable[[], Awaitable[TestSite]]) -> None:
    started = time.monotonic()
    shots = Path(SHOTS) if SHOTS else tmp_path / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    home.mkdir()
    crontab = private_crontab(tmp_path)
    slow = chain_site(await make_site(), CHAIN_PAGES)
    slow.latency = 0.25
    small = garden(await make_site(), 1)
    env = small_home(home, installed, crontab)
    ui = UiProcess.start(home / "mirror", command=[str(installed / "mirror"), "ui"],
                         port=None, cwd=home, env=env)
    try:
        async with chromium() as browser:
            context = await browser.new_context(viewport=DESKTOP)
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT)
            page.on("dialog", lambda dialog: dialog.accept())
            day = Day(page, ui, home, env, crontab)
            try:
                await journey(day, browser, shots, slow, small)
            except BaseException:
                await page.screenshot(path=str(shots / "journey-failure.png"), full_page=True)
                print(f"\nfailed at {page.url}:\n{(await day.text('body'))[:3000]}")
                raise
            await context.close()
    finally:
        stop_runs(home / "mirror" / "archive")
        assert ui.stop() == 0, "".join(ui.lines)
    print(f"\nthe journey ({installed}): {time.monotonic() - started:.1f} s wall time; "
          f"screenshots in {shots}")


async def journey(day: Day, browser: Any, shots: Path, slow: TestSite,
                  small: TestSite) -> None:
    """The day, step by step."""
    ui = day.ui
    await day.first_visit()
    one = await day.add(slow, **{"crawl.per_host": "1"})
    two = await day.add(small)
    slow.latency = 0.02
    await day.first_run(one)
    slow.latency = 0.25  # the second run: slow enough to watch and stop
    await day.watch_and_stop(one)
    await day.nothing_gone(one)
    await day.resume(one)
    report = await day.report(one)
    await day.browse_and_back(one)
    await day.two_runs(two, small)
    search = await day.search()
    compare = await day.history_and_compare(two)
    await day.settings(two)
    await day.apply(two)
    await day.as_cron_runs_it(await day.installed_line())
    await day.scheduled_run_shows(two)
    await day.screenshots(browser, shots, {
        "home": ui.base, "site": ui.base + f"site/{two}", "report": report,
        "compare": compare, "search": search})
    await day.remove(one, two)
