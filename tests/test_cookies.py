"""Cookies (P9): a jar for the site's own hosts only, a Netscape cookies.txt, and no cookie
value in the archive or the log."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from conftest import Crawl, TestSite, read_records, write_config

from mirror.archive.warcwriter import WarcWriter, default_info
from mirror.config import load_config
from mirror.crawl.cookies import (
    CookieFileError,
    FileCookie,
    parse_cookies_txt,
    read_cookies_txt,
    site_filter,
)
from mirror.crawl.fetch import Limits, fetch, open_session, site_cookie_jar
from mirror.crawl.scope import Scope
from mirror.web.http import REDACTED

SECRET = "s3cr3t-Session-Value"
NOW = 1_800_000_000.0
LIMITS = Limits(timeout=10, connect_timeout=5, read_timeout=5, max_bytes=1 << 20)


# -- cookies.txt ---------------------------------------------------------------------------

COOKIES_TXT = "\n".join([
    "# Netscape HTTP Cookie File",
    "# https://curl.se/docs/http-cookies.html",
    "",
    ".example.com\tTRUE\t/\tFALSE\t0\tsession\tabc",
    "example.com\tFALSE\t/shop\tTRUE\t1900000000\tcart\t42=x/y",
    "#HttpOnly_.example.com\tTRUE\t/\tFALSE\t1900000000\tsid\t" + SECRET,
    "example.com\tFALSE\t/\tFALSE\t1700000000\told\tgone",  # expired: left out
    "www.example.com\tfalse\t/\tfalse\t1900000000.5\tempty",  # six fields: empty value
    "   ",
])


def test_cookies_txt_is_read() -> None:
    cookies = parse_cookies_txt(COOKIES_TXT, "c.txt", now=NOW)
    assert [(c.domain, c.include_subdomains, c.path, c.secure, c.expires, c.name, c.value,
             c.http_only) for c in cookies] == [
        ("example.com", True, "/", False, 0, "session", "abc", False),
        ("example.com", False, "/shop", True, 1900000000, "cart", "42=x/y", False),
        ("example.com", True, "/", False, 1900000000, "sid", SECRET, True),
        ("www.example.com", False, "/", False, 1900000000, "empty", "", False),
    ]
    assert SECRET not in repr(cookies)


def test_cookies_txt_crlf_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "cookies.txt"
    path.write_bytes(b"\xef\xbb\xbf# Netscape HTTP Cookie File\r\n"
                     b"example.com\tFALSE\t/\tFALSE\t0\ta\tb\r\n")
    assert [(c.name, c.value) for c in read_cookies_txt(path)] == [("a", "b")]


@pytest.mark.parametrize(("line", "message"), [
    ("example.com TRUE / FALSE 0 sid " + SECRET, "expected 7 tab-separated fields (domain, "
     "include-subdomains, path, secure, expiry, name, value), found 1; fields are separated "
     "by tabs, not spaces"),
    ("example.com\tTRUE\t/\tFALSE\t0\tsid\t" + SECRET + "\textra", "found 8"),
    ("example.com\tyes\t/\tFALSE\t0\tsid\t" + SECRET, "include-subdomains: expected TRUE or FALSE"),
    ("example.com\tTRUE\t/\tmaybe\t0\tsid\t" + SECRET, "secure: expected TRUE or FALSE"),
    ("example.com\tTRUE\tshop\tFALSE\t0\tsid\t" + SECRET, "path: expected a path starting with /"),
    ("example.com\tTRUE\t/\tFALSE\tnever\tsid\t" + SECRET, "expiry: expected seconds since 1970"),
    ("\tTRUE\t/\tFALSE\t0\tsid\t" + SECRET, "domain: expected a host name"),
    ("http://example.com/\tTRUE\t/\tFALSE\t0\tsid\t" + SECRET, "domain: expected a host name"),
    ("example.com\tTRUE\t/\tFALSE\t0\ts id\t" + SECRET, "name: not a valid cookie name"),
    ("#HttpOnly_example.com\tTRUE\t/\tFALSE\t0\t" + SECRET, None),
])
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str | None) -> None:
    path = tmp_path / "cookies.txt"
    path.write_text(f"# Netscape HTTP Cookie File\n\n{line}\n", encoding="utf-8")
    if message is None:  # six fields of an HttpOnly line: a name and no value, accepted
        assert [c.value for c in read_cookies_txt(path)] == [""]
        return
    with pytest.raises(CookieFileError) as info:
        read_cookies_txt(path)
    assert str(info.value).startswith(f"{path}:3: ")
    assert message in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value, ValueError) and info.value.line == 3


def test_unreadable_cookies_file(tmp_path: Path) -> None:
    with pytest.raises(CookieFileError, match=r"nope\.txt: cannot read: \[Errno 2\]"):
        read_cookies_txt(tmp_path / "nope.txt")
    (tmp_path / "latin.txt").write_bytes(b"# \xff\n")
    with pytest.raises(CookieFileError, match="not UTF-8 text"):
        read_cookies_txt(tmp_path / "latin.txt")


def test_file_cookie_as_a_morsel() -> None:
    host_only = FileCookie("example.com", False, "/a", True, int(NOW) + 60, "n", "v", True)
    morsel = host_only.morsel(now=NOW)
    assert (morsel.key, morsel.value, morsel["path"], morsel["domain"]) == ("n", "v", "/a", "")
    assert morsel["secure"] and morsel["httponly"] and morsel["max-age"] == "60"
    assert host_only.url == "https://example.com/a"
    domain = FileCookie("example.com", True, "/", False, 0, "n", "v")
    assert domain.morsel()["domain"] == "example.com" and not domain.morsel()["max-age"]


def test_site_filter_normalises_and_refuses_junk() -> None:
    allowed = site_filter(lambda url: url.startswith("http://example.com/"))
    assert allowed("HTTP://Example.COM:80/a/../b")
    assert not allowed("http://other.org/")
    assert not allowed("")  # aiohttp's URL() placeholder
    assert not allowed("mailto:a@example.com")


# -- the jar on real sites -----------------------------------------------------------------


def cookie_site(site: TestSite, name: str = "sid", value: str = SECRET) -> None:
    """/set sets a cookie; every request's Cookie header is logged in site.cookies."""
    site.cookies = []  # type: ignore[attr-defined]

    async def set_cookie(request: web.Request) -> web.StreamResponse:
        site.cookies.append(request.headers.get("Cookie"))  # type: ignore[attr-defined]
        resp = web.Response(text="<p>set</p>", content_type="text/html")
        resp.set_cookie(name, value, path="/", httponly=True)
        return resp

    async def show(request: web.Request) -> web.StreamResponse:
        site.cookies.append(request.headers.get("Cookie"))  # type: ignore[attr-defined]
        return web.Response(text="<p>page</p>", content_type="text/html")

    site.handler("/set", set_cookie)
    site.handler("/page", show)


