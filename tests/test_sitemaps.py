"""Sitemaps: the parser's tables (XML, index, gzip, text, limits, hostile XML), discovery's
decisions, and crawls of a real local site that robots.txt or /sitemap.xml leads to.

The crawls check the server's request log, the WARC records and the manifest, by URL.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web
from conftest import RunClock, write_config
from test_quality import transitive

from mirror.config import load_config
from mirror.crawl.discover import Discovery
from mirror.crawl.scope import Scope
from mirror.crawl.sitemaps import (
    DEFAULT_PATH,
    INDEX,
    MAX_BYTES,
    MAX_URLS,
    TEXT,
    URLSET,
    Entry,
    parse,
    robots_sitemaps,
)
from mirror.model import NOTHING, ExitCode, LinkKind, Mode, UrlItem, Via
from mirror.run.report import RunData, build_report, render_summary

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = "application/xml"


def urlset(*locs: str, lastmod: str | None = None) -> bytes:
    mod = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
    rows = "".join(f"<url><loc>{loc}</loc>{mod}</url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{rows}</urlset>'.encode()


def index(*locs: str) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex {NS}>{rows}</sitemapindex>".encode()


def links(*hrefs: str) -> str:
    return "<html><body>" + "".join(f'<a href="{h}">x</a>' for h in hrefs) + "</body></html>"


# -- the parser (pure) ------------------------------------------------------------------------
def test_urlset_gives_pages_with_their_lastmod() -> None:
    body = (f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
            "<url><loc> http://a.test/x </loc><lastmod>2024-05-01T10:00:00+00:00</lastmod>"
            "<changefreq>daily</changefreq>"
            "<image:image><image:loc>http://a.test/pic.png</image:loc></image:image></url>"
            "<!-- a comment --><url><loc>http://a.test/y</loc></url><url></url></urlset>")
    read = parse(body.encode())
    assert read.kind == URLSET and not read.is_index and read.problem is None
    assert read.entries == (Entry("http://a.test/x", "2024-05-01T10:00:00+00:00"),
                            Entry("http://a.test/y"))  # no image:loc, no empty entry


def test_index_gives_sitemaps() -> None:
    read = parse(index("http://a.test/s1.xml", "/s2.xml.gz"))
    assert read.is_index and read.kind == INDEX
    assert [e.loc for e in read.entries] == ["http://a.test/s1.xml", "/s2.xml.gz"]


def test_no_namespace_and_a_bom_are_read_too() -> None:
    read = parse(b"\xef\xbb\xbf <urlset><url><loc>http://a.test/</loc></url></urlset>")
    assert read.entries == (Entry("http://a.test/"),)


@pytest.mark.parametrize("coding", [None, "gzip"])
def test_gzip_file_and_gzip_coding(coding: str | None) -> None:
    """A .xml.gz file (gzip magic), also when the server gzips it once more."""
    body = gzip.compress(urlset("http://a.test/1", "http://a.test/2"))
    if coding:
        body = gzip.compress(body)
    assert [e.loc for e in parse(body, coding).entries] == ["http://a.test/1", "http://a.test/2"]
    assert [e.loc for e in parse(gzip.compress(b"http://a.test/t\n")).entries] \
        == ["http://a.test/t"]


def test_text_sitemap_keeps_only_url_lines() -> None:
    read = parse(b"http://a.test/1\r\n\n  https://a.test/2  \nnot a url\nftp://a.test/3\n"
                 b"HTTP://a.test/4\n")
    assert read.kind == TEXT and read.problem is None
    assert [e.loc for e in read.entries] == ["http://a.test/1", "https://a.test/2",
                                             "HTTP://a.test/4"]


@pytest.mark.parametrize("kind", [URLSET, TEXT])
def test_at_most_50000_urls_per_file(kind: str) -> None:
    locs = [f"http://a.test/p{i}" for i in range(MAX_URLS + 5)]
    body = urlset(*locs) if kind == URLSET else "\n".join(locs).encode()
    read = parse(body)
    assert len(read.entries) == MAX_URLS == 50_000
    assert read.entries[-1].loc == f"http://a.test/p{MAX_URLS - 1}"
    assert "more than 50000 URLs" in (read.problem or "")


def test_at_most_50_mb_uncompressed() -> None:
    """A gzip bomb: 60 MB of blanks after the first entry, 60 KB on the wire."""
    bomb = gzip.compress(urlset("http://a.test/1")[:-len("</urlset>")] + b" " * (60 << 20))
    assert len(bomb) < 100_000 and MAX_BYTES == 52_428_800
    read = parse(bomb)
    assert read.entries == (Entry("http://a.test/1"),)
    assert f"more than {MAX_BYTES} bytes" in (read.problem or "")


def test_broken_xml_keeps_what_came_before() -> None:
    read = parse(urlset("http://a.test/1", "http://a.test/2")[:-20] + b"<url><loc>http://a")
    assert [e.loc for e in read.entries] == ["http://a.test/1"]
    assert "broken XML" in (read.problem or "")


@pytest.mark.parametrize("body", [b"<html><body>not found</body></html>",
                                  b"<!DOCTYPE html><html></html>", b"\x1f\x8bnot gzip"])
def test_what_is_not_a_sitemap_lists_nothing(body: bytes) -> None:
    read = parse(body)
    assert read.entries == () and read.problem


XXE = f"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{Path(__file__).resolve()}">]>
<urlset {NS}><url><loc>http://a.test/&xxe;</loc></url></urlset>""".encode()
LAUGHS = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
          + b"".join(b' <!ENTITY lol%d "%s">\n' % (i, b"&lol%d;" % (i - 1) * 10 if i > 1
                                                   else b"&lol;" * 10) for i in range(1, 10))
          + f"]>\n<urlset {NS}><url><loc>http://a.test/&lol9;</loc></url>"
            "<url><loc>http://a.test/ok</loc></url></urlset>".encode())


