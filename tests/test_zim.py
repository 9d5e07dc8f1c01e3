"""`mirror export --zim`: a ZIM that zimcheck passes and kiwix-serve serves, with the newest
capture of each page, its requisites, redirects collapsed, links kept inside, metadata and a
full-text index of the crawl's page text."""

from __future__ import annotations

import io
import posixpath
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from aiohttp import ClientSession
from bs4 import BeautifulSoup
from conftest import crawl_twice, free_port, server_process

from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex
from mirror.replay.exportpath import export_path

NEEDS = "ZIM export needs libzim and Pillow: pip install 'mirror[zim]'"
libzim = pytest.importorskip("libzim", reason=NEEDS)
Image = pytest.importorskip("PIL.Image", reason=NEEDS)
from libzim.reader import Archive  # noqa: E402
from libzim.search import Query, Searcher  # noqa: E402

from mirror.replay.zim import (  # noqa: E402
    HomeFacts,
    clip,
    home_facts,
    illustration,
    language_code,
    zim_meta,
)

RED = (200, 30, 40)


def png(colour: tuple[int, int, int], size: int = 32) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(out, format="PNG")
    return out.getvalue()


def page(title: str, body: str, head: str = "", lang: str = "fr") -> str:
    return (f'<!doctype html><html lang="{lang}"><head><title>{title}</title>{head}</head>'
            f"<body>{body}</body></html>")


HOME = page(
    "Les Jardins du fleuve",
    '<h1>Bienvenue</h1><img src="/pic.png" srcset="/pic.png 1x, /pic2.png 2x" alt="">'
    '<a href="/about">about</a> <a href="/old">old address</a> <a href="/missing">gone</a> '
    '<a href="/same">same</a> <a href="http://127.0.0.2:9/elsewhere">elsewhere</a>'
    '<a href="/corrupt">says gzip, is not</a>'
    "<script>var scriptonlyword = 1;</script><template>templateonlyword</template>",
    '<meta name="description" content="Twenty-four plots between the river and the railway">'
    '<link rel="stylesheet" href="/style.css"><link rel="icon" href="/icon.png" sizes="32x32">',
)


def about(word: str) -> str:
    return page("About the plots", f"<p>This season we grow {word} by the shed.</p>"
                '<a href="/">home</a>')


def serve(site: Any, word: str) -> None:
    site.page("/", HOME)
    site.page("/about", about(word))
    site.page("/same", page("Unchanged", "<p>nothing new here, zucchiniword</p>"))
    site.page("/corrupt", b"<p>plain</p>", headers={"Content-Encoding": "gzip"})
    site.page("/style.css", "body{background:url(bg.png)}", content_type="text/css")
    for path, colour in (("/pic.png", (0, 120, 0)), ("/pic2.png", (0, 0, 120)),
                         ("/bg.png", (240, 240, 200)), ("/icon.png", RED)):
        site.page(path, png(colour), content_type="image/png")
    site.redirect("/old", "/older")
    site.redirect("/older", "/about", 302)


@pytest.fixture
async def archive(make_site: Any, crawl: Any) -> Any:
    """The site crawled twice: /about says "rutabaga" in run 1 and "kohlrabi" in run 2."""
    site = await make_site()
    first, second = await crawl_twice(crawl, site.base, lambda: serve(site, "rutabaga"),
                                      lambda: serve(site, "kohlrabi"))
    return site, first, second


def export(done: Any, out: Path, *extra: str) -> None:
    assert main(["export", str(done.root / "site.toml"), "--zim", str(out), *extra]) == 0


def entries(zim: Archive) -> dict[str, Any]:
    return {zim._get_entry_by_id(i).path: zim._get_entry_by_id(i)
            for i in range(zim.all_entry_count)}


def content(zim: Archive, path: str) -> bytes:
    return bytes(zim.get_entry_by_path(path).get_item().content)


def found(zim: Archive, words: str) -> list[str]:
    search = Searcher(zim).search(Query().set_query(words))
    return list(search.getResults(0, 20))


