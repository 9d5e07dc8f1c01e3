"""Export formats as plug-ins (mirror.replay.exporters): the app's Export section offers every
format of the registry, ZIM included, with its options as fields, through its doors (CSRF,
Origin); a format registered from outside (tests/exporter_plugin.py) shows up in
`mirror export --help`, runs from the command line and from the app, with no other change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import TestSite
from replayers import chromium
from uiproc import UiProcess, chain_site, crawl, post, site_file, until

from mirror.cli.main import build_parser
from mirror.replay.exporters import exporters, register, unregister

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "exporter_plugin.py"
#: MIRROR_SCREENSHOTS=DIR keeps the screenshots there; else they stay in tmp_path
SHOTS = os.environ.get("MIRROR_SCREENSHOTS")
TIMEOUT = 30_000  # ms, for any one thing the page should show


async def small_library(tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
                        name: str = "small") -> tuple[Path, TestSite]:
    """A library of one site, crawled to the end."""
    library = tmp_path / "library"
    library.mkdir()
    site = chain_site(await make_site(), 4)
    assert await crawl(site_file(library, name, site.base)) == 0
    return library, site


def plugged(*args: str) -> subprocess.CompletedProcess[str]:
    """`mirror ARGS` with the URL-list format registered (tests/exporter_plugin.py)."""
    return subprocess.run([sys.executable, str(PLUGIN), *args], capture_output=True,
                          text=True, timeout=120)


def export_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "--help"])
    return capsys.readouterr().out


def test_a_registered_format_joins_the_parser_and_a_clash_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    from exporter_plugin import UrlList

    assert "--urls" not in export_help(capsys)
    plugin = UrlList()
    register(plugin)
    try:
        text = export_help(capsys)
        assert "--urls FILE" in text and "--containing TEXT" in text
        assert "with --urls: only the URLs containing this text" in " ".join(text.split())
        assert exporters()[-1] is plugin
        with pytest.raises(ValueError, match="the name 'urls' or the flag --urls is taken"):
            register(UrlList())
    finally:
        unregister(plugin)
    assert "--urls" not in export_help(capsys)


async def test_a_plugged_format_runs_from_the_command_line_and_the_app(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    library, site = await small_library(tmp_path, make_site)
    toml = str(library / "small.toml")
    shown = plugged("export", "--help")
    assert shown.returncode == 0 and "--urls FILE" in shown.stdout
    listed = tmp_path / "cli.txt"
    done = plugged("export", toml, "--urls", str(listed), "--containing", "p1")
    assert (done.returncode, done.stdout) == (0, f"listed 1 URLs in {listed}\n"), done.stderr
    assert listed.read_text() == f"{site.base}p1.html\n"
    wrong = plugged("export", toml, "--to", str(tmp_path / "d"), "--containing", "p1")
    assert (wrong.returncode, wrong.stderr) == (2, "mirror: --containing goes with --urls FILE\n")

    ui = UiProcess.start(library, command=[sys.executable, str(PLUGIN), "ui", str(library)])
    try:
        async with ui.session() as session:
            async with session.get(ui.base + "site/small") as r:
                page = await r.text()
            form = page.split('id="export-urls"', 1)[1].split("</form>", 1)[0]
            assert "A list of the archived URLs" in form and 'name="containing"' in form
            assert "Export URL list" in form
            out = tmp_path / "app.txt"
            fields = {"kind": "urls", "to": str(out), "containing": "p2"}
            # the doors: no CSRF token, another origin
            async with session.post(ui.base + "site/small/export", data=fields,
                                    headers={"Origin": ui.origin}) as r:
                assert r.status == 403
            status, _ = await post(ui, session, "/site/small/export", fields,
                                   Origin="http://evil.test")
            assert status == 403 and not out.exists()
            status, _ = await post(ui, session, "/site/small/export", fields)
            assert status == 303
            await until(out.exists, 30, "the URL list")
            assert out.read_text() == f"{site.base}p2.html\n"
    finally:
        ui.stop()


async def test_the_app_exports_a_zim_that_zimcheck_passes(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    zimcheck = shutil.which("zimcheck")
    if zimcheck is None:
        pytest.skip("zimcheck not installed (Debian zim-tools)")
    pytest.importorskip("libzim", reason="ZIM export needs mirror[zim]")
    library, _ = await small_library(tmp_path, make_site)
    shots = Path(SHOTS) if SHOTS else tmp_path
    out = tmp_path / "out" / "small.zim"
    ui = UiProcess.start(library)
    try:
        async with chromium() as browser:
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            page = await context.new_page()
            page.set_default_timeout(TIMEOUT)
            await page.goto(f"{ui.base}?token={ui.token}")
            await page.goto(f"{ui.base}site/small")
            names = await page.locator("form.export input[name=kind]").evaluate_all(
                "inputs => inputs.map(i => i.value)")
            assert names == [e.name for e in exporters()] == ["folder", "wacz", "zim"]
            zim = page.locator("#export-zim")
            assert await zim.locator("input[name=to]").input_value() == \
                str(library / "exports" / "small.zim")
            await zim.locator("summary").click()
            # a bad value is refused with the field's name, and nothing starts
            await zim.locator("input[name=at]").fill("yesterday")
            await zim.locator("button").click()
            await page.wait_for_selector("text=As it was at 'yesterday': expected 1 to 14 "
                                         "digits (YYYYmmddHHMMSS)")
            zim = page.locator("#export-zim")
            await zim.locator("input[name=to]").fill(str(out))
            await zim.locator("summary").click()
            await zim.locator("input[name=title]").fill("Small from the app")
            await page.locator("#export").screenshot(path=str(shots / "app-export-1280.png"))
            await zim.locator("button").click()
            await page.wait_for_selector("#jobs .job.done:has-text('export ZIM')",
                                         timeout=60_000)
            message = await page.locator("#jobs .job.done pre").inner_text()
            assert message.startswith(f"wrote {out} (") and "opens on" in message
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.locator("#export-zim summary").click()
            await page.screenshot(path=str(shots / "app-export-390.png"), full_page=True)
            assert await page.evaluate(
                "document.documentElement.scrollWidth <= window.innerWidth")
            await context.close()
    finally:
        ui.stop()
    check = subprocess.run([zimcheck, "-A", str(out)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Overall Test Status: Pass" in check.stdout and "[ERROR]" not in check.stdout

    from libzim.reader import Archive

    assert bytes(Archive(out).get_metadata("Title")).decode() == "Small from the app"
