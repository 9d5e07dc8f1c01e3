"""The static-site server used by `mirror demo` and the benchmarks, against a real socket."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from mirror.demo import sitesrv
from mirror.demo.sitesrv import DEMO_SITE, REQUEST_LOG, parse_redirects, start_site_server

Server = tuple[web.AppRunner, str]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def demo() -> AsyncIterator[Server]:
    runner, base = await start_site_server(DEMO_SITE)
    try:
        yield runner, base
    finally:
        await runner.cleanup()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text("<p>home</p>")
    (root / "sub" / "page.html").write_text("<p>page</p>")
    (tmp_path / "secret.txt").write_text("top secret")
    return root


async def get(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> tuple[int, CIMultiDict[str], bytes]:
    async with session.get(url, allow_redirects=False, headers=headers) as r:
        return r.status, r.headers.copy(), await r.read()


async def raw_get(base: str, raw_path: str) -> bytes:
    """Send a request line as written; a client library would normalise the '..' away."""
    host, port = base.removeprefix("http://").rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {raw_path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()


# The demo site's URLs and what a crawler should see; keep in sync with mirror/demo/site/.
DEMO_OUTCOMES = [
    ("", 200, None),
    ("about.html", 200, None),
    ("gallery.html", 200, None),
    ("elsewhere.html", 200, None),
    ("blog/", 200, None),
    ("blog/?sort=oldest", 200, None),
    ("blog/post-1.html", 200, None),
    ("blog/post-2.html", 200, None),
    ("blog/post-3.html", 200, None),
    ("css/style.css", 200, None),
    ("css/typography.css", 200, None),
    ("img/logo.svg", 200, None),
    ("img/favicon.png", 200, None),
    ("img/paper.png", 200, None),
    ("img/rule.svg", 200, None),
    ("img/beds.png", 200, None),
    ("img/beds@2x.png", 200, None),
    ("img/supper.png", 200, None),
    ("old-about", 301, "/about.html"),
    ("moved", 301, "/old-about"),
    ("blog/latest", 302, "/blog/post-3.html"),
    ("missing.html", 404, None),
]


@pytest.mark.parametrize(("path", "status", "location"), DEMO_OUTCOMES)
async def test_demo_site_outcomes(
    demo: Server, session: aiohttp.ClientSession, path: str, status: int, location: str | None
) -> None:
    got_status, headers, _ = await get(session, demo[1] + path)
    assert (got_status, headers.get("Location")) == (status, location)


async def test_serves_demo_index_with_validators(
    demo: Server, session: aiohttp.ClientSession
) -> None:
    status, headers, body = await get(session, demo[1])
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"Riverside Allotments" in body
    assert headers["ETag"].startswith('"') and headers["Last-Modified"].endswith("GMT")


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("css/style.css", "text/css"),
        ("img/beds.png", "image/png"),
        ("img/logo.svg", "image/svg+xml"),
    ],
)
async def test_content_types(
    demo: Server, session: aiohttp.ClientSession, path: str, content_type: str
) -> None:
    _, headers, body = await get(session, demo[1] + path)
    assert headers["Content-Type"] == content_type
    assert body == (DEMO_SITE / path).read_bytes()


async def test_query_string_ignored_for_files_and_redirects(
    demo: Server, session: aiohttp.ClientSession
) -> None:
    _, _, plain = await get(session, demo[1] + "about.html")
    _, _, with_query = await get(session, demo[1] + "about.html?sort=asc&utm_source=x")
    assert with_query == plain
    status, headers, _ = await get(session, demo[1] + "old-about?from=feed")
    assert (status, headers["Location"]) == (301, "/about.html")


async def test_directory_without_slash_redirects(
    demo: Server, session: aiohttp.ClientSession
) -> None:
    status, headers, _ = await get(session, demo[1] + "blog")
    assert (status, headers["Location"]) == (301, "/blog/")


async def test_missing_file_is_404_html(demo: Server, session: aiohttp.ClientSession) -> None:
    status, headers, body = await get(session, demo[1] + "missing.html")
    assert status == 404
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"Not Found" in body


async def test_redirects_file_is_not_served(demo: Server, session: aiohttp.ClientSession) -> None:
    status, _, _ = await get(session, demo[1] + "_redirects")
    assert status == 404


async def test_if_none_match_gives_304(demo: Server, session: aiohttp.ClientSession) -> None:
    _, headers, _ = await get(session, demo[1] + "about.html")
    etag = headers["ETag"]
    status, headers304, body = await get(
        session, demo[1] + "about.html", headers={"If-None-Match": f'"other", {etag}'}
    )
    assert (status, body, headers304["ETag"]) == (304, b"", etag)
    status, _, _ = await get(session, demo[1] + "about.html", headers={"If-None-Match": '"x"'})
    assert status == 200


async def test_if_modified_since_gives_304(demo: Server, session: aiohttp.ClientSession) -> None:
    _, headers, _ = await get(session, demo[1] + "about.html")
    since = {"If-Modified-Since": headers["Last-Modified"]}
    status, _, _ = await get(session, demo[1] + "about.html", headers=since)
    assert status == 304
    old = {"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}
    status, _, _ = await get(session, demo[1] + "about.html", headers=old)
    assert status == 200


async def test_head_has_headers_and_no_body(demo: Server, session: aiohttp.ClientSession) -> None:
    async with session.head(demo[1] + "about.html") as r:
        assert r.status == 200
        assert int(r.headers["Content-Length"]) == (DEMO_SITE / "about.html").stat().st_size
        assert await r.read() == b""


@pytest.mark.parametrize(
    "raw_path",
    ["/../secret.txt", "/sub/../../secret.txt", "/%2e%2e/secret.txt", "/sub/..%2f..%2fsecret.txt"],
)
async def test_traversal_rejected(site: Path, raw_path: str) -> None:
    runner, base = await start_site_server(site)
    try:
        response = await raw_get(base, raw_path)
    finally:
        await runner.cleanup()
    assert response.startswith(b"HTTP/1.1 404 ")
    assert b"top secret" not in response


async def test_symlinks_out_of_root_rejected(site: Path, session: aiohttp.ClientSession) -> None:
    os.symlink(site.parent / "secret.txt", site / "leak.txt")
    os.symlink(site.parent, site / "up")
    os.symlink(site / "sub" / "page.html", site / "alias.html")
    (site / "outside").mkdir()
    os.symlink(site.parent / "secret.txt", site / "outside" / "index.html")
    runner, base = await start_site_server(site)
    try:
        assert (await get(session, base + "leak.txt"))[0] == 404
        assert (await get(session, base + "up/secret.txt"))[0] == 404
        assert (await get(session, base + "outside/"))[0] == 404
        assert (await get(session, base + "alias.html"))[2] == b"<p>page</p>"
    finally:
        await runner.cleanup()


async def test_changed_file_is_served_fresh(site: Path, session: aiohttp.ClientSession) -> None:
    runner, base = await start_site_server(site)
    try:
        _, before, _ = await get(session, base + "index.html")
        page = site / "index.html"
        page.write_text("<p>home, rewritten</p>")
        os.utime(page, ns=(0, page.stat().st_mtime_ns + 10**9))
        _, after, body = await get(session, base + "index.html")
        (site / "_redirects").write_text("/index.html 308 /sub/page.html\n")
        status, headers, _ = await get(session, base + "index.html")
    finally:
        await runner.cleanup()
    assert body == b"<p>home, rewritten</p>" and after["ETag"] != before["ETag"]
    assert (status, headers["Location"]) == (308, "/sub/page.html")


async def test_large_files_keep_the_same_validators(
    site: Path, session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, base = await start_site_server(site)
    try:
        _, cached, _ = await get(session, base + "sub/page.html")
        monkeypatch.setattr(sitesrv, "MAX_CACHED_SIZE", 0)
        runner2, base2 = await start_site_server(site)
        try:
            status, streamed, body = await get(session, base2 + "sub/page.html")
            status304, _, _ = await get(
                session, base2 + "sub/page.html", headers={"If-None-Match": cached["ETag"]}
            )
        finally:
            await runner2.cleanup()
    finally:
        await runner.cleanup()
    assert (status, body, status304) == (200, b"<p>page</p>", 304)
    assert streamed["ETag"] == cached["ETag"]
    assert streamed["Content-Type"] == cached["Content-Type"] == "text/html; charset=utf-8"


async def test_latency_delays_each_response(site: Path, session: aiohttp.ClientSession) -> None:
    runner, base = await start_site_server(site, latency=0.2)
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        status, _, _ = await get(session, base + "missing.html")
        elapsed = loop.time() - started
    finally:
        await runner.cleanup()
    assert status == 404
    assert elapsed >= 0.2


async def test_request_log_records_every_request(
    demo: Server, session: aiohttp.ClientSession
) -> None:
    runner, base = demo
    await get(session, base + "about.html?sort=asc")
    await get(session, base + "old-about")
    async with session.head(base + "missing.html"):
        pass
    log = runner.app[REQUEST_LOG]
    assert [(method, path) for _, method, path in log] == [
        ("GET", "/about.html?sort=asc"),
        ("GET", "/old-about"),
        ("HEAD", "/missing.html"),
    ]
    times = [t for t, _, _ in log]
    assert times == sorted(times)


def test_parse_redirects() -> None:
    text = "# comment\n\n/a 301 /b\n  /c  302  https://example.org/x#frag \n"
    assert parse_redirects(text) == {"/a": (301, "/b"), "/c": (302, "https://example.org/x#frag")}


@pytest.mark.parametrize("line", ["/a /b", "/a 200 /b", "a 301 /b", "/a 301 /b extra"])
def test_parse_redirects_rejects_bad_lines(line: str) -> None:
    with pytest.raises(ValueError, match="_redirects:2"):
        parse_redirects("# ok\n" + line)


async def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        await start_site_server(tmp_path / "nope")


def demo_links() -> set[str]:
    """Every same-site URL the demo files refer to (a rough extractor: the table's guard)."""
    from urllib.parse import urljoin, urlsplit

    from bs4 import BeautifulSoup

    base = "http://demo.test/"
    found: set[str] = set()
    for file in DEMO_SITE.rglob("*"):
        page = base + file.relative_to(DEMO_SITE).as_posix().removesuffix("index.html")
        refs: list[str] = []
        if file.suffix == ".html":
            soup = BeautifulSoup(file.read_text(), "lxml")
            refs += [str(tag["href"]) for tag in soup.find_all(href=True)]
            refs += [str(tag["src"]) for tag in soup.find_all(src=True)]
            for tag in soup.find_all(srcset=True):
                refs += [part.split()[0] for part in str(tag["srcset"]).split(",")]
        elif file.suffix == ".css":
            refs += re.findall(r"""url\(\s*["']?([^"')]+)""", file.read_text())
        for ref in refs:
            url = urljoin(page, ref).split("#")[0]
            if urlsplit(url).netloc == "demo.test":
                found.add(url.removeprefix(base))
    return found


def test_outcome_table_covers_every_demo_link() -> None:
    assert demo_links() == {path for path, _, _ in DEMO_OUTCOMES}
