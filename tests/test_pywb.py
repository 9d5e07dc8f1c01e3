"""Interop: pywb replays our WARC files through our index.cdxj, revisits included (W6)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest
from aiohttp import ClientSession
from conftest import RunClock, free_port, server_process

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parent.parent
# pywb pins brotlipy, whose `brotli` module shadows brotli>=1.2 (our br decoder), so it cannot
# share our venv: .ci/run installs it into .venv-pywb.
CANDIDATES = [os.environ.get("MIRROR_PYWB", ""), str(ROOT / ".venv-pywb" / "bin" / "wayback"),
              shutil.which("wayback") or ""]


def wayback() -> str:
    found = next((c for c in CANDIDATES if c and os.access(c, os.X_OK)), None)
    if found is None:
        pytest.skip("pywb not installed: it cannot share our venv (its brotlipy shadows brotli"
                    ">=1.2); .ci/run puts it in .venv-pywb, or set MIRROR_PYWB=/path/to/wayback")
    return found


@asynccontextmanager
async def pywb(collections: dict[str, Path], folder: Path) -> AsyncIterator[str]:
    """pywb serving each archive folder (its index.cdxj and warc/) as a collection."""
    exe = wayback()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("collections:\n" + "".join(
        f"  {name}:\n    index_paths: {path / 'index.cdxj'}\n    archive_paths: {path / 'warc'}/\n"
        for name, path in collections.items()))
    port = free_port()
    async with server_process([exe, "-p", str(port), "-b", "127.0.0.1"],
                              f"http://127.0.0.1:{port}/", cwd=folder) as base:
        yield base


async def test_pywb_replays_start_page_redirect_and_revisits(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    wayback()
    site, other, done = await site_def.crawl_site(make_site, crawl)
    site_def.write_history(tmp_path / "hist")
    collections = {"site": done.archive, "hist": tmp_path / "hist"}
    async with pywb(collections, tmp_path / "pywb") as base, ClientSession() as session:
        async with session.get(f"{base}site/2999id_/{site.base}") as resp:
            assert resp.status == 200
            assert await resp.read() == site_def.index_html(other.base).encode("iso-8859-1")
        async with session.get(f"{base}site/2999mp_/{site.base}") as resp:
            assert resp.status == 200 and "Welcome caf" in await resp.text()
        async with session.get(f"{base}site/2999id_/{site.base}old",
                               allow_redirects=False) as resp:
            assert resp.status == 301
            assert resp.headers["Location"].endswith("/about")
        for ts, body in (("20240101000000", site_def.V1), ("20250101000000", site_def.V2),
                         ("20250601000000", site_def.V2), ("20250701000000", site_def.V2)):
            async with session.get(f"{base}hist/{ts}id_/{site_def.HISTORY_URL}") as resp:
                assert (resp.status, await resp.read()) == (200, body), ts
    assert other.log == []


async def test_pywb_replays_each_run_of_an_incremental_crawl(aiohttp_server: Any, crawl: Any,
                                                             tmp_path: Path) -> None:
    """I2/W6 with pywb: the bytes of run 1 at run 1's time, of run 2 at run 2's, for every
    URL, through our index and our revisit records (304 and same-payload ones)."""
    wayback()  # skip early when pywb is missing
    from test_incremental import VersionedSite, index_lines, start

    site = VersionedSite()
    for p in ("/v/1", "/v/2", "/s/1", "/s/2"):
        site.pages[p] = f"first version of {p}"
    site.linked = list(site.pages)
    base = await start(aiohttp_server, site)
    clock = RunClock()
    await crawl([base], clock=clock)
    v1 = {p: site.body(p) for p in site.pages}
    site.pages["/v/2"] = "second version of /v/2"
    site.pages["/s/2"] = "second version of /s/2"
    clock.next_run()
    second = await crawl([base], clock=clock)
    # each URL's capture time in run 1 and in run 2 (a run may straddle a second boundary)
    stamps = index_lines(second.archive)
    v2 = {p: site.body(p) for p in site.pages}
    async with pywb({"site": second.archive}, tmp_path / "pywb") as replay, \
            ClientSession() as session:
        for path in site.pages:
            ts1, ts2 = stamps[base + path[1:]]
            assert ts1 < ts2, path
            for stamp, body in ((ts1, v1[path]), (ts2, v2[path])):
                async with session.get(f"{replay}site/{stamp}id_/{base}{path[1:]}") as resp:
                    assert resp.status == 200, (stamp, path)
                    assert await resp.read() == body, (stamp, path)