def config_for(tmp_path: Path, site: TestSite, **crawl: object):  # type: ignore[no-untyped-def]
    return load_config(write_config(tmp_path, [site.base], crawl=crawl))


async def get(session: object, url: str) -> None:
    ex = await fetch(session, url, LIMITS)  # type: ignore[arg-type]
    ex.body.close()


async def test_a_cookie_goes_back_to_its_site_only(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site, other = await make_site(), await make_site()  # same 127.0.0.1, another port
    cookie_site(site)
    cookie_site(other, "tracker", "other-" + SECRET)
    cfg = config_for(tmp_path, site)
    jar = site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site)
    assert jar is not None
    async with open_session("t", 2, jar) as session:
        await get(session, site.base + "set")
        await get(session, site.base + "page")
        await get(session, other.base + "page")
        await get(session, other.base + "set")  # another host's cookie is refused
        await get(session, site.base + "page")
    assert site.cookies == [None, f"sid={SECRET}", f"sid={SECRET}"]  # type: ignore[attr-defined]
    assert other.cookies == [None, None]  # type: ignore[attr-defined]
    assert len(jar) == 1
    assert not any(SECRET in r.getMessage() for r in caplog.records)


async def test_cookies_off_sends_none(tmp_path: Path,
                                      make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    cookie_site(site)
    cfg = config_for(tmp_path, site, cookies=False)
    assert site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site) is None
    async with open_session("t", 2, None) as session:
        await get(session, site.base + "set")
        await get(session, site.base + "page")
    assert site.cookies == [None, None]  # type: ignore[attr-defined]


