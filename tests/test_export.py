"""`mirror export --to`: safe, injective paths (O4) and a folder that works from file:// (O3)."""

from __future__ import annotations

import posixpath
import re
import shutil
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import offline_site as site_def
import pytest
from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex
from mirror.replay.export import export_folder
from mirror.replay.exportpath import MAX_NAME, export_path, relative_ref

MIMES = ["text/html", "text/css", "image/png", "application/octet-stream", "", "text/plain"]
WINDOWS_DEVICES = re.compile(r"(con|prn|aux|nul|com\d|lpt\d)(\..*)?", re.I)
NAME_CHARS = re.compile(r"[a-z0-9\-_.=~^]+")

HOSTILE = [
    "http://h.test/..", "http://h.test/../../etc/passwd", "http://h.test/%2e%2e/%2E%2E/x",
    "http://h.test/a%2fb", "http://h.test/a/b", "http://h.test/a%2Fb", "http://h.test/a\x00b",
    "http://h.test/CON", "http://h.test/con", "http://h.test/aux.txt", "http://h.test/Aux.TXT",
    "http://h.test/nul.tar.gz", "http://h.test/com1", "http://h.test/LPT9.html",
    "http://h.test/" + "a" * 5000, "http://h.test/" + "a" * 4999 + "b",
    "http://h.test/" + "/".join(["x" * 300] * 20), "http://h.test/x.", "http://h.test/x ",
    "http://h.test/.hidden", "http://h.test/index.html", "http://h.test/", "http://h.test",
    "http://h.test/?", "http://h.test/?a=1", "http://h.test/about", "http://h.test/about.html",
    "http://h.test/about=.html", "http://h.test/A", "http://h.test/a", "http://h.test/%41",
    "http://h.test/caf%C3%A9", "http://h.test/café", "http://h.test/cafe\u0301",
    "https://h.test/", "http://h.test:8080/", "http://h.test_8080/", "http://[::1]:80/x",
    "http://h.test/a/", "http://h.test/a/index.html", "http://h.test/a?b/c", "not a url at all",
    "http://h.test/a\\b", "http://h.test/a:b", "http://h.test/a*b?c|d", "http://h.test/~u",
    "http://h.test/0?.", "http://h.test/0?=2e", "http://h.test/x.?y.",
]


def check_safe(path: str) -> None:
    assert not path.startswith("/") and "\\" not in path and "\x00" not in path
    segments = path.split("/")
    for seg in segments:
        assert seg not in ("", ".", "..") and NAME_CHARS.fullmatch(seg), seg
        assert len(seg.encode()) <= 255 and not seg.endswith((".", " ")), seg
        assert not WINDOWS_DEVICES.fullmatch(seg), seg
    assert "." in segments[-1]  # every file name has a dot ...
    assert all("." not in seg for seg in segments[1:-1])  # ... and no folder name has one
    assert posixpath.normpath(posixpath.join("/root", path)).startswith("/root/")
    assert len(path) <= 1000 + 2 * MAX_NAME


def folded(path: str) -> str:
    """How a case-insensitive, Unicode-normalising file system sees a path."""
    return unicodedata.normalize("NFD", path).casefold()


def assert_injective(items: list[tuple[str, str]]) -> None:
    paths: dict[str, str] = {}
    for url, mime in items:
        path = folded(export_path(url, mime))
        assert paths.setdefault(path, url) == url, (url, paths[path])
    files = set(paths)
    for path in files:  # no file is where another path needs a folder
        parts = path.split("/")
        assert not any("/".join(parts[:i]) in files for i in range(1, len(parts)))


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_urls_stay_inside_the_root(url: str) -> None:
    for mime in MIMES:
        check_safe(export_path(url, mime))


def test_hostile_urls_never_share_a_path() -> None:
    assert_injective([(url, "text/html") for url in HOSTILE])
    assert_injective([(url, MIMES[i % len(MIMES)]) for i, url in enumerate(HOSTILE)])


