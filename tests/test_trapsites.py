"""Generated traps (issue 33, tests/trapsites.py): with the default settings, a run on each
site ends by itself, stores every content page and spends few requests on the trap."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trapsites
from conftest import Crawl, crawl_to_end, write_config

from mirror.config import load_config

#: a hang guard, not a measure: a run that ends by itself takes a few seconds
HANG_SECONDS = 30.0
#: requests allowed beyond two per content page: a few samples of each trap pattern
SAMPLES = 30


async def run_on(site: trapsites.TrapSite, aiohttp_server: Any, tmp_path: Path
                 ) -> tuple[Crawl | None, str]:
    """A crawl of the site with the defaults (robots.txt off, as in every crawl test);
    None and what it did when it has not ended within HANG_SECONDS."""
    server = await aiohttp_server(site.app(), host="127.0.0.1")
    site.base = str(server.make_url("/"))
    cfg = load_config(write_config(tmp_path, [site.base]))
    try:
        result = await crawl_to_end(cfg, timeout=HANG_SECONDS)
    except TimeoutError:
        return None, f"{site.name}: {len(site.log)} requests in {HANG_SECONDS:.0f} s, not ended"
    return Crawl(result, tmp_path), f"{site.name}: {len(site.log)} requests, ended"


@pytest.mark.xfail(strict=False, reason="TODO issue 33: learned trap patterns and CMS rules "
                   "(other branches) make these runs end by themselves")
@pytest.mark.parametrize("kind", list(trapsites.all_sites()))
async def test_a_trap_site_run_ends_with_its_content(kind: str, aiohttp_server: Any,
                                                     tmp_path: Path) -> None:
    site = trapsites.all_sites()[kind]()
    crawl, said = await run_on(site, aiohttp_server, tmp_path)
    assert crawl is not None, said
    stored = {u for u, rs in crawl.responses().items() if any(r["status"] == 200 for r in rs)}
    assert site.missing(stored) == [], said
    assert len(site.log) <= 2 * len(site.content) + SAMPLES, said


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
