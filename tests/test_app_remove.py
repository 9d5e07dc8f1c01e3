"""Removing a site from the library in the app (a real `mirror ui` process): the
confirmation page names the archive's size on disk, the POST goes through the guard, the
archive is kept unless asked, and nothing is removed while a run holds the archive."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from conftest import TestSite
from uiproc import UiProcess, chain_site, crawl, post, site_file

from mirror.app.library import Library
from mirror.app.removal import find_site, plan, remove
from mirror.archive.fsutil import disk_usage
from mirror.archive.lock import ArchiveLock
from mirror.run.report import human_bytes

pytestmark = pytest.mark.slow


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder


async def archived(library: Path, name: str,
                   make_site: Callable[[], Awaitable[TestSite]]) -> tuple[Path, Path]:
    site = chain_site(await make_site(), 3)
    path = site_file(library, name, site.base)
    assert await crawl(path) in (0, 3)  # the chain's "gone" links fail
    return path, library / "archive" / name


async def test_remove_asks_naming_the_size_then_keeps_the_archive(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    path, archive = await archived(library, "one", make_site)
    async with session.get(ui.base + "site/one") as r:
        assert r.status == 200
        site_page = await r.text()
    assert 'href="/site/one/remove">Remove from the library…</a>' in site_page
    # the row's size on disk is the confirmation's (the whole archive folder, not only its
    # WARC files), give or take the -shm file SQLite makes when the app first reads it
    shown = re.search(r'<td class="n" title="[^"]+ of WARC files">([\d.]+) KB</td>', site_page)
    assert shown, site_page
    size = human_bytes(disk_usage(archive))
    assert abs(float(shown[1]) - float(size.removesuffix(" KB"))) <= 33, (shown[1], size)
    async with session.get(ui.base + "site/one/remove") as r:
        page = await r.text()
    assert f"Its archive <code>{archive}</code> (<b class=\"size\">{size}</b> on disk) is " \
           "kept unless you tick the box below." in page
    assert f"Also delete the archive: {size} on disk" in page
    # the guard: no CSRF token, or another origin, removes nothing
    status, _ = await post(ui, session, "/site/one/remove", {"csrf": "forged"})
    assert status == 403
    status, _ = await post(ui, session, "/site/one/remove", {},
                           Origin="http://evil.example")
    assert status == 403
    assert path.exists()

    async with session.post(ui.base + "site/one/remove", allow_redirects=False, data={
            "csrf": re.search(r'name="csrf" value="([^"]+)"', page)[1]},  # type: ignore[index]
            headers={"Origin": ui.origin}) as r:
        assert r.status == 303
        target = r.headers["Location"]
    assert not path.exists() and (archive / "manifest.sqlite3").exists()
    async with session.get(ui.base + target.lstrip("/")) as r:
        home = html.unescape(await r.text())
    assert f"removed one from the library: deleted {path}" in home
    assert f"kept its archive {archive} ({size} on disk)" in home
    assert 'id="site-one"' not in home
    async with session.get(ui.base + "site/one/remove") as r:
        assert r.status == 404


async def test_remove_with_the_archive_and_not_while_it_is_locked(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    path, archive = await archived(library, "two", make_site)
    with ArchiveLock(archive):
        status, page = await post(ui, session, "/site/two/remove", {"delete_archive": "1"})
        assert status == 409
        assert "two: a mirror process (pid " in page and "is using its archive" in page
        assert path.exists() and archive.is_dir()
    size = human_bytes(disk_usage(archive))
    status, _ = await post(ui, session, "/site/two/remove", {"delete_archive": "1"})
    assert status == 303
    assert not path.exists() and not archive.exists()
    assert size.endswith("KB")


async def test_an_archive_shared_with_another_site_is_never_deleted(
        ui: UiProcess, session: aiohttp.ClientSession, library: Path,
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    path, archive = await archived(library, "three", make_site)
    twin = library / "twin.toml"
    twin.write_text(path.read_text().replace('name = "three"', 'name = "twin"'))
    async with session.get(ui.base + "site/twin/remove") as r:
        page = html.unescape(await r.text())
    assert f"Its archive folder <code>{archive}</code> is kept: {archive} is shared with " \
           "the site 'three' (its archive: " in page
    assert 'name="delete_archive"' not in page
    status, page = await post(ui, session, "/site/twin/remove", {"delete_archive": "1"})
    assert status == 409 and twin.exists() and archive.is_dir()
    status, _ = await post(ui, session, "/site/twin/remove", {})
    assert status == 303 and not twin.exists() and (archive / "manifest.sqlite3").exists()


def test_a_site_whose_archive_is_the_home_folder_leaves_it_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-written output_dir naming the home folder is refused (issue 32): the site is
    a broken file, its "archive" neither walked, nor locked, nor deleted; the file goes."""
    home, library = tmp_path / "home", tmp_path / "home" / "lib"
    library.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (home / "notes.txt").write_text("mine")
    path = library / "odd.toml"
    path.write_text(f'[site]\nname = "odd"\nstart_urls = ["http://x.test/"]\n'
                    f'output_dir = "{home}"\n')
    books = Library(library)
    entry = find_site(books, "odd")
    assert entry.config is None and "is your home folder" in str(entry.error)
    removal = plan(books, entry, home=home)
    assert (removal.archive, removal.size) == (None, 0)
    remove(removal, delete_archive=False)
    assert not path.exists()
    assert sorted(p.name for p in home.iterdir()) == ["lib", "notes.txt"]
    assert list(library.iterdir()) == []