def test_common_urls_get_readable_names() -> None:
    assert export_path("http://h.test/", "text/html") == "http_h.test/index.html"
    assert export_path("https://h.test:8443/b/", "text/html") == "https_h.test_8443/b/index.html"
    assert export_path("http://h.test/about.html", "text/html") == "http_h.test/about.html"
    assert export_path("http://h.test/about", "text/html") == "http_h.test/about=.html"
    assert export_path("http://h.test/s.css?v=2", "text/css") == "http_h.test/s.css=qv=3d2=.css"
    assert export_path("http://h.test/img/A.png", "image/png") == "http_h.test/img/^a.png"
    assert relative_ref("h/a/b.html", "h/c/d=.html") == "../c/d=.html"
    assert relative_ref("h/index.html", "h/index.html") == "index.html"


urls = st.builds(
    lambda scheme, host, path, query: f"{scheme}://{host}{path}{query}",
    st.sampled_from(["http", "https", "HTTP"]),
    st.sampled_from(["h.test", "H.test", "h.test:8080", "xn--caf-dma.test", "h.test_1"]),
    st.lists(st.text(min_size=0, max_size=12), max_size=4).map(lambda s: "/" + "/".join(s)),
    st.one_of(st.just(""), st.text(max_size=10).map(lambda q: "?" + q)),
) | st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(urls, st.sampled_from(MIMES)), min_size=2, max_size=6,
                unique_by=lambda t: t[0]))
def test_paths_are_safe_and_never_collide(items: list[tuple[str, str]]) -> None:
    for url, mime in items:
        check_safe(export_path(url, mime))
    assert_injective(items)


@settings(max_examples=200, deadline=None)
@given(urls, urls, st.sampled_from(MIMES))
def test_unicode_and_case_variants_get_distinct_paths(a: str, b: str, mime: str) -> None:
    for u, v in ((a, b), (a, a.upper()), (a, unicodedata.normalize("NFD", a)),
                 (a, unicodedata.normalize("NFC", a))):
        if u != v:
            assert folded(export_path(u, mime)) != folded(export_path(v, mime))


# --- exporting a crawled site -------------------------------------------------------------

def local_refs(page: Path) -> list[tuple[str, str]]:
    """(attribute, reference) of every reference in an exported HTML or CSS file."""
    text = page.read_text("utf-8")
    if page.suffix == ".css":
        return [("url", m) for m in re.findall(r'url\("([^"]*)"\)', text)]
    soup = BeautifulSoup(text, "html.parser", multi_valued_attributes=None)
    refs = [(k, v) for tag in soup.find_all(True) for k, v in tag.attrs.items()
            if k in ("href", "src", "action", "poster")]
    refs += [("srcset", c.split()[0]) for t in soup.find_all(srcset=True)
             for c in t["srcset"].split(",")]
    refs += [("url", m) for m in re.findall(r'url\("([^"]*)"\)', text)]
    return refs


def assert_no_broken_links(root: Path) -> int:
    checked = 0
    for page in [*root.rglob("*.html"), *root.rglob("*.css")]:
        for attr, ref in local_refs(page):
            if ref.startswith(("#", "mailto:", "about:invalid")) or \
                    ref.lower().startswith(("javascript:", "data:", "tel:")):
                continue  # not a file: nothing to break (a wiki's "javascript:print();")
            assert "://" not in ref, (page, attr, ref)
            target = (page.parent / unquote(ref.partition("#")[0])).resolve()
            assert target.is_file() and target.is_relative_to(root.resolve()), (page, ref)
            checked += 1
    return checked


