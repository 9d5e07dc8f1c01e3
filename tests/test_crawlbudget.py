"""Budgets against hostile sites on 127.0.0.1 (issue 32): deeply nested markup, a page that
parses forever, endless bodies, endless requisite chains, and a helper whose crawler died."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from aiohttp import web

from mirror.config import load_config
from mirror.crawl import parsepool
from mirror.crawl.discover import MAX_NESTING, MAX_PARSE_BYTES, Discovery
from mirror.crawl.parsehelper import Page, request_wire
from mirror.crawl.scope import Scope
from mirror.manifest.reader import ManifestReader
from mirror.model import PARSE_BUDGET, UrlItem
from mirror.run.runreport import gather
from tests.conftest import write_config

LENGTH = struct.Struct("!Q")


def html(body: str) -> str:
    return f"<!doctype html><title>t</title><body>{body}</body>"


def report_of(c, tmp_path: Path):  # type: ignore[no-untyped-def]
    cfg = load_config(tmp_path / "site.toml")
    reader = ManifestReader(c.archive / "manifest.sqlite3")
    try:
        return gather(cfg, reader, c.result.run_id)
    finally:
        reader.close()


async def test_deeply_nested_pages_are_stored_flagged_and_hold_no_other_page(
        make_site, crawl, tmp_path):
    site = await make_site()
    deep_div = html('<a href="/before-div">b</a>' + "<div>" * 20000 + '<a href="/after">a</a>')
    deep_table = html('<a href="/before-table">b</a>' + "<table><tr><td>" * 40000)
    site.page("/div", deep_div)
    site.page("/table", deep_table)
    for path in ("/before-div", "/before-table", "/after"):
        site.page(path, html("leaf"))
    for i in range(20):
        site.page(f"/p{i}", html(f'<a href="/leaf{i}">leaf</a>'))
        site.page(f"/leaf{i}", html("leaf"))
    links = "".join(f'<a href="/p{i}">p</a>' for i in range(20))
    site.page("/", html('<a href="/div">d</a><a href="/table">t</a>' + links))

    c = await crawl([site.base])
    states = c.states()
    assert all(states[f"{site.base}leaf{i}"] == "done" for i in range(20))
    assert states[f"{site.base}div"] == states[f"{site.base}table"] == "done"
    assert len(c.responses()[f"{site.base}div"][0]["payload"]) == len(deep_div)
    # links before the markup nests too deep are read, none after it
    assert states[f"{site.base}before-div"] == states[f"{site.base}before-table"] == "done"
    assert f"{site.base}after" not in states
    flagged = dict(report_of(c, tmp_path).parse_budget)
    assert sorted(flagged) == [f"{site.base}div", f"{site.base}table"]
    assert all(r.startswith(f"{PARSE_BUDGET}: markup nested deeper than {MAX_NESTING}")
               for r in flagged.values())
    c.assert_verifies()


STUCK_HELPER = """
import sys, time
from mirror.crawl.parsehelper import _discovery, run_helper

def make(cfg):
    discovery = _discovery(cfg)
    real = discovery.discover
    def discover(item, status, body, truncated, headers):
        if body and b"forever" in body:
            time.sleep(600)  # as libxml2 on markup it is slow on
        return real(item, status, body, truncated, headers)
    discovery.discover = discover
    return discovery

