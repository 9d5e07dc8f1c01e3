"""Link discovery in helper processes (mirror.crawl.parsepool): the same links as in-process
parsing, log records carried back, and a helper that dies loses no page and no link."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import pickle
import signal
import struct
import sys
from pathlib import Path

import pytest
from aiohttp import web

from mirror.config import load_config
from mirror.crawl import parsehelper, parsepool
from mirror.crawl.discover import Discovery
from mirror.crawl.parsehelper import Page
from mirror.model import NOTHING, Discovered, LinkKind, NewUrl, PageText, UrlItem, Via
from tests.conftest import write_config

LENGTH = struct.Struct("!Q")


def links(*paths: str) -> str:
    return "".join(f'<a href="{p}">{p}</a>' for p in paths)


def frame(message: object) -> bytes:
    data = pickle.dumps(message)
    return LENGTH.pack(len(data)) + data


def frames(data: bytes) -> list[object]:
    out, stream = [], io.BytesIO(data)
    while head := stream.read(LENGTH.size):
        out.append(pickle.loads(stream.read(LENGTH.unpack(head)[0])))
    return out


def html_page(body: str) -> Page:
    return Page(200, {"content-type": "text/html"}, body.encode(), None)


def test_helper_answers_each_request_in_order_with_its_log_records(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, ["http://h.test/"],
                                   scope={"max_outlinks": 2}))
    item = UrlItem(1, "http://h.test/", "h.test", 0, 10, "page", 0, "start")
    wire = parsehelper.request_wire
    moved = Page(301, {"location": "/moved"}, None, None)
    stdin = io.BytesIO(frame(cfg) + frame((7, *wire(item, html_page(links("/a", "/b", "/c")))))
                       + frame((8, *wire(item, moved))))
    stdout = io.BytesIO()
    assert parsehelper.run_helper(stdin, stdout) == 0
    ready, first, second = frames(stdout.getvalue())
    assert ready == "ready"
    request_id, ok, wire, records = first
    location, found, _, text, _ = parsehelper.from_wire(wire)
    assert (request_id, ok, location) == (7, True, None)
    assert text is not None and text.body == "/a /b /c"  # the page's text comes back too
    assert [(f.url, f.skip_reason) for f in found] == [
        ("http://h.test/a", None), ("http://h.test/b", None),
        ("http://h.test/c", "max_outlinks")]
    assert [(level, text) for level, _, text in records] == [
        (logging.WARNING, "http://h.test/ has 3 links; the last 1 were not followed "
                          "(max_outlinks)")]
    assert second[:2] == (8, True)
    assert second[2][0] == "http://h.test/moved"


def test_an_answer_crosses_the_pipe_as_plain_tuples_and_comes_back_whole() -> None:
    found = Discovered("http://h.test/to", [
        NewUrl("http://h.test/a", "h.test", 1, 5, "page", Via.LINK, LinkKind.LINK),
        NewUrl("http://x.test/b", "x.test", 2, 0, "", Via.REQUISITE, LinkKind.REQUISITE,
               "off_site", "2026-01-02")], "needs a browser", PageText("Title", "text"),
        "noindex,nofollow")
    wire = parsehelper.to_wire(found)
    # nothing but builtins on the wire: pickle handles them without a Python call
    assert all(type(x) is tuple for x in wire[1]) and type(wire[3]) is tuple
    back = parsehelper.from_wire(pickle.loads(pickle.dumps(wire)))
    assert back == found
    assert all(type(x) is NewUrl for x in back.links) and type(back.text) is PageText
    assert back.links[1].via is Via.REQUISITE  # the enums come back as themselves
    empty = parsehelper.from_wire(parsehelper.to_wire(NOTHING))
    assert empty == NOTHING and empty.text is None


def test_helper_reports_a_failing_page_and_goes_on(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))

    class Broken(Discovery):
        def discover(self, item, status, body, truncated, headers):  # type: ignore[override]
            if body == b"boom":
                raise ValueError("parser bug")
            return super().discover(item, status, body, truncated, headers)

    def make(cfg):  # type: ignore[no-untyped-def]
        from mirror.crawl.scope import Scope
        return Broken(cfg, Scope.from_config(cfg))

    item = UrlItem(1, "http://h.test/", "h.test", 0, 10, "page", 0, "start")
    stdin = io.BytesIO(frame(cfg) + frame((1, *parsehelper.request_wire(item, html_page("boom"))))
                       + frame((2, *parsehelper.request_wire(item, html_page(links("/a"))))))
    stdout = io.BytesIO()
    parsehelper.run_helper(stdin, stdout, make)
    _, failed, fine = frames(stdout.getvalue())
    assert failed[:3] == (1, False, "ValueError: parser bug")
    assert failed[3][0][0] == logging.ERROR  # the traceback goes to the crawler's log
    assert fine[1] is True
    assert [f.url for f in parsehelper.from_wire(fine[2]).links] == ["http://h.test/a"]


def _site_graph(c) -> tuple[dict[str, str], set[tuple[str, str, str]]]:  # type: ignore[no-untyped-def]
    with c.db() as db:
        states = dict(db.execute("SELECT url, state FROM urls"))
        graph = set(db.execute("SELECT s.url, d.url, kind FROM links "
                               "JOIN urls s ON s.id=src JOIN urls d ON d.id=dst"))
    return states, graph


async def test_helpers_find_the_same_links_as_the_crawler_itself(make_site, crawl, tmp_path):
    site = await make_site()
    site.page("/", links("/a", "/b", "/r") + '<img src="/i.png"><link rel=stylesheet href=/s.css>')
    site.page("/a", links("/", "/b?x=1") + '<img srcset="/i.png 1x, /j.png 2x">')
    site.page("/b", links("/deep/c"))
    site.page("/s.css", "body { background: url(/bg.png) }", content_type="text/css")
    site.redirect("/r", "/a")
    results = []
    for processes in (0, 2):
        c = await crawl([site.base], crawl={"parse_processes": processes, "workers": 4})
        results.append(_site_graph(c))
        c.assert_verifies()
        os.rename(c.archive, tmp_path / f"archive-{processes}")
    assert results[0] == results[1]
    states, graph = results[1]
    assert (site.base + "s.css", site.base + "bg.png", "requisite") in graph
    assert (site.base + "r", site.base + "a", "redirect") in graph
    assert states[site.base + "deep/c"] == "done"  # a 404, stored


def _helpers_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"mirror.crawl.parsehelper" in cmdline:
                found.append(int(child))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_helper_killed_mid_crawl_loses_no_page_and_no_link(make_site, crawl, caplog):
    site = await make_site()
    pages = [f"/p{i}" for i in range(40)]
    site.page("/", links(*pages))
    killed: list[int] = []

    def page(i: int):  # type: ignore[no-untyped-def]
        async def handler(request: web.Request) -> web.StreamResponse:
            if i in (5, 25):  # twice: the second kill hits the replacement
                for _ in range(200):  # a loaded machine starts the replacement slowly
                    if helpers := _helpers_of(os.getpid()):
                        break
                    await asyncio.sleep(0.05)
                for pid in helpers:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            return web.Response(text=links(f"/leaf{i}"), content_type="text/html")
        return handler

    for i, path in enumerate(pages):
        site.handler(path, page(i))
    for i in range(40):
        site.page(f"/leaf{i}", "leaf")
    with caplog.at_level(logging.WARNING, logger="mirror.crawl.parsepool"):
        c = await crawl([site.base], crawl={"workers": 4, "parse_processes": 1})
    assert len(killed) >= 2
    assert "link-extraction process died (killed by SIGKILL)" in caplog.text
    states, graph = _site_graph(c)
    for i in range(40):
        assert states[site.base + f"p{i}"] == "done"
        assert states[site.base + f"leaf{i}"] == "done"
        assert (site.base + f"p{i}", site.base + f"leaf{i}", "link") in graph
        assert site.count(f"/leaf{i}") == 1
    c.assert_verifies()


CRASHING_HELPER = """
import os, sys
from mirror.crawl.parsehelper import _discovery, run_helper