@pytest.mark.parametrize("body", [XXE, LAUGHS], ids=["xxe", "billion-laughs"])
def test_entities_are_never_expanded(body: bytes) -> None:
    started = time.monotonic()
    read = parse(body)
    assert time.monotonic() - started < 1
    assert read.entries == ()  # a DOCTYPE is refused: no sitemap needs one
    assert "DOCTYPE" in (read.problem or "") or "entity" in (read.problem or "").lower()


ROBOTS_CASES = [
    ("named", 200, b"User-agent: *\nSitemap: http://a.test/s.xml\nsitemap: /t.xml\n",
     ["http://a.test/s.xml", "/t.xml"]),
    ("none-named", 200, b"User-agent: *\nDisallow: /x\n", [DEFAULT_PATH]),
    ("404", 404, b"", [DEFAULT_PATH]),
    ("403", 403, b"", [DEFAULT_PATH]),
    ("429", 429, b"", []),
    ("503", 503, b"Sitemap: http://a.test/s.xml\n", []),
    ("301", 301, b"", []),
]


@pytest.mark.parametrize(("status", "body", "expected"), [c[1:] for c in ROBOTS_CASES],
                         ids=[c[0] for c in ROBOTS_CASES])
def test_robots_sitemaps(status: int, body: bytes, expected: list[str]) -> None:
    assert robots_sitemaps(status, body) == expected


def test_parser_is_pure() -> None:
    assert not transitive("crawl.sitemaps") & {"aiohttp", "sqlite3", "manifest.writer",
                                               "crawl.fetch"}


# -- discovery (pure) -------------------------------------------------------------------------
def discovery(tmp_path: Path, **scope: object) -> Discovery:
    cfg = load_config(write_config(tmp_path, ["http://a.test/"],
                                   scope={"robots": True, **scope}))
    return Discovery(cfg, Scope.from_config(cfg))


def item(url: str, via: str, mode: str = Mode.REQUISITE) -> UrlItem:
    return UrlItem(1, url, "a.test", 0, 10, mode, 0, via)


def test_robots_of_the_site_leads_to_its_sitemaps(tmp_path: Path) -> None:
    d = discovery(tmp_path, exclude=["/secret"])
    robots = item("http://a.test/robots.txt", Via.ROBOTS)
    body = b"Sitemap: /s.xml\nSitemap: http://cdn.test/s.xml\nSitemap: /secret.xml\n"
    headers = {"content-type": "text/plain"}
    assert d.wants_body(200, headers, None, robots) and not d.wants_body(200, headers, None)
    location, found, *_ = d.discover(robots, 200, body, None, headers)
    assert location is None
    assert [(f.url, f.mode, f.via, f.depth, f.skip_reason) for f in found] == [
        ("http://a.test/s.xml", Mode.REQUISITE, Via.SITEMAP, 0, None),
        ("http://cdn.test/s.xml", Mode.REQUISITE, Via.SITEMAP, 0, None),  # as requisites are
        ("http://a.test/secret.xml", "", Via.SITEMAP, 0, "exclude"),
    ]
    assert [f.url for f in d.discover(robots, 404, None, None, {})[1]] \
        == ["http://a.test/sitemap.xml"]
    cdn = item("http://cdn.test/robots.txt", Via.ROBOTS)
    assert d.discover(cdn, 200, body, None, headers) == NOTHING  # not the site's own
    assert not d.wants_body(200, headers, None, cdn)