def site_references_outside_data_attributes(root: Path, base: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            text = re.sub(r'data-mirror-[a-z-]+="[^"]*"', "", path.read_text("utf-8", "replace"))
            found += [f"{path}: {m}" for m in re.findall(re.escape(base) + r"\S*", text)]
    return found


async def test_export_opens_from_files_with_working_and_inert_links(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    site, other, done = await site_def.crawl_site(make_site, crawl)
    out = tmp_path / "export"
    result = export_folder(CaptureIndex.load(done.archive), out)
    assert (result.unreadable, result.redirects) == (1, 1)  # /corrupt: a notice instead
    host = out / f"http_127.0.0.1_{site.base.rsplit(':', 1)[1].strip('/')}"
    assert (host / "index.html").is_file() and (host / "about=.html").is_file()
    assert (host / "img" / "a2.png").read_bytes() == site_def.png(*site_def.IMAGES["a2.png"])
    assert assert_no_broken_links(out) > 15
    assert site_references_outside_data_attributes(out, site.base) == []
    home = BeautifulSoup((host / "index.html").read_bytes(), "html.parser")
    assert home.find(id="about")["href"] == "about=.html"
    assert home.find(id="old")["href"] == "about=.html"  # straight past the redirect
    elsewhere = home.find(id="elsewhere")
    assert "href" not in elsewhere.attrs and elsewhere["data-mirror-href"] == other.base + "page"
    assert "src" not in home.find(id="gone").attrs
    assert home.find(id="a")["srcset"] == "img/a.png 1x, img/a2.png 2x"
    redirect = (host / "old=.html").read_text()
    assert 'http-equiv="refresh" content="0; url=about=.html"' in redirect
    contents = (out / "index.html").read_text()
    assert "Home page" in contents and "About us" in contents
    assert other.log == []


async def test_export_as_of_an_earlier_run_and_from_an_interrupted_archive(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    site_def.write_history(tmp_path / "hist")
    archive = CaptureIndex.load(tmp_path / "hist")
    old = export_folder(archive, tmp_path / "old", at="2024")
    page = next((tmp_path / "old").rglob("page=.html"))
    assert "first version" in page.read_text() and old.files == 1
    export_folder(archive, tmp_path / "new")
    assert "second version" in next((tmp_path / "new").rglob("page=.html")).read_text()
    assert "second version" in next((tmp_path / "new").rglob("twin=.html")).read_text()
    # the same WARC, as a killed run leaves it: still .open, not in the index
    cut = tmp_path / "cut"
    (cut / "warc").mkdir(parents=True)
    warc = next((tmp_path / "hist" / "warc").iterdir())
    shutil.copy(warc, cut / "warc" / (warc.name + ".open"))
    with open(cut / "warc" / (warc.name + ".open"), "ab") as f:
        f.write(b"\x1f\x8b\x08\x00torn")
    export_folder(CaptureIndex.load(cut), tmp_path / "from-cut")
    assert "second version" in next((tmp_path / "from-cut").rglob("page=.html")).read_text()


def test_cli_export_refuses_a_folder_that_is_not_an_export(tmp_path: Path, capsys: Any) -> None:
    site_def.write_history(tmp_path / "archive")
    config = tmp_path / "site.toml"
    config.write_text('[site]\nname = "h"\nstart_urls = ["http://history.test/"]\n'
                      'output_dir = "archive"\n')
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(["export", str(config), "--to", str(tmp_path / "busy")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["export", str(config)]) == 2
    assert main(["export", str(config), "--to", str(tmp_path / "x"), "--at", "2024-01"]) == 2
    assert main(["export", str(config), "--to", str(tmp_path / "x"), "--at", "2025"]) == 0
    assert "exported 2 files" in capsys.readouterr().out
    assert main(["export", str(config), "--to", str(tmp_path / "x")]) == 0  # again: allowed


async def test_a_run_of_revisits_exports_the_same_files(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    """Run 2 finds nothing changed, so its captures are revisits: exported, they must give
    back the very bytes of run 1."""
    site, other, done = await site_def.crawl_site(make_site, crawl)
    first = export_folder(CaptureIndex.load(done.archive), tmp_path / "first")
    await crawl([site.base], scope={"exclude": [re.escape(other.base)]})
    archive = CaptureIndex.load(done.archive)
    assert sum(c.is_revisit for c in archive.latest()) >= 10
    second = export_folder(archive, tmp_path / "second")
    assert (first.files, first.unreadable, second.unreadable) == (second.files, 1, 1)
    files = [p for p in (tmp_path / "first").glob("http_*/**/*") if p.is_file()]
    assert len(files) == first.files
    for path in files:
        twin = tmp_path / "second" / path.relative_to(tmp_path / "first")
        assert twin.read_bytes() == path.read_bytes(), path
