"""`mirror serve`: replay over HTTP from the archive alone, never from the live site."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest
from aiohttp import ClientSession
from bs4 import BeautifulSoup

from mirror.replay.captures import CaptureIndex
from mirror.replay.serve import REPLAY_CSP, Site, make_app, parse_target


@pytest.fixture
async def served(make_site: Any, crawl: Any, aiohttp_client: Any) -> Any:
    """(site, other, client, ts, stamp): ts is the home page's capture time and stamp(url)
    any URL's; the crawl may cross a second boundary, so each capture has its own."""
    site, other, done = await site_def.crawl_site(make_site, crawl)
    client = await aiohttp_client(make_app(done.archive, Site("test", start_urls=(site.base,))))
    archive = CaptureIndex.load(done.archive)

    def stamp(url: str) -> str:
        cap = archive.closest(url, "99991231235959")
        assert cap is not None, url
        return cap.timestamp

    return site, other, client, stamp(site.base), stamp


@pytest.mark.parametrize("path, expected", [
    ("/20240102030405/http://a.test/x?y=1", ("20240102030405", "replay", "http://a.test/x?y=1")),
    ("/2024/https:/a.test/", ("2024", "replay", "https://a.test/")),
    ("/2024id_/a.test/p", ("2024", "raw", "http://a.test/p")),
    ("/2024*/http://a.test/", ("2024", "list", "http://a.test/")),
    ("/*/http://a.test/", ("99991231235959", "list", "http://a.test/")),
    ("/css/style.css", None), ("/", None), ("/123456789012345/http://a.test/", None),
])
def test_parse_target(path: str, expected: tuple[str, str, str] | None) -> None:
    target = parse_target(path)
    assert (target and (target.timestamp, target.mode, target.url)) == expected


async def test_landing_page_lists_runs_and_pages_and_searches(served: Any) -> None:
    site, _other, client, _ts, stamp = served
    resp = await client.get("/")
    assert resp.headers["Content-Security-Policy"].startswith("default-src 'none'")
    text = await resp.text()
    assert re.search(rf'<a href="/\d{{14}}/{site.base}">1</a>', text)  # browse run 1
    for expected in ("Home page", "About us", "Headers", "complete",
                     f"/{stamp(site.base + 'about')}/{site.base}about"):  # at its own time
        assert expected in text
    assert "main.css" not in text  # a stylesheet is not a page (but ?all=1 lists it)
    assert "main.css" in await (await client.get("/?all=1")).text()
    found = await (await client.get("/", params={"q": "about us"})).text()  # by title
    assert "About us" in found and "Home page" not in found


async def test_page_links_stay_inside_the_server(served: Any) -> None:
    site, other, client, ts, stamp = served
    resp = await client.get(f"/{ts}/{site.base}")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
    assert resp.headers["Content-Security-Policy"] == REPLAY_CSP
    soup = BeautifulSoup(await resp.read(), "html.parser", multi_valued_attributes=None)
    assert soup.h1.string == "Welcome café"  # iso-8859-1 page served as UTF-8
    refs = [v for tag in soup.find_all(True) for k, v in tag.attrs.items()
            if k in ("href", "src", "action")]
    refs += [c.split()[0] for tag in soup.find_all(srcset=True) for c in tag["srcset"].split(",")]
    assert refs and all(r.startswith(f"/{ts}/") or r in ("#top", "mailto:x@example.invalid")
                        for r in refs), refs
    assert f"/{ts}/{other.base}page" in refs  # not archived: the server says so, see below
    assert soup.find("link")["href"] == f"/{ts}/{site.base}css/main.css"
    assert "integrity" not in soup.find("link").attrs
    assert f'url("/{ts}/{site.base}img/hero.png")' in soup.style.string
    css = await (await client.get(f"/{ts}/{site.base}css/main.css")).text()
    css_ts = stamp(f"{site.base}css/main.css")  # links in a capture carry its own time
    assert f'@import "/{css_ts}/{site.base}css/type.css"' in css
    assert f'url("/{css_ts}/{site.base}img/bg.png")' in css
    image = await client.get(f"/{ts}/{site.base}img/a2.png")
    assert (image.status, image.content_type) == (200, "image/png")
    assert await image.read() == site_def.png(*site_def.IMAGES["a2.png"])
    assert other.log == []


async def test_archived_redirect_replays_as_redirect(served: Any) -> None:
    site, _other, client, ts, _stamp = served
    resp = await client.get(f"/{ts}/{site.base}old", allow_redirects=False)
    assert resp.status == 302
    assert re.fullmatch(rf"/\d{{14}}/{site.base}about", resp.headers["Location"])
    assert resp.headers["X-Archive-Status"] == "301"
    final = await client.get(f"/{ts}/{site.base}old")
    assert "About us" in await final.text()