def make(cfg):
    discovery = _discovery(cfg)
    real = discovery.discover
    def discover(item, status, body, truncated, headers):
        if body and b"boom" in body:
            os._exit(3)  # as a crash in libxml2 would end it
        return real(item, status, body, truncated, headers)
    discovery.discover = discover
    return discovery

run_helper(sys.stdin.buffer, sys.stdout.buffer, make)
"""


async def test_a_page_that_kills_its_helper_twice_loses_only_its_links(tmp_path, caplog):
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    from mirror.crawl.scope import Scope

    pool = parsepool.ParserPool(cfg, Discovery(cfg, Scope.from_config(cfg)), 1,
                                command=(sys.executable, "-c", CRASHING_HELPER))
    item = UrlItem(1, "http://h.test/", "h.test", 0, 10, "page", 0, "start")
    await pool.start()
    try:
        assert await pool._ready_soon() is not None
        with caplog.at_level(logging.WARNING, logger="mirror.crawl.parsepool"):
            # parsed in this process, the page would give its link: it must not be
            lost = await pool.discover(item, html_page(links("/boom-link")))
        assert lost == NOTHING
        assert caplog.text.count("link-extraction process died (exit code 3); starting"
                                 " another") == 2
        assert "links of http://h.test/ not extracted" in caplog.text
        fine = await pool.discover(item, html_page(links("/next")))
        assert [f.url for f in fine[1]] == ["http://h.test/next"]
        assert pool._restarts == 2
    finally:
        await pool.close()


SLOW_CRASHING_HELPER = CRASHING_HELPER.replace(
    "os._exit(3)", "import time; time.sleep(1.0); os._exit(3)")


async def test_only_the_page_being_parsed_is_blamed_for_a_death(tmp_path, caplog):
    """A helper dies parsing one page while others wait behind it: only that page counts
    the death. The pages queued behind it are sent again and keep their links; the page
    itself is sent once more, and loses its links when it kills that helper too."""
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    from mirror.crawl.scope import Scope

    pool = parsepool.ParserPool(cfg, Discovery(cfg, Scope.from_config(cfg)), 1,
                                command=(sys.executable, "-c", SLOW_CRASHING_HELPER))
    await pool.start()
    try:
        helper = await pool._ready_soon()
        assert helper is not None
        pages = [UrlItem(k, f"http://h.test/{k}", "h.test", 0, 10, "page", 0, "start")
                 for k in range(3)]
        sent = [asyncio.ensure_future(helper.discover(pages[0], html_page(links("/boom"))))]
        await asyncio.sleep(0.1)  # the helper is parsing "boom" now; two wait behind it
        sent += [asyncio.ensure_future(helper.discover(p, html_page(links(f"/q{p.id}"))))
                 for p in pages[1:]]
        died = await asyncio.wait_for(asyncio.gather(*sent, return_exceptions=True), 30)
        assert [type(e) for e in died] == [parsepool.HelperDied] * 3
        assert [e.parsing for e in died] == [True, False, False]  # type: ignore[union-attr]

        assert await pool._replacement() is not None  # a new one, ready
        with caplog.at_level(logging.WARNING, logger="mirror.crawl.parsepool"):
            first = asyncio.ensure_future(pool.discover(pages[0], html_page(links("/boom"))))
            await asyncio.sleep(0.1)
            found = [*await asyncio.gather(
                *(pool.discover(p, html_page(links(f"/q{p.id}"))) for p in pages[1:])),
                await first]
        assert found.pop() == NOTHING
        assert [[u.url for u in f.links] for f in found] == [
            ["http://h.test/q1"], ["http://h.test/q2"]]
        assert caplog.text.count("links of http://h.test/0 not extracted") == 1
        assert "h.test/1 not" not in caplog.text and "h.test/2 not" not in caplog.text
    finally:
        await pool.close()


async def test_a_mirror_folder_where_the_crawl_starts_is_not_what_helpers_import(
        tmp_path, monkeypatch, caplog):
    """`mirror run` started in a folder that holds another `mirror` package (a checkout of
    another version): the helpers import the crawler's own code, not that one."""
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    from mirror.crawl.scope import Scope

    other = tmp_path / "elsewhere" / "mirror"
    (other / "crawl").mkdir(parents=True)
    (other / "__init__.py").write_text("raise ImportError('the wrong mirror')\n")
    (other / "crawl" / "__init__.py").write_text("")
    monkeypatch.chdir(other.parent)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    pool = parsepool.ParserPool(cfg, Discovery(cfg, Scope.from_config(cfg)), 1)
    item = UrlItem(1, "http://h.test/", "h.test", 0, 10, "page", 0, "start")
    await pool.start()
    try:
        assert await pool._ready_soon() is not None  # it came up: it imported ours
        with caplog.at_level(logging.WARNING, logger="mirror.crawl.parsepool"):
            found = await pool.discover(item, html_page(links("/a")))
        assert [f.url for f in found.links] == ["http://h.test/a"]
        assert "died" not in caplog.text and pool._restarts == 0
    finally:
        await pool.close()
