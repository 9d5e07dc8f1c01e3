"""The app's Export form takes `~/x.wacz` as a shell does: in the home folder, never in a
folder literally named `~` (issue 32: 12)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from conftest import TestSite
from test_app import finished_site
from uiproc import UiProcess, chain_site, post, until


async def test_export_form_expands_tilde_in_the_home_folder(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    library, home = tmp_path / "library", tmp_path / "home"
    library.mkdir()
    home.mkdir()
    ui = UiProcess.start(library, env={**os.environ, "HOME": str(home)})
    try:
        async with ui.session() as session:
            await finished_site(ui, session, library, chain_site(await make_site(), 3), "t")
            status, _ = await post(ui, session, "/site/t/export",
                                   {"kind": "wacz", "to": "~/x.wacz"})
            assert status == 303
            await until(lambda: (home / "x.wacz").is_file(), 30, "the WACZ in the home folder")
    finally:
        ui.stop()
    assert not (library / "~").exists() and not Path("~").exists()