def test_sitemap_pages_are_links_at_depth_1(tmp_path: Path) -> None:
    d = discovery(tmp_path)
    sitemap = item("http://a.test/s.xml", Via.SITEMAP)
    body = urlset("http://a.test/p", "/q", "http://elsewhere.test/r", lastmod="2024-01-02")
    assert d.wants_body(200, {"content-type": XML}, None, sitemap)
    _, found, *_ = d.discover(sitemap, 200, body, None, {"content-type": XML})
    assert [(f.url, f.mode, f.via, f.kind, f.depth, f.skip_reason, f.lastmod) for f in found] \
        == [("http://a.test/p", Mode.PAGE, Via.SITEMAP, LinkKind.LINK, 1, None, "2024-01-02"),
            ("http://a.test/q", Mode.PAGE, Via.SITEMAP, LinkKind.LINK, 1, None, "2024-01-02"),
            ("http://elsewhere.test/r", "", Via.SITEMAP, LinkKind.LINK, 1, "host", None)]
    page = item("http://a.test/p", Via.SITEMAP, Mode.PAGE)  # listed: a page, not a sitemap
    assert d.discover(page, 200, body, None, {"content-type": XML}) == NOTHING
    assert not d.wants_body(200, {"content-type": XML}, None, page)


def test_sitemap_index_and_redirect_lead_to_sitemaps(tmp_path: Path) -> None:
    d = discovery(tmp_path)
    sitemap = item("http://a.test/s.xml", Via.SITEMAP)
    _, found, *_ = d.discover(sitemap, 200, index("/s1.xml.gz"), None, {"content-type": XML})
    assert [(f.url, f.mode, f.via) for f in found] == [
        ("http://a.test/s1.xml.gz", Mode.REQUISITE, Via.SITEMAP)]
    location, found, *_ = d.discover(sitemap, 301, None, None, {"location": "/new.xml"})
    assert location == "http://a.test/new.xml"
    assert [(f.mode, f.via, f.kind, f.redirects_left) for f in found] == [
        (Mode.REQUISITE, Via.SITEMAP, LinkKind.REDIRECT, 9)]


def test_sitemaps_off_reads_none(tmp_path: Path) -> None:
    d = discovery(tmp_path, sitemaps=False)
    robots = item("http://a.test/robots.txt", Via.ROBOTS)
    assert d.discover(robots, 404, None, None, {}) == NOTHING
    sitemap = item("http://a.test/s.xml", Via.SITEMAP)
    assert not d.wants_body(200, {"content-type": XML}, None, sitemap)
    assert d.discover(sitemap, 200, urlset("http://a.test/p"), None, {}) == NOTHING


# -- crawls ---------------------------------------------------------------------------------
def robots_on(**scope: object) -> dict[str, object]:
    return {"scope": {"robots": True, **scope}}


def requested(log: list[str]) -> dict[str, int]:
    return {p: log.count(p) for p in log}


def db_rows(c, sql: str) -> list[tuple]:  # noqa: ANN001 - conftest.Crawl
    with c.db() as db:
        return db.execute(sql).fetchall()


async def test_robots_sitemaps_index_and_gzip(make_site, crawl):
    site = await make_site()
    base = site.base.rstrip("/")
    site.page("/robots.txt", f"User-agent: *\nSitemap: {base}/index.xml\nSitemap: /main.xml\n",
              content_type="text/plain")
    site.page("/", links("/a"))
    site.page("/a", "a")
    site.page("/index.xml", index("/gz/pages.xml.gz"), content_type=XML)
    site.page("/gz/pages.xml.gz", gzip.compress(urlset(f"{base}/b", f"{base}/c")),
              content_type="application/gzip")
    site.page("/main.xml", urlset(f"{base}/a", f"{base}/d"), content_type="text/xml")
    for p in "bcd":
        site.page(f"/{p}", p)
    c = await crawl([site.base], crawl={"workers": 2}, **robots_on())
    assert c.result.exit_code == ExitCode.OK
    assert requested(site.log) == {p: 1 for p in (
        "/robots.txt", "/", "/a", "/b", "/c", "/d", "/index.xml", "/gz/pages.xml.gz",
        "/main.xml")}  # each once; no /sitemap.xml, since robots.txt names sitemaps
    responses = c.responses()
    for path in ("index.xml", "gz/pages.xml.gz", "main.xml", "b", "c", "d"):
        assert [r["status"] for r in responses[site.base + path]] == [200]
    rows = dict((u, (via, mode, depth)) for u, via, mode, depth in db_rows(
        c, "SELECT url, via, mode, depth FROM urls"))
    assert rows[site.base + "index.xml"] == (Via.SITEMAP, Mode.REQUISITE, 0)
    assert rows[site.base + "gz/pages.xml.gz"] == (Via.SITEMAP, Mode.REQUISITE, 0)
    assert rows[site.base + "b"] == (Via.SITEMAP, Mode.PAGE, 1)
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    assert report["sitemap_only_pages"] == 3  # b, c, d; /a has a link from /
    c.assert_verifies()


