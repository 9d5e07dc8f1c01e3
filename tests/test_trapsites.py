"""Generated traps (issue 33, tests/trapsites.py): with the default settings, a run on each
site ends by itself, stores every content page and spends few requests on the trap."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trapsites
from conftest import read_records, write_config

#: a hang guard, not a measure: a run that ends by itself takes a few seconds
HANG_SECONDS = 30.0
GRACE_SECONDS = 30.0


async def run_on(site: trapsites.TrapSite, aiohttp_server: Any, tmp_path: Path
                 ) -> tuple[set[str] | None, str]:
    """`mirror run` on the site with the defaults (robots.txt off, as in every crawl test), in
    a process of its own so that the hang guard holds: the URLs stored with status 200, or
    None when it has not ended within HANG_SECONDS; and what it did."""
    server = await aiohttp_server(site.app(), host="127.0.0.1")
    site.base = str(server.make_url("/"))
    config = write_config(tmp_path, [site.base])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "--quiet", str(config), cwd=tmp_path,
        start_new_session=True, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    try:
        await asyncio.wait_for(proc.wait(), HANG_SECONDS)
    except TimeoutError:
        await stop(proc)
        return None, f"{site.name}: {len(site.log)} requests in {HANG_SECONDS:.0f} s, not ended"
    stored = {r["uri"] for r in read_records(tmp_path / "archive" / "warc")
              if r["type"] == "response" and r["status"] == 200}
    return stored, f"{site.name}: {len(site.log)} requests, ended ({proc.returncode})"


async def stop(proc: asyncio.subprocess.Process) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        await asyncio.wait_for(proc.wait(), GRACE_SECONDS)
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


@pytest.mark.parametrize("kind", list(trapsites.all_sites()))
async def test_a_trap_site_run_ends_with_its_content(kind: str, aiohttp_server: Any,
                                                     tmp_path: Path) -> None:
    """The run ends by itself (the built-in rules and the learned patterns stop the trap)
    with every content page stored; the request counts go to bench/README.md."""
    site = trapsites.all_sites()[kind]()
    stored, said = await run_on(site, aiohttp_server, tmp_path)
    print(said)
    assert stored is not None, said
    assert site.missing(stored) == [], said


@pytest.mark.parametrize("kind", list(trapsites.all_sites()))
async def test_every_content_page_is_linked_from_the_start(kind: str,
                                                           aiohttp_server: Any) -> None:
    """The sites themselves: the start page links each content page, which answers."""
    site = trapsites.all_sites()[kind]()
    server = await aiohttp_server(site.app(), host="127.0.0.1")
    async with aiohttp.ClientSession() as session:
        async with session.get(str(server.make_url("/"))) as resp:
            links = re.findall(r'href="([^"]+)"', await resp.text())
        for pattern in site.content:
            found = [h for h in links if re.fullmatch(pattern.rstrip("$"), h)]
            assert found, (kind, pattern)
            async with session.get(str(server.make_url(found[0]))) as resp:
                assert resp.status == 200 and "content-" in await resp.text()