async def test_cookies_file_goes_to_the_site_only(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site, other = await make_site(), await make_site()
    cookie_site(site)
    cookie_site(other)
    (tmp_path / "cookies.txt").write_text(
        "# Netscape HTTP Cookie File\n"
        f"#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\t{SECRET}\n"
        "127.0.0.1\tFALSE\t/\tFALSE\t0\tlang\ten\n"
        "127.0.0.1\tFALSE\t/private\tFALSE\t0\tdeep\tx\n"  # another path: not sent to /page
        "127.0.0.1\tFALSE\t/\tTRUE\t0\tsafe\tx\n"  # Secure: not sent over http
        "example.com\tFALSE\t/\tFALSE\t0\telsewhere\tx\n", encoding="utf-8")
    cfg = config_for(tmp_path, site, cookies_file="cookies.txt")
    jar = site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site)
    assert jar is not None and len(jar) == 5
    async with open_session("t", 2, jar) as session:
        await get(session, site.base + "page")
        await get(session, other.base + "page")
    sent = site.cookies[0].split("; ")  # type: ignore[attr-defined]
    assert len(site.cookies) == 1 and sorted(sent) == ["lang=en", f"sid={SECRET}"]  # type: ignore[attr-defined]
    assert other.cookies == [None]  # type: ignore[attr-defined]
    assert "loaded 5 cookies from" in caplog.text
    assert not any(SECRET in r.getMessage() for r in caplog.records)


def test_a_bad_cookies_file_stops_the_jar(tmp_path: Path) -> None:
    (tmp_path / "cookies.txt").write_text("127.0.0.1 FALSE / FALSE 0 sid x\n", encoding="utf-8")
    cfg = load_config(write_config(tmp_path, ["http://127.0.0.1:9/"],
                                   crawl={"cookies_file": "cookies.txt"}))
    with pytest.raises(CookieFileError, match=r"cookies\.txt:1: expected 7 tab-separated"):
        site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site)


async def test_request_records_redact_the_cookie(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    """What the fetch hands the WARC writer holds the Cookie header the jar added; the
    request record has it redacted."""
    site = await make_site()
    cookie_site(site)
    cfg = config_for(tmp_path, site)
    jar = site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site)
    writer = WarcWriter(tmp_path / "warc", "t", 1 << 30, default_info("sha256:0", "t/run-1"))
    async with open_session("t", 2, jar) as session:
        await get(session, site.base + "set")
        ex = await fetch(session, site.base + "page", LIMITS)
    assert ("Cookie", f"sid={SECRET}") in ex.request_headers
    writer.write_capture(ex)
    writer.close()
    ex.body.close()
    request = next(r for r in read_records(tmp_path / "warc") if r["type"] == "request")
    assert request["http"].get_header("Cookie") == REDACTED
    raw = b"".join(gzip.decompress(p.read_bytes()) for p in (tmp_path / "warc").glob("*.gz"))
    assert SECRET.encode() not in raw


def cookie_crawl_site(site: TestSite) -> None:
    """/ sets a session cookie and links to /a and /b, which need it."""
    async def home(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text='<a href="/a">a</a> <a href="/b">b</a>',
                            content_type="text/html")
        resp.set_cookie("sid", SECRET, path="/")
        return resp

    async def member(request: web.Request) -> web.StreamResponse:
        ok = request.cookies.get("sid") == SECRET
        text = f"members only: {request.path}" if ok else f"who are you? {request.path}"
        return web.Response(text=text, content_type="text/html")

    site.handler("/", home)
    site.handler("/a", member)
    site.handler("/b", member)


async def test_a_crawl_keeps_the_sites_cookies(
        crawl: Callable[..., Awaitable[Crawl]], make_site: Callable[[], Awaitable[TestSite]],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site = await make_site()
    cookie_crawl_site(site)
    result = await crawl([site.base], crawl={"workers": 1})
    bodies = {u: r[0]["payload"] for u, r in result.responses().items()}
    assert bodies[site.base + "a"] == b"members only: /a"
    assert bodies[site.base + "b"] == b"members only: /b"
    for r in result.records():
        if r["type"] == "request" and r["uri"] != site.base:
            assert r["http"].get_header("Cookie") == REDACTED
    assert not any(SECRET in r.getMessage() for r in caplog.records)
    log = (result.archive / "mirror.log")
    assert not log.exists() or SECRET not in log.read_text(encoding="utf-8")


async def test_a_crawl_with_cookies_off_sends_none(
        crawl: Callable[..., Awaitable[Crawl]],
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    cookie_crawl_site(site)
    result = await crawl([site.base], crawl={"workers": 1, "cookies": False})
    bodies = {u: r[0]["payload"] for u, r in result.responses().items()}
    assert bodies[site.base + "a"] == b"who are you? /a"


async def test_no_cookie_value_anywhere_in_the_warc(
        crawl: Callable[..., Awaitable[Crawl]],
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    cookie_crawl_site(site)
    result = await crawl([site.base], crawl={"workers": 1})
    raw = b"".join(gzip.decompress(p.read_bytes())
                   for p in (result.archive / "warc").glob("*.warc.gz"))
    assert SECRET.encode() not in raw