def references(html: bytes) -> list[tuple[str, str]]:
    """(attribute, value) of every reference an HTML page makes."""
    soup = BeautifulSoup(html, "html.parser")
    out = []
    for tag in soup.find_all(True):
        for attr in ("href", "src", "action", "poster", "data"):
            if tag.get(attr):
                out.append((attr, tag[attr]))
        if tag.get("srcset"):
            out += [("srcset", part.split()[0]) for part in tag["srcset"].split(",")]
    return out


async def test_the_zim_holds_the_newest_site_with_links_inside(archive: Any, tmp_path: Path
                                                                ) -> None:
    site, _, done = archive
    out = tmp_path / "out" / "garden.zim"
    export(done, out)
    zim = Archive(out)
    at = {url: export_path(site.base + url, mime) for url, mime in (
        ("", "text/html"), ("about", "text/html"), ("same", "text/html"),
        ("style.css", "text/css"), ("pic.png", "image/png"), ("bg.png", "image/png"),
        ("old", "text/html"), ("older", "text/html"), ("missing", "text/html"))}
    everything = entries(zim)
    assert zim.main_entry.get_item().path == at[""]
    assert at["missing"] not in everything  # an error capture is left out
    # a redirect chain is collapsed to where it ends
    for hop in ("old", "older"):
        entry = everything[at[hop]]
        assert entry.is_redirect and entry.get_redirect_entry().path == at["about"]
    # the newest capture of each page; a revisit read through to its payload
    assert b"kohlrabi" in content(zim, at["about"]) and b"rutabaga" not in content(zim, at["about"])
    assert b"zucchiniword" in content(zim, at["same"])
    assert content(zim, at["pic.png"]) == png((0, 120, 0))
    assert zim.get_entry_by_path(at["about"]).get_item().title == "About the plots"
    assert zim.get_entry_by_path(at["style.css"]).get_item().mimetype == "text/css"
    # every reference of every page opens an entry of the ZIM; nothing names the live site
    html_paths = [p for p, e in everything.items()
                  if not e.is_redirect and e.get_item().mimetype == "text/html"]
    assert len(html_paths) == 4
    corrupt = content(zim, export_path(site.base + "corrupt", "text/html"))
    assert b"could not be decoded" in corrupt  # a notice, so that links to it still open
    host = urlsplit(site.base).netloc
    for path in html_paths:
        body = content(zim, path)
        live = [(tag.name, attr) for tag in BeautifulSoup(body, "html.parser").find_all(True)
                for attr, value in tag.attrs.items()
                if not attr.startswith("data-mirror-") and host in str(value)]
        assert live == [], path
        for attr, ref in references(body):
            assert not re.match(r"[a-z]+:", ref), (path, attr, ref)
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), unquote(ref)))
            assert target in everything, (path, attr, ref)
    home = BeautifulSoup(content(zim, at[""]), "html.parser")
    gone = [a for a in home.find_all("a") if "missing" in a.get("data-mirror-href", "")]
    assert gone and not gone[0].get("href")  # not archived: inert, never the live URL
    css = content(zim, at["style.css"]).decode()
    assert f"url({posixpath.basename(at['bg.png'])})" in css.replace('"', "")