@pytest.mark.parametrize("robots", [None, "User-agent: *\nDisallow: /private\n"],
                         ids=["no-robots.txt", "names-none"])
async def test_sitemap_xml_when_robots_names_none(make_site, crawl, robots):
    site = await make_site()
    if robots:
        site.page("/robots.txt", robots, content_type="text/plain")
    site.page("/", "home")
    site.page("/sitemap.xml", urlset(site.base + "only-in-sitemap"), content_type=XML)
    site.page("/only-in-sitemap", "x")
    c = await crawl([site.base], **robots_on())
    assert requested(site.log) == {"/robots.txt": 1, "/": 1, "/sitemap.xml": 1,
                                   "/only-in-sitemap": 1}
    assert c.states()[site.base + "robots.txt"] == "done"  # a 404 is archived too
    assert c.states()[site.base + "only-in-sitemap"] == "done"
    c.assert_verifies()


async def test_missing_sitemap_xml_is_no_broken_link(make_site, crawl):
    site = await make_site()
    site.page("/", "home")
    c = await crawl([site.base], **robots_on())
    assert requested(site.log) == {"/robots.txt": 1, "/": 1, "/sitemap.xml": 1}
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    assert report["broken_links"] == [] and report["sitemap_only_pages"] == 0
    assert c.result.exit_code == ExitCode.OK


async def test_text_sitemap(make_site, crawl):
    site = await make_site()
    site.page("/robots.txt", "Sitemap: /urls.txt\n", content_type="text/plain")
    site.page("/", "home")
    site.page("/urls.txt", f"{site.base}t1\n\n{site.base}t2\n", content_type="text/plain")
    site.page("/t1", "1")
    site.page("/t2", "2")
    c = await crawl([site.base], **robots_on())
    assert sorted(site.log) == ["/", "/robots.txt", "/t1", "/t2", "/urls.txt"]
    assert {site.base + "t1", site.base + "t2"} <= set(c.responses())


async def test_off_scope_urls_in_a_sitemap_are_skipped(make_site, crawl):
    site, other = await make_site(), await make_site()
    site.page("/", "home")
    site.page("/sitemap.xml", urlset(site.base + "in", other.base + "out",
                                     site.base + "private/x"), content_type=XML)
    site.page("/in", "in")
    c = await crawl([site.base], **robots_on(exclude=["/private/"]))
    assert other.log == [] and site.count("/private/x") == 0
    assert c.skipped() == {other.base + "out": "host", site.base + "private/x": "exclude"}
    assert c.states()[site.base + "in"] == "done"


async def test_a_broken_sitemap_does_not_stop_the_crawl(make_site, crawl, caplog):
    site = await make_site()
    site.page("/robots.txt", "Sitemap: /broken.xml\nSitemap: /fine.xml\n",
              content_type="text/plain")
    site.page("/", "home")
    site.page("/broken.xml", urlset(site.base + "kept", site.base + "lost")[:-30],
              content_type=XML)
    site.page("/fine.xml", urlset(site.base + "fine"), content_type=XML)
    for p in ("kept", "lost", "fine"):
        site.page(f"/{p}", p)
    with caplog.at_level(logging.WARNING, logger="mirror"):
        c = await crawl([site.base], **robots_on())
    assert c.result.exit_code == ExitCode.OK
    assert site.count("/kept") == 1 and site.count("/fine") == 1 and site.count("/lost") == 0
    assert any("broken XML" in r.getMessage() and "broken.xml" in r.getMessage()
               for r in caplog.records)


