"""Replay equivalence: mirror serve, pywb and ReplayWeb.page give the live site's answer for
every URL at every run, in any order, where redirects, 404s and pages share their bodies."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import replayers
from aiohttp import ClientSession
from conftest import RunClock

from mirror.replay.captures import CaptureIndex
from mirror.replay.wacz import write_wacz

pytestmark = [pytest.mark.interop, pytest.mark.browser]

MOVED = b"<html><body>Moved</body></html>"  # every redirect's body, and one 200 page's
NOTHING = b"<html><body>Nothing here</body></html>"  # the 404s' body, and one 200 page's
TWIN = b"<html><body>Twin page</body></html>"  # two 200 pages
#: path -> (status, Location or None, body) at run 1, linked in this order from the start
#: page, which one worker crawls in this order: the first capture of a shared body is a 301
#: (MOVED) and a 200 (NOTHING), the ones that a revisit of the others would point at
RUN_1: dict[str, tuple[int, str | None, bytes]] = {
    "/old/a.html": (301, "/new/a.html", MOVED),
    "/chain/hop1.html": (301, "/chain/hop2.html", MOVED),
    "/chain/hop2.html": (302, "/target.html", MOVED),
    "/old/b.html": (302, "/new/b.html", MOVED),
    "/moved.html": (200, None, MOVED),
    "/notice.html": (200, None, NOTHING),
    "/gone/x.html": (404, None, NOTHING),
    "/gone/y.html": (404, None, NOTHING),
    "/twin/one.html": (200, None, TWIN),
    "/twin/two.html": (200, None, TWIN),
    "/target.html": (200, None, b"<html><body>Target, first version</body></html>"),
    "/new/a.html": (200, None, b"<html><body>New A</body></html>"),
    "/new/b.html": (200, None, b"<html><body>New B</body></html>"),
}
#: what run 2 finds changed: a redirect with a new target, a changed page, a new page
RUN_2 = {**RUN_1,
         "/old/a.html": (301, "/new/a2.html", MOVED),
         "/target.html": (200, None, b"<html><body>Target, second version</body></html>"),
         "/new/a2.html": (200, None, b"<html><body>New A, moved again</body></html>"),
         "/twin/two.html": (200, None, b"<html><body>Twin no more</body></html>")}


def build(site: Any, pages: dict[str, tuple[int, str | None, bytes]]) -> None:
    """The start page linking to every path, and each path as `pages` says."""
    links = "".join(f'<p><a href="{path}">{path}</a></p>' for path in pages)
    site.page("/", f"<!doctype html><html><head><title>Shared bodies</title></head>"
                   f"<body><h1>Shared bodies</h1>{links}</body></html>")
    for path, (status, location, body) in pages.items():
        site.page(path, body, status=status, headers={"Location": location} if location else {})


async def live_answers(site: Any) -> dict[str, replayers.Answer]:
    """What the live site answers now for each of its URLs, redirects followed."""
    out = {}
    async with ClientSession() as session:
        for path in site.routes:
            async with session.get(site.base + path[1:]) as resp:
                body = await resp.read()
                out[site.base + path[1:]] = replayers.Answer(
                    str(resp.url), resp.status, resp.status, body)
    return out


async def crawl_twice(make_site: Any, crawl: Any) -> tuple[Any, Any, dict[int, dict[str, Any]]]:
    """(site, second crawl, live answers by run): run 1, a change, run 2 (incremental)."""
    site = await make_site()
    clock = RunClock()
    build(site, RUN_1)
    await crawl([site.base], crawl={"workers": 1}, clock=clock)
    live = {1: await live_answers(site)}
    build(site, RUN_2)
    clock.next_run()  # run 2's timestamps an hour after run 1's
    second = await crawl([site.base], crawl={"workers": 1}, clock=clock)
    live[2] = await live_answers(site)
    return site, second, live


def orders(queries: list[replayers.Query]) -> dict[str, list[replayers.Query]]:
    shuffled = list(queries)
    random.Random(7).shuffle(shuffled)
    return {"forward": queries, "reversed": queries[::-1], "shuffled": shuffled}


async def test_three_replayers_agree_with_the_live_site_in_any_order(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    """Every capture of two runs, asked of each replayer in three orders (ReplayWeb.page in a
    fresh browser context each time): final URL, status and archived bytes as live."""
    replayers.require_tools()
    site, done, live = await crawl_twice(make_site, crawl)
    queries = replayers.captures_by_run(done.archive)
    assert {q.run for q in queries} == {1, 2}
    tally = replayers.Tally()
    for q in queries:
        tally.add(q, "live", live[q.run][q.url])
    wacz = write_wacz(CaptureIndex.load(done.archive), tmp_path / "site.wacz", title="test",
                      start_urls=(site.base,)).path
    asked_live = len(site.log)
    async with replayers.http_replayers(done.archive, tmp_path / "pywb") as servers:
        for label, order in orders(queries).items():
            for server in servers:
                await replayers.ask_in_order(server, order, label, tally)
    async with replayers.replaywebpage_server(wacz, site.base) as base, \
            replayers.chromium() as browser:
        for label, order in orders(queries).items():
            shot = tmp_path / "replaywebpage.png" if label == "forward" else None
            async with replayers.replaywebpage_context(browser, base, shot) as rwp:
                assert rwp.start_title == "Shared bodies"  # it replays the start page
                await replayers.ask_in_order(rwp, order, label, tally)
    assert (tmp_path / "replaywebpage.png").read_bytes()[:4] == b"\x89PNG"
    assert len(site.log) == asked_live  # no replayer went to the live site
    problems = tally.disagreements(site.base)
    assert not problems, (f"{len(problems)} (URL, run) pairs disagree (final URL, status/raw "
                          "status, body):\n" + "\n".join(problems))