async def test_what_was_not_archived_is_a_404_page_never_a_live_fetch(served: Any) -> None:
    site, other, client, ts, _stamp = served
    before = list(site.log)
    for url in (f"{other.base}page", f"{site.base}never-linked", "http://example.invalid/"):
        resp = await client.get(f"/{ts}/{url}")
        assert resp.status == 404
        assert "Not in this archive" in await resp.text()
    assert site.log == before and other.log == []


async def test_archived_headers_are_not_passed_on_and_bodies_are_decoded(served: Any) -> None:
    site, _other, client, ts, _stamp = served
    resp = await client.get(f"/{ts}/{site.base}headers?x=1", auto_decompress=False)
    assert resp.status == 200
    for name in site_def.DROPPED_HEADERS:
        if name != "Content-Security-Policy":
            assert name not in resp.headers, name
    assert resp.headers.getall("Content-Security-Policy") == [REPLAY_CSP]
    assert "Content-Encoding" not in resp.headers
    assert b"<h1>gzipped</h1>" in await resp.read()
    assert "secret-cookie" not in str(resp.headers) and not resp.cookies


async def test_a_page_that_cannot_be_decoded_is_not_served_with_live_links(served: Any) -> None:
    site, _other, client, ts, _stamp = served
    resp = await client.get(f"/{ts}/{site.base}corrupt")
    assert resp.status == 502 and "cannot be decoded" in await resp.text()
    raw = await client.get(f"/{ts}id_/{site.base}corrupt", auto_decompress=False)
    assert raw.headers["Content-Encoding"] == "gzip"  # as archived: the browser may try
    assert await raw.read() == site_def.CORRUPT


async def test_service_workers_and_root_relative_requests(served: Any) -> None:
    site, _other, client, ts, _stamp = served
    refused = await client.get(f"/{ts}/{site.base}css/main.css",
                               headers={"Service-Worker": "script"})
    assert refused.status == 403
    page = f"{client.make_url('/')}{ts}/{site.base}about"
    resp = await client.get("/img/a.png?v=1", headers={"Referer": page}, allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (302, f"/{ts}/{site.base}img/a.png?v=1")
    assert (await client.get("/img/a.png")).status == 404  # no referer: nowhere to go


async def test_each_capture_replays_at_its_time_and_revisits_give_the_original(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    site_def.write_history(tmp_path)
    client = await aiohttp_client(make_app(tmp_path))
    url = site_def.HISTORY_URL
    for ts, body in (("2024", site_def.V1), ("20250101", site_def.V2),
                     ("20250601", site_def.V2), ("20250701", site_def.V2), ("2030", site_def.V2)):
        raw = await client.get(f"/{ts}id_/{url}")
        assert (raw.status, await raw.read()) == (200, body), ts
        assert "Set-Cookie" not in raw.headers
    twin = await client.get(f"/2030id_/{site_def.HISTORY_TWIN}")
    assert await twin.read() == site_def.V2
    listing = await (await client.get(f"/*/{url}")).text()
    assert listing.count("id_/") == 0 and len(re.findall(rf"/\d{{14}}/{url}", listing)) == 4
    assert "2025-07-01 00:00:00 UTC" in listing


async def test_server_picks_up_what_a_run_adds(
    tmp_path: Path, aiohttp_client: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr("mirror.replay.serve.RELOAD_EVERY", 0.0)
    client = await aiohttp_client(make_app(tmp_path))  # nothing archived yet
    assert (await client.get(f"/2024/{site_def.HISTORY_URL}")).status == 404
    site_def.write_history(tmp_path)  # a run closes its WARC file and rebuilds the index
    resp = await client.get(f"/2024/{site_def.HISTORY_URL}")
    assert resp.status == 200 and "first version" in await resp.text()


async def test_cli_serve_binds_loopback_and_stops_on_sigterm(tmp_path: Path) -> None:
    site_def.write_history(tmp_path / "archive")
    config = tmp_path / "site.toml"
    config.write_text('[site]\nname = "h"\nstart_urls = ["http://history.test/"]\n'
                      'output_dir = "archive"\n')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "serve", str(config), "--port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        base = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert base, line
        async with ClientSession() as session, session.get(
                f"{base.group()}2024/{site_def.HISTORY_URL}") as resp:
            assert "first version" in await resp.text()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()


def test_cli_serve_on_a_taken_port_is_a_usage_error(tmp_path: Path, capsys: Any) -> None:
    from mirror.cli.main import main

    site_def.write_history(tmp_path / "archive")
    config = tmp_path / "site.toml"
    config.write_text('[site]\nname = "h"\nstart_urls = ["http://history.test/"]\n'
                      'output_dir = "archive"\n')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", str(config), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing.toml")]) == 2