run_helper(sys.stdin.buffer, sys.stdout.buffer, make)
"""


async def test_a_page_over_its_time_budget_loses_its_links_and_no_other_page_does(tmp_path):
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    pool = parsepool.ParserPool(cfg, Discovery(cfg, Scope.from_config(cfg)), 1,
                                command=(sys.executable, "-c", STUCK_HELPER), budget=1.0)
    pages = [UrlItem(k, f"http://h.test/{k}", "h.test", 0, 10, "page", 0, "start")
             for k in range(4)]

    def page(body: str) -> Page:
        return Page(200, {"content-type": "text/html"}, body.encode(), None)

    await pool.start()
    try:
        assert await pool._ready_soon() is not None
        stuck = asyncio.ensure_future(pool.discover(pages[0], page("forever")))
        await asyncio.sleep(0.1)  # the helper is on it; the others queue behind it
        found = await asyncio.wait_for(asyncio.gather(
            stuck, *(pool.discover(p, page(f'<a href="/q{p.id}">q</a>')) for p in pages[1:])),
            60)
        assert found[0].links == [] and found[0].note is not None
        assert found[0].note.startswith(f"{PARSE_BUDGET}: links not extracted within 1 s")
        assert [[u.url for u in f.links] for f in found[1:]] == [
            ["http://h.test/q1"], ["http://h.test/q2"], ["http://h.test/q3"]]
        assert pool._restarts == 0  # a budget kill is no death: the helpers stay
    finally:
        await pool.close()


async def test_endless_bodies_are_cut_spooled_and_the_run_ends(make_site, crawl, tmp_path):
    site = await make_site()
    cap = MAX_PARSE_BYTES + 2_000_000

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'<a href="/early">early</a>')
        chunk = b"<p>" + b"x" * 65533
        for _ in range(4 * cap // len(chunk)):  # far past the cap; the crawler hangs up
            await resp.write(chunk)
        return resp

    for i in range(3):
        site.handler(f"/endless{i}", endless)
    site.page("/early", html("leaf"))
    site.page("/", html("".join(f'<a href="/endless{i}">e</a>' for i in range(3))))

    c = await crawl([site.base], crawl={"max_response_bytes": cap})
    responses = c.responses()
    for i in range(3):
        record = responses[f"{site.base}endless{i}"][0]
        assert record["headers"].get_header("WARC-Truncated") == "length"
        assert len(record["payload"]) == cap
    assert c.states()[f"{site.base}early"] == "done"
    flagged = dict(report_of(c, tmp_path).parse_budget)
    assert flagged[f"{site.base}endless0"] == (
        f"{PARSE_BUDGET}: links read from the first {MAX_PARSE_BYTES} bytes of {cap}")
    c.assert_verifies()


async def test_a_frame_chain_stops_at_max_requisite_depth(make_site, crawl, tmp_path):
    site = await make_site()
    for n in range(40):
        site.page(f"/frame-chain/{n}", html(f'<iframe src="/frame-chain/{n + 1}"></iframe>'))

    c = await crawl([f"{site.base}frame-chain/0"], scope={"max_depth": 1,
                                                          "max_requisite_depth": 3})
    states = c.states()
    # two pages (depth 0 and 1), then three requisites in a row, then the rule
    assert sorted(u for u, s in states.items() if s == "done") == [
        f"{site.base}frame-chain/{n}" for n in range(5)]
    assert c.skipped() == {f"{site.base}frame-chain/5": "max_requisite_depth"}
    assert report_of(c, tmp_path).skipped == {"max_requisite_depth": 1}


def _frame(message: object) -> bytes:
    data = pickle.dumps(message)
    return LENGTH.pack(len(data)) + data


def test_a_helper_whose_reader_is_gone_exits_without_a_traceback(tmp_path):
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    item = UrlItem(1, "http://h.test/", "h.test", 0, 10, "page", 0, "start")
    helper = subprocess.Popen([sys.executable, "-m", "mirror.crawl.parsehelper"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert helper.stdin is not None and helper.stdout is not None
    helper.stdin.write(_frame(cfg))
    helper.stdin.flush()
    assert pickle.loads(helper.stdout.read(LENGTH.unpack(helper.stdout.read(8))[0])) == "ready"
    helper.stdout.close()  # as when the crawler is killed: nobody reads its answers
    body = "".join(f'<a href="/{k}">k</a>' for k in range(20000)).encode()
    page = Page(200, {"content-type": "text/html"}, body, None)
    helper.stdin.write(_frame((1, *request_wire(item, page))))
    helper.stdin.close()
    assert helper.wait(60) == 0
    assert helper.stderr is not None
    with helper.stderr:
        assert helper.stderr.read() == b""


CRAWLER = """
import os, pickle, subprocess, sys, time
from mirror.crawl.parsehelper import PARENT_VARIABLE, frame
helper = subprocess.Popen([sys.executable, "-m", "mirror.crawl.parsehelper"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env={**os.environ, PARENT_VARIABLE: str(os.getpid())})
helper.stdin.write(frame(pickle.loads(sys.stdin.buffer.read())))
helper.stdin.flush()
helper.stdout.read(8)  # it is ready (the length of its "ready")
print(helper.pid, helper.stdin.fileno(), flush=True)
time.sleep(600)
"""


def test_a_helper_dies_with_its_crawler_killed_by_sigkill(tmp_path):
    """Even while its input stays open (as when it is busy on a page, or another process
    holds the pipe), a helper does not outlive its crawler."""
    cfg = load_config(write_config(tmp_path, ["http://h.test/"]))
    crawler = subprocess.Popen([sys.executable, "-c", CRAWLER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    assert crawler.stdin is not None and crawler.stdout is not None
    with crawler.stdin:
        crawler.stdin.write(pickle.dumps(cfg))
    with crawler.stdout:
        pid, fd = map(int, crawler.stdout.readline().split())
    with open(f"/proc/{crawler.pid}/fd/{fd}", "wb"):  # the helper's input stays open
        os.kill(crawler.pid, signal.SIGKILL)
        crawler.wait(10)
        for _ in range(200):  # the kernel kills it at once (then init reaps it)
            try:
                state = Path(f"/proc/{pid}/stat").read_text().split()[2]
            except FileNotFoundError:
                break
            if state == "Z":
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the helper outlived its crawler")