async def test_metadata_illustration_and_full_text_search(archive: Any, tmp_path: Path
                                                          ) -> None:
    site, _, done = archive
    out = tmp_path / "garden.zim"
    export(done, out)
    zim = Archive(out)
    meta = {key: bytes(zim.get_metadata(key)).decode() for key in zim.metadata_keys
            if not key.startswith("Illustration")}
    host = urlsplit(site.base).netloc
    assert meta["Title"] == "Les Jardins du fleuve" and meta["Language"] == "fra"
    assert meta["Description"] == "Twenty-four plots between the river and the railway"
    assert meta["Creator"] == host and meta["Source"] == site.base
    assert meta["Date"] == datetime.now(UTC).strftime("%Y-%m-%d")
    assert re.fullmatch(r"[a-z0-9_-]+_fr_all", meta["Name"]) and meta["Publisher"]
    assert "_ftindex:yes" in meta["Tags"].split(";")
    picture = Image.open(io.BytesIO(bytes(zim.get_metadata("Illustration_48x48@1"))))
    assert picture.size == (48, 48) and picture.format == "PNG"
    assert picture.convert("RGB").getpixel((24, 24)) == RED  # made from the site's icon
    # the index holds the crawl's text of each page: body words, not scripts or templates
    about = export_path(site.base + "about", "text/html")
    assert found(zim, "kohlrabi") == [about] and found(zim, "rutabaga") == []
    assert found(zim, "scriptonlyword") == [] and found(zim, "templateonlyword") == []
    assert zim.has_title_index and zim.has_fulltext_index


async def test_at_exports_the_site_as_it_was(archive: Any, tmp_path: Path) -> None:
    site, _, done = archive
    first_run = CaptureIndex.load(done.archive).captures_of(site.base + "about")[0].timestamp
    out = tmp_path / "then.zim"
    export(done, out, "--at", first_run, "--title", "A very long title for a small garden",
           "--language", "en-GB", "--publisher", "Test Archive")
    zim = Archive(out)
    about = export_path(site.base + "about", "text/html")
    assert b"rutabaga" in content(zim, about) and found(zim, "rutabaga") == [about]
    meta = {k: bytes(zim.get_metadata(k)).decode() for k in ("Title", "Language", "Publisher")}
    assert meta == {"Title": "A very long title for a small…", "Language": "eng",
                    "Publisher": "Test Archive"}


