"""Crawl behaviour against a real local server: the origin crawler's tests and mirror's own.

Each test checks the server's request log, the WARC records and the manifest, by URL.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import logging

import pytest
from aiohttp import web

from mirror.model import ExitCode


def links(*hrefs: str) -> str:
    return "<html><body>" + "".join(f'<a href="{h}">x</a>' for h in hrefs) + "</body></html>"


# -- ported from the origin crawler's test suite (500 Lines, crawler/code/test.py) -----------
async def test_link_to_missing_page(make_site, crawl):
    site = await make_site()
    site.page("/", links("/foo"))
    c = await crawl([site.base])
    assert site.log == ["/", "/foo"]
    statuses = {u: [r["status"] for r in rs] for u, rs in c.responses().items()}
    assert statuses == {site.base: [200], site.base + "foo": [404]}
    assert c.states() == {site.base: "done", site.base + "foo": "done"}
    assert c.result.exit_code == ExitCode.OK  # a 404 is a normal outcome


async def test_link_cycle(make_site, crawl):
    site = await make_site()
    site.page("/foo", links("/bar"))
    site.page("/bar", links("/foo"))
    c = await crawl([site.base + "foo"])
    assert sorted(site.log) == ["/bar", "/foo"]
    assert set(c.responses()) == {site.base + "foo", site.base + "bar"}
    with c.db() as db:
        edges = set(db.execute(
            "SELECT s.url, d.url, l.kind FROM links l JOIN urls s ON s.id=l.src "
            "JOIN urls d ON d.id=l.dst"))
    assert edges == {(site.base + "foo", site.base + "bar", "link"),
                     (site.base + "bar", site.base + "foo", "link")}


async def test_prohibited_host_is_not_fetched(make_site, crawl):
    site = await make_site()
    site.page("/", links("http://example.com/", "http://foo.localhost/"))
    c = await crawl([site.base])
    assert site.log == ["/"]
    assert c.skipped() == {"http://example.com/": "host", "http://foo.localhost/": "host"}


async def test_www_twin_is_in_scope_but_other_subdomains_are_not():
    from pathlib import Path

    from mirror.config import parse_config
    from mirror.crawl.scope import Scope

    cfg = parse_config('[site]\nname="x"\nstart_urls=["http://example.com/a#frag"]\n',
                       Path("/tmp/site.toml"))
    scope = Scope.from_config(cfg)
    assert scope.decide("http://www.example.com/", 1, False).allowed
    assert scope.decide("http://example.com/b", 1, False).allowed  # deep root: host-wide
    no = scope.decide("http://foo.example.com/", 1, False)
    assert (no.allowed, no.reason) == (False, "host")
    cfg = parse_config('[site]\nname="x"\nstart_urls=["http://www.a.test/"]\n'
                       '[scope]\nhosts=["foo.example.com"]\nexclude=[".*pattern"]\n',
                       Path("/tmp/site.toml"))
    scope = Scope.from_config(cfg)
    assert scope.decide("http://a.test/", 1, False).allowed
    assert scope.decide("http://foo.example.com:8080/", 1, False).allowed
    assert scope.decide("http://www.a.test/pattern", 1, False).reason == "exclude"


async def test_redirect_chain_is_followed_and_each_hop_captured(make_site, crawl):
    site = await make_site()
    site.redirect("/", "/foo", 302)
    site.redirect("/foo", site.base + "bar", 302)
    c = await crawl([site.base])
    assert site.log == ["/", "/foo", "/bar"]
    with c.db() as db:
        rows = db.execute("SELECT url, status, location FROM captures ORDER BY id").fetchall()
    assert rows == [(site.base, 302, site.base + "foo"),
                    (site.base + "foo", 302, site.base + "bar"),
                    (site.base + "bar", 404, None)]


async def test_redirect_limit_reached_is_logged(make_site, crawl, caplog):
    site = await make_site()
    site.redirect("/", "/foo", 302)
    site.redirect("/foo", "/bar", 302)
    with caplog.at_level(logging.WARNING, logger="mirror"):
        c = await crawl([site.base], crawl={"max_redirects": 1})
    assert site.log == ["/", "/foo"]
    assert "redirect limit reached" in caplog.text
    assert c.skipped() == {site.base + "bar": "max_redirects"}
    assert set(c.responses()) == {site.base, site.base + "foo"}


async def test_redirect_cycle_ends(make_site, crawl):
    site = await make_site()
    site.redirect("/bar", "/foo", 302)
    site.redirect("/foo", "/bar", 302)
    c = await crawl([site.base + "bar"])
    assert sorted(site.log) == ["/bar", "/foo"]
    assert {u: len(r) for u, r in c.responses().items()} == {
        site.base + "bar": 1, site.base + "foo": 1}


async def test_redirect_join_fetches_the_destination_once(make_site, crawl):
    site = await make_site()
    for src in ("/foo", "/bar"):
        site.redirect(src, "/baz", 302)
    site.redirect("/baz", "/quux", 302)
    await crawl([site.base + "foo", site.base + "bar"])
    assert sorted(site.log) == ["/bar", "/baz", "/foo", "/quux"]
    assert site.count("/baz") == 1


async def test_worker_bound_is_respected(make_site, crawl):
    site = await make_site()
    site.latency = 0.05
    paths = [f"/{i}" for i in range(8)]
    site.page("/", links(*paths))
    for p in paths:
        site.page(p, "")
    c = await crawl([site.base], crawl={"workers": 2, "per_host": 8})
    assert site.max_in_flight == 2
    assert sorted(site.log) == sorted(["/", *paths])
    assert len(c.responses()) == 9


async def test_next_request_goes_out_while_a_response_waits_to_be_stored(
        make_site, crawl, monkeypatch):
    # One worker: once /a's response is in, its links and records are a finishing task's
    # job, and the worker asks for /b at once. Link discovery of /a is held until /b is
    # requested (at most 5 s): a worker that stored /a itself would never get there.
    from mirror.crawl.parsepool import ParserPool

    site = await make_site()
    site.page("/", links("/a", "/b"))
    site.page("/a", links("/c"))
    site.page("/c", "")
    b_requested = asyncio.Event()

    async def b(request: web.Request) -> web.StreamResponse:
        b_requested.set()
        return web.Response(text="b", content_type="text/html")

    site.handler("/b", b)
    seen: list[str] = []
    discover = ParserPool.discover

    async def held(self, item, page):  # type: ignore[no-untyped-def]
        if item.url == site.base + "a":
            try:
                await asyncio.wait_for(b_requested.wait(), 5)
                seen.append("/b requested before /a was stored")
            except TimeoutError:
                seen.append("/b not requested")
        return await discover(self, item, page)

    monkeypatch.setattr(ParserPool, "discover", held)
    c = await crawl([site.base], crawl={"workers": 1, "per_host": 1})
    assert seen == ["/b requested before /a was stored"]
    assert site.log == ["/", "/a", "/b", "/c"]
    assert c.states()[site.base + "c"] == "done"  # /a's links still followed
    c.assert_verifies()


async def test_network_failure_is_retried_then_succeeds(make_site, crawl, caplog):
    site = await make_site()
    tries = 0

    async def flaky(request: web.Request) -> web.StreamResponse:
        nonlocal tries
        tries += 1
        if tries <= 2:
            assert request.transport is not None
            request.transport.close()  # network failure
        return web.Response(text="ok")

    site.handler("/", flaky)
    with caplog.at_level(logging.INFO, logger="mirror"):
        c = await crawl([site.base])
    # aiohttp itself re-sends a GET once when a pooled connection turns out dead, so the
    # server may see one request more than mirror counts as tries
    assert site.log == ["/", "/", "/"]
    assert "try 1 of 4" in caplog.text
    assert [r["status"] for r in c.responses()[site.base]] == [200]
    assert c.result.exit_code == ExitCode.OK


async def test_network_failure_gives_up_after_max_tries(make_site, crawl, caplog):
    site = await make_site()

    async def broken(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        return web.Response(text="never")

    site.page("/", links("/broken"))
    site.handler("/broken", broken)
    with caplog.at_level(logging.WARNING, logger="mirror"):
        c = await crawl([site.base], crawl={"max_tries": 2})
    # 2 tries; aiohttp may re-send each once on a dead pooled connection (RFC 9112 9.3.1)
    assert 2 <= site.count("/broken") <= 4
    assert "giving up on" in caplog.text
    with c.db() as db:
        assert db.execute("SELECT COUNT(*) FROM errors").fetchone() == (2,)
    assert c.states()[site.base + "broken"] == "failed"
    assert site.base + "broken" not in c.responses()
    assert c.result.exit_code == ExitCode.FAILED_URLS
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    assert [f["url"] for f in report["failed"]] == [site.base + "broken"]
    assert report["broken_links"][0]["linked_from"] == site.base
    assert report["broken_links_total"] == len(report["broken_links"]) == 1


async def test_server_errors_retried_and_last_answer_archived(make_site, crawl):
    site = await make_site()
    site.page("/", "busy", status=503)
    c = await crawl([site.base], crawl={"max_tries": 3})
    assert site.log == ["/", "/", "/"]
    assert [r["status"] for r in c.responses()[site.base]] == [503]  # stored once
    assert c.states()[site.base] == "failed"
    assert c.result.exit_code == ExitCode.FAILED_URLS


@pytest.mark.parametrize(
    ("content_type", "body", "expected_link"),
    [
        ("text/html", b'<a href="/next">', "/next"),
        ("text/html; charset=utf-8", '<a href="/caf\u00e9">'.encode(), "/caf%C3%A9"),
        ("text/html; charset=iso-8859-1", '<a href="/caf\u00e9">'.encode("latin-1"), "/caf%C3%A9"),
        ("text/html; charset=bogus", b'<a href="/next">', "/next"),
        ("text/html", b'<meta charset="latin1"><a href="/caf\xe9">', "/caf%C3%A9"),
    ],
    ids=["no-charset", "utf-8", "latin-1-header", "unknown-charset", "meta-charset"],
)
async def test_charsets(make_site, crawl, content_type, body, expected_link):
    site = await make_site()
    site.page("/", body, content_type=content_type)
    c = await crawl([site.base])
    assert site.log[1:] == [expected_link]
    assert c.result.exit_code == ExitCode.OK


async def test_non_html_is_not_searched_for_links(make_site, crawl):
    site = await make_site()
    site.page("/", links("/xml", "/image"))
    site.page("/xml", b'<a href="/from-xml">', content_type="application/xml")
    site.page("/image", b'<a href="/from-image">', content_type="image/png")
    await crawl([site.base])
    assert sorted(site.log) == ["/", "/image", "/xml"]


async def test_non_http_links_are_never_fetched(make_site, crawl):
    site = await make_site()
    site.page("/", links("ftp://example.com/", "mailto:a@b.c", "javascript:alert(1)",
                         "data:text/html,hi", "file:///etc/passwd", "/ok"))
    c = await crawl([site.base])
    assert site.log == ["/", "/ok"]
    assert c.states()[site.base + "ok"] == "done"
    assert set(c.skipped().values()) == {"scheme"}
    assert len(c.skipped()) == 5


# -- mirror's own -----------------------------------------------------------------------------
async def test_three_redirects_to_one_page_store_it_once(make_site, crawl):
    site = await make_site()
    site.page("/", links("/a", "/b", "/c"))
    for src in ("/a", "/b", "/c"):
        site.redirect(src, "/target", 301)
    site.page("/target", "<p>the page</p>")
    c = await crawl([site.base])
    assert site.count("/target") == 1
    responses = c.responses()
    assert len(responses[site.base + "target"]) == 1
    for src in ("a", "b", "c"):
        [rec] = responses[site.base + src]
        assert rec["status"] == 301
    with c.db() as db:
        aliases = dict(db.execute("SELECT url, location FROM captures WHERE location IS NOT NULL"))
    assert aliases == {site.base + s: site.base + "target" for s in ("a", "b", "c")}


async def test_requisites_on_another_host_are_fetched_but_not_crawled(make_site, crawl):
    site, cdn = await make_site(), await make_site()
    site.page("/", f'<link rel="stylesheet" href="{cdn.base}style.css">'
                   f'<img src="{cdn.base}logo.png"><a href="{cdn.base}page">x</a>')
    cdn.page("/style.css", "body { background: url(bg.png) } @import 'more.css';",
             content_type="text/css")
    cdn.page("/more.css", "p { color: red }", content_type="text/css")
    cdn.page("/bg.png", b"\x89PNG", content_type="image/png")
    cdn.page("/logo.png", b"\x89PNG", content_type="image/png")
    cdn.page("/page", links("/elsewhere"))
    c = await crawl([site.base])
    assert sorted(cdn.log) == ["/bg.png", "/logo.png", "/more.css", "/style.css"]
    assert c.skipped() == {cdn.base + "page": "host"}
    with c.db() as db:
        modes = dict(db.execute("SELECT url, mode FROM urls WHERE state='done'"))
    assert modes[cdn.base + "style.css"] == "requisite"
    assert modes[site.base] == "page"


async def test_requisites_off_when_disabled(make_site, crawl):
    site, cdn = await make_site(), await make_site()
    site.page("/", f'<img src="{cdn.base}logo.png"><img src="/local.png">')
    site.page("/local.png", b"png", content_type="image/png")
    await crawl([site.base], scope={"page_requisites": False})
    assert cdn.log == []
    assert sorted(site.log) == ["/", "/local.png"]


async def test_depth_limit_still_fetches_requisites_of_the_last_pages(make_site, crawl):
    site = await make_site()
    site.page("/", links("/1"))
    site.page("/1", '<img src="/1.png">' + links("/2"))
    site.page("/1.png", b"png", content_type="image/png")
    site.page("/2", links("/3"))
    c = await crawl([site.base], scope={"max_depth": 1})
    assert sorted(site.log) == ["/", "/1", "/1.png"]
    assert c.skipped() == {site.base + "2": "max_depth"}


async def test_include_and_exclude(make_site, crawl):
    site = await make_site()
    site.page("/", links("/docs/a", "/blog/b", "/docs/private/c"))
    site.page("/docs/a", "")
    c = await crawl([site.base], scope={"include": ["/docs/", r"/$"], "exclude": ["private"]})
    assert sorted(site.log) == ["/", "/docs/a"]
    assert c.skipped() == {site.base + "blog/b": "include",
                           site.base + "docs/private/c": "exclude"}


async def test_max_pages_stops_with_exit_4_and_next_run_continues(make_site, crawl):
    site = await make_site()
    site.page("/", links("/1", "/2", "/3"))
    for p in ("/1", "/2", "/3"):
        site.page(p, "")
    c = await crawl([site.base], scope={"max_pages": 2}, crawl={"workers": 1})
    assert c.result.exit_code == ExitCode.LIMIT
    assert len(site.log) == 2


async def test_ignore_query_and_fragments_are_canonicalised(make_site, crawl):
    site = await make_site()
    site.page("/", links("/p?utm_source=x", "/p#top", "/p?a=1&fbclid=9", "/./p"))
    site.page("/p", "")
    c = await crawl([site.base])
    assert sorted(site.log) == ["/", "/p", "/p?a=1"]
    assert set(c.responses()) == {site.base, site.base + "p", site.base + "p?a=1"}


async def test_gzip_body_is_stored_as_received_and_parsed(make_site, crawl):
    site = await make_site()
    html = links("/inner").encode()
    packed = gzip.compress(html, mtime=0)
    site.page("/", packed, headers={"Content-Encoding": "gzip"})
    site.page("/inner", "")
    c = await crawl([site.base])
    assert site.log == ["/", "/inner"]
    [rec] = c.responses()[site.base]
    assert rec["payload"] == packed
    assert rec["http"].get_header("Content-Encoding") == "gzip"
    assert rec["http"].get_header("Content-Length") == str(len(packed))


async def test_chunked_framing_removed_and_digest_independent_of_chunking(make_site, crawl):
    site = await make_site()
    payload = b"<p>" + b"x" * 5000 + b"</p>"

    def chunked(sizes: list[int]):
        async def handler(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            pos = 0
            for n in sizes:
                await resp.write(payload[pos:pos + n])
                pos += n
                await asyncio.sleep(0)
            await resp.write(payload[pos:])
            await resp.write_eof()
            return resp
        return handler

    site.page("/", links("/one", "/two"))
    site.handler("/one", chunked([7, 1000, 3]))
    site.handler("/two", chunked([4000]))
    c = await crawl([site.base], crawl={"workers": 1})
    by_uri = {r["uri"]: r for r in c.records() if r["type"] in ("response", "revisit")}
    one, two = by_uri[site.base + "one"], by_uri[site.base + "two"]
    # the same bytes in other chunks: same payload digest, so the second is a revisit
    assert (one["type"], two["type"]) == ("response", "revisit")
    assert one["payload"] == payload
    digest = "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode()
    assert one["headers"].get_header("WARC-Payload-Digest") == digest
    assert two["headers"].get_header("WARC-Payload-Digest") == digest
    assert two["headers"].get_header("WARC-Refers-To-Target-URI") == site.base + "one"
    for r in (one, two):
        assert r["http"].get_header("Transfer-Encoding") is None
        assert r["http"].get_header("X-Mirror-Orig-Transfer-Encoding") == "chunked"
        assert r["http"].get_header("Content-Length") == str(len(payload))


async def test_each_response_has_exactly_one_request(make_site, crawl):
    site = await make_site()
    site.page("/", links("/a", "/b") + '<img src="/i.png">')
    site.page("/a", "")
    site.redirect("/b", "/a")
    site.page("/i.png", b"png", content_type="image/png")
    c = await crawl([site.base], crawl={"headers": {"Authorization": "Bearer s3cret"}})
    recs = c.records()
    assert recs[0]["type"] == "warcinfo"
    responses = {r["headers"].get_header("WARC-Record-ID"): r for r in recs
                 if r["type"] == "response"}
    requests = [r for r in recs if r["type"] == "request"]
    assert len(requests) == len(responses) == 4
    for req in requests:
        resp = responses[req["headers"].get_header("WARC-Concurrent-To")]
        assert req["uri"] == resp["uri"]
        assert req["headers"].get_header("WARC-Date") == resp["headers"].get_header("WARC-Date")
        assert req["http"].get_header("Authorization") == "<redacted>"
    info_id = recs[0]["headers"].get_header("WARC-Record-ID")
    assert all(r["headers"].get_header("WARC-Warcinfo-ID") == info_id for r in recs[1:])
    assert b"s3cret" not in b"".join(p.read_bytes() for p in (c.archive / "warc").iterdir())


async def test_a_page_that_breaks_the_parser_does_not_stop_the_crawl(make_site, crawl):
    site = await make_site()
    site.page("/", b"<html>\x00\xff\xfe<a href='/ok'>" + b"<div>" * 5000 + b"<a href='/deep'>")
    site.page("/ok", "<a href=\"http://[bad/\">x</a><a href='/deep'>y</a>")
    site.page("/deep", "")
    c = await crawl([site.base])
    assert sorted(site.log) == ["/", "/deep", "/ok"]
    assert c.result.exit_code == ExitCode.OK


async def test_rotation_keeps_serials_increasing(make_site, crawl):
    site = await make_site()
    site.page("/", links(*[f"/{i}" for i in range(6)]))
    for i in range(6):
        site.page(f"/{i}", "y" * 3000)
    c = await crawl([site.base], archive={"warc_max_bytes": 2000})
    names = sorted(p.name for p in (c.archive / "warc").iterdir())
    assert len(names) >= 3
    assert not any(n.endswith(".open") for n in names)
    serials = [int(n.rsplit("-", 1)[1].split(".")[0]) for n in names]
    assert serials == list(range(1, len(names) + 1))
    for name in names:
        recs = [r for r in c.records() if r["file"] == name]
        assert recs[0]["type"] == "warcinfo"
        assert recs[0]["headers"].get_header("WARC-Filename") == name


async def test_time_and_size_limits_mark_records_truncated(make_site, crawl):
    site = await make_site()

    async def trickle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        for _ in range(100):
            await resp.write(b"xx")
            await asyncio.sleep(0.1)
        return resp

    async def stall(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late")

    site.page("/", links("/trickle", "/big", "/stall"))
    site.handler("/trickle", trickle)
    site.page("/big", b"z" * 50_000, content_type="application/octet-stream")
    site.handler("/stall", stall)
    loop = asyncio.get_running_loop()
    started = loop.time()
    c = await crawl([site.base], crawl={"timeout": 1, "read_timeout": 0.5, "max_tries": 2,
                                        "max_response_bytes": 10_000})
    assert loop.time() - started < 8  # each fetch costs at most its deadline
    recs = c.responses()
    trickled = recs[site.base + "trickle"][0]
    assert trickled["headers"].get_header("WARC-Truncated") == "time"
    assert 0 < len(trickled["payload"]) < 200
    big = recs[site.base + "big"][0]
    assert big["headers"].get_header("WARC-Truncated") == "length"
    assert big["payload"] == b"z" * 10_000
    assert site.base + "stall" not in recs
    assert c.states()[site.base + "stall"] == "failed"
    assert c.result.exit_code == ExitCode.FAILED_URLS


async def test_every_warc_file_passes_warcio_check_and_gzip_test(make_site, crawl):
    import subprocess
    import sys

    site = await make_site()
    site.page("/", links("/a", "/r", "/gone") + '<img src="/i.png">')
    site.page("/a", gzip.compress(b"<p>zipped</p>"), headers={"Content-Encoding": "gzip"})
    site.redirect("/r", "/a")
    site.page("/i.png", bytes(range(256)) * 40, content_type="image/png")
    c = await crawl([site.base], archive={"warc_max_bytes": 3000})
    files = sorted(str(p) for p in (c.archive / "warc").glob("*.warc.gz"))
    assert len(files) >= 2
    subprocess.run(["gzip", "-t", *files], check=True)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", *files],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_secret_headers_go_to_the_site_only(make_site, crawl):
    """P9: Authorization and Cookie from the site file never reach another origin, not even
    through a redirect; other configured headers go everywhere."""
    site, other = await make_site(), await make_site()
    seen: dict[str, dict[str, str]] = {}

    def recording(name: str):
        async def handler(request: web.Request) -> web.StreamResponse:
            seen[name] = dict(request.headers)
            return web.Response(body=name.encode(), content_type="image/png")
        return handler

    site.page("/", f'<img src="{other.base}cdn.png"><img src="/away"><img src="/own.png">')
    site.redirect("/away", other.base + "moved.png", 302)
    other.handler("/cdn.png", recording("cdn"))
    other.handler("/moved.png", recording("moved"))
    site.handler("/own.png", recording("own"))
    await crawl([site.base], crawl={"headers": {"Authorization": "Bearer s3cret",
                                                "Cookie": "id=c00kie",
                                                "Accept-Language": "fr"}})
    assert seen["own"]["Authorization"] == "Bearer s3cret"
    assert seen["own"]["Cookie"] == "id=c00kie"
    for name in ("cdn", "moved"):
        assert "Authorization" not in seen[name] and "Cookie" not in seen[name], name
        assert seen[name]["Accept-Language"] == "fr"