async def test_sitemaps_off_fetches_no_sitemap(make_site, crawl):
    site = await make_site()
    site.page("/robots.txt", "Sitemap: /s.xml\n", content_type="text/plain")
    site.page("/", "home")
    site.page("/s.xml", urlset(site.base + "p"), content_type=XML)
    c = await crawl([site.base], **robots_on(sitemaps=False))
    assert sorted(site.log) == ["/", "/robots.txt"]
    assert set(c.states()) == {site.base, site.base + "robots.txt"}


async def test_half_the_pages_only_in_the_sitemap(make_site, crawl):
    """The closing note's measure: a site whose home links to half its pages, and whose
    sitemap lists all of them. Every page is archived; the report counts the other half."""
    site = await make_site()
    pages = [f"/page/{i}" for i in range(40)]
    linked, unlinked = pages[::2], pages[1::2]
    site.page("/", links(*linked))
    for p in pages:
        site.page(p, links("/"))
    site.page("/sitemap.xml", urlset(*(site.base + p[1:] for p in pages)), content_type=XML)
    c = await crawl([site.base], crawl={"workers": 4}, **robots_on())
    assert requested(site.log) == {"/robots.txt": 1, "/sitemap.xml": 1, "/": 1,
                                   **{p: 1 for p in pages}}
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    assert report["sitemap_only_pages"] == len(unlinked) == 20
    c.assert_verifies()


async def test_a_moved_sitemap_is_read_where_it_moved(make_site, crawl):
    site = await make_site()
    site.page("/robots.txt", "Sitemap: /old.xml\n", content_type="text/plain")
    site.page("/", "home")
    site.redirect("/old.xml", "/new.xml")
    site.page("/new.xml", urlset(site.base + "p"), content_type=XML)
    site.page("/p", "p")
    c = await crawl([site.base], **robots_on())
    assert sorted(site.log) == ["/", "/new.xml", "/old.xml", "/p", "/robots.txt"]
    assert db_rows(c, f"SELECT via, mode FROM urls WHERE url='{site.base}new.xml'") \
        == [(Via.SITEMAP, Mode.REQUISITE)]


async def test_a_sitemap_confirmed_by_304_is_read_from_the_archive(make_site, crawl):
    """The next run asks again; a 304 confirms the archived sitemap, which is read again."""
    site = await make_site()
    site.page("/", "home")
    site.page("/p", "p")
    body = urlset(site.base + "p")

    async def sitemap(request: web.Request) -> web.StreamResponse:
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(body=body, headers={"Content-Type": XML, "ETag": '"v1"'})

    site.handler("/sitemap.xml", sitemap)
    clock = RunClock()
    await crawl([site.base], clock=clock, **robots_on())
    site.log.clear()
    clock.next_run()
    second = await crawl([site.base], clock=clock, **robots_on())
    assert second.result.run_id == 2
    assert sorted(site.log) == ["/", "/p", "/robots.txt", "/sitemap.xml"]
    assert db_rows(second, "SELECT record_type FROM captures WHERE run_id=2 "
                   f"AND url='{site.base}sitemap.xml'") == [("not-modified",)]
    report = json.loads((second.archive / "reports" / "2.json").read_text())
    assert report["sitemap_only_pages"] == 1


async def test_lastmod_is_kept_for_the_next_run(make_site, crawl):
    site = await make_site()
    site.page("/", "home")
    site.page("/sitemap.xml", urlset(site.base + "p", lastmod="2024-03-04"), content_type=XML)
    site.page("/p", "p")
    c = await crawl([site.base], **robots_on())
    with c.db() as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name='sitemap_lastmod'").fetchone():
            pytest.skip("the manifest has no sitemap_lastmod table yet")
        rows = db.execute("SELECT u.url, m.lastmod FROM sitemap_lastmod m "
                          "JOIN urls u ON u.id = m.url_id").fetchall()
    assert rows == [(site.base + "p", "2024-03-04")]


def test_summary_says_how_many_pages_only_a_sitemap_reached() -> None:
    data = RunData(site="s", run_id=1, state="complete", exit_code=0, resumed=False,
                   started_at="", finished_at="", duration=1.0, captures=3, url_states={},
                   status_classes={}, content_types={}, payload_bytes=0, warc_bytes=0,
                   skipped={}, top_errors=[], failed=[], broken_links=[], warc_files=[],
                   archive="archive", sitemap_only_pages=7)
    assert "  sitemaps       7 pages reached only through a sitemap" in render_summary(data)
    assert build_report(data)["sitemap_only_pages"] == 7
    assert "sitemaps" not in render_summary(replace(data, sitemap_only_pages=0))