async def test_zimcheck_passes(archive: Any, tmp_path: Path) -> None:
    zimcheck = shutil.which("zimcheck")
    if zimcheck is None:
        pytest.skip("zimcheck not installed (Debian zim-tools; .ci/run installs it)")
    _, _, done = archive
    out = tmp_path / "garden.zim"
    export(done, out)
    check = subprocess.run([zimcheck, "-A", str(out)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Overall Test Status: Pass" in check.stdout
    assert "[ERROR]" not in check.stdout


@asynccontextmanager
async def kiwix_serve(zim: Path) -> AsyncIterator[str]:
    exe = shutil.which("kiwix-serve")
    if exe is None:
        pytest.skip("kiwix-serve not installed (Debian kiwix-tools; .ci/run installs it)")
    port = free_port()
    async with server_process([exe, "--address=127.0.0.1", f"--port={port}", str(zim)],
                              f"http://127.0.0.1:{port}/", start_seconds=20) as base:
        yield base


async def test_kiwix_serve_serves_pages_requisites_redirects_and_search(
        archive: Any, tmp_path: Path) -> None:
    site, _, done = archive
    out = tmp_path / "garden.zim"
    export(done, out)
    book = "garden"  # kiwix-serve 3.3 names a book after its file
    async with kiwix_serve(out) as base, ClientSession() as http:
        async with http.get(f"{base}{book}/") as resp:  # the main page
            assert resp.status == 200
            home = BeautifulSoup(await resp.read(), "html.parser")
            assert home.title.string == "Les Jardins du fleuve"
            page_url = str(resp.url)
        assert page_url.endswith(export_path(site.base, "text/html"))
        refs = dict(references(str(home).encode()))
        for attr, want in (("src", png((0, 120, 0))), ("href", None)):
            ref = refs[attr] if attr == "src" else next(
                h for a, h in references(str(home).encode()) if h.endswith(".css"))
            async with http.get(posixpath.join(posixpath.dirname(page_url), ref)) as resp:
                assert resp.status == 200, ref
                body = await resp.read()
                if want is not None:
                    assert resp.content_type == "image/png" and body == want
                else:
                    assert resp.content_type == "text/css" and b"url(" in body
        old = export_path(site.base + "old", "text/html")
        async with http.get(f"{base}{book}/{old}") as resp:  # a redirect, followed
            assert resp.status == 200 and "kohlrabi" in await resp.text()
            assert str(resp.url).endswith(export_path(site.base + "about", "text/html"))
            assert len(resp.history) == 1  # the chain was collapsed into one redirect
        async with http.get(f"{base}search", params={"content": book,
                                                      "pattern": "kohlrabi"}) as resp:
            assert resp.status == 200
            results = BeautifulSoup(await resp.read(), "html.parser").select(".results a")
            assert [a["href"] for a in results] == [
                f"/{book}/{export_path(site.base + 'about', 'text/html')}"]


def test_home_facts_pick_title_description_language_and_the_biggest_icon() -> None:
    body = (b'<html lang="pt-BR"><head><base href="/assets/"><title> Casa \n da  horta</title>'
            b'<meta name="description" content="  Uma horta  comunitaria ">'
            b'<link rel="icon" href="small.ico"><link rel="icon" href="v.svg" type="image/svg+xml">'
            b'<link rel="apple-touch-icon" href="touch.png">'
            b'<link rel="icon" href="big.png" sizes="192x192"><link rel="stylesheet" href="s.css">'
            b"</head><body></body></html>")
    facts = home_facts(body, "http://h.test/x/", "text/html")
    assert facts == HomeFacts("Casa da horta", "Uma horta comunitaria", "pt-BR", (
        "http://h.test/assets/big.png", "http://h.test/assets/touch.png",
        "http://h.test/assets/small.ico"))
    assert home_facts(b"no markup", "http://h.test/", "text/html") == HomeFacts()


def test_language_codes_and_clipping() -> None:
    assert [language_code(t) for t in ("en", "fr-CA", "deu", "zh-Hant", "", None, "xx", "und")
            ] == ["eng", "fra", "deu", "zho", None, None, None, None]
    assert clip("short", 30) == "short"
    assert clip("Twenty-four plots between the river and the railway", 30) == \
        "Twenty-four plots between the…"
    assert len(clip("x" * 100, 30)) == 30


def test_metadata_defaults_and_options() -> None:
    meta = zim_meta("my-site", "https://www.example.org/start", HomeFacts(), today="2026-01-02")
    assert (meta.name, meta.title, meta.language, meta.creator, meta.publisher, meta.date) == (
        "my-site_en_all", "my-site", "eng", "www.example.org", "mirror", "2026-01-02")
    assert meta.description == "Offline copy of www.example.org, archived by mirror"
    with pytest.raises(Exception, match="not a language code"):
        zim_meta("s", "https://h.test/", HomeFacts(), language="nonsense-language")


def test_illustration_from_an_icon_or_drawn() -> None:
    ico = io.BytesIO()
    Image.new("RGB", (64, 64), RED).save(ico, format="ICO", sizes=[(64, 64)])
    for icon in (png(RED, 16), ico.getvalue()):
        picture = Image.open(io.BytesIO(illustration(icon, "h.test")))
        assert picture.size == (48, 48) and picture.convert("RGB").getpixel((5, 5)) == RED
    drawn = Image.open(io.BytesIO(illustration(b"<svg/>", "www.garden.test"))).convert("RGB")
    assert drawn.size == (48, 48)
    assert len(drawn.getcolors(48 * 48)) > 1  # a letter on a background, not a blank square
    again = Image.open(io.BytesIO(illustration(None, "garden.test"))).convert("RGB")
    assert again.tobytes() == drawn.tobytes()  # the colour comes from the host


def test_cli_errors_are_specific(tmp_path: Path, capsys: Any) -> None:
    from conftest import write_config

    cfg = write_config(tmp_path, ["http://127.0.0.1:9/"])
    assert main(["export", str(cfg), "--title", "x", "--wacz", str(tmp_path / "a.wacz")]) == 2
    assert "--title goes with --zim FILE" in capsys.readouterr().err
    assert main(["export", str(cfg), "--at", "2024", "--wacz", str(tmp_path / "a.wacz")]) == 2
    assert "--at goes with --to DIR or --zim FILE" in capsys.readouterr().err
