"""<meta name="robots"> and X-Robots-Tag are obeyed (issue 33): nofollow pages' links are not
followed (their requisites are fetched), noindex is recorded, both counted; a run whose
start pages say nofollow says so in its summary and in the app, naming the setting."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TestSite
from uiproc import UiProcess, mirror_cmd, site_file

from mirror.manifest.reader import ManifestReader
from mirror.model import RobotsCounts
from mirror.run.report import META_ROBOTS_OFF, nofollow_warning
from mirror.web.extract import extract_html
from mirror.web.robotsmeta import header_directives, meta_directives

NOINDEX, NOFOLLOW = "noindex", "nofollow"
BOTH = frozenset({NOINDEX, NOFOLLOW})

# -- the directives, pure --------------------------------------------------------------------


@pytest.mark.parametrize(("metas", "said"), [
    ([("robots", "noindex,nofollow")], BOTH),
    ([("robots", "NoIndex, NoFollow")], BOTH),
    ([("robots", "none")], BOTH),
    ([("robots", "index follow")], frozenset()),
    ([("robots", "all")], frozenset()),
    ([("robots", "noindex"), ("robots", "nofollow")], BOTH),  # two tags add up
    ([("robots", "noarchive, max-snippet:20")], frozenset()),  # for search engines only
    ([("mirror", "nofollow")], frozenset({NOFOLLOW})),  # to this crawler by name
    ([("googlebot", "noindex, nofollow")], frozenset()),  # to another crawler
    ([("description", "nofollow")], frozenset()),
])
def test_meta_robots_directives(metas: list[tuple[str, str]], said: frozenset[str]) -> None:
    assert meta_directives(metas, "mirror") == said


@pytest.mark.parametrize(("value", "said"), [
    ("noindex", frozenset({NOINDEX})),
    ("noindex, nofollow", BOTH),
    ("none", BOTH),
    ("googlebot: nofollow", frozenset()),
    ("mirror: nofollow", frozenset({NOFOLLOW})),
    ("MIRROR: noindex, nofollow", BOTH),
    ("unavailable_after: 25 Jun 2010 15:00:00 PST, noindex", frozenset({NOINDEX})),
    ("googlebot: nofollow\nnoindex", frozenset({NOINDEX})),  # two headers: prefix per header
    ("otherbot: noindex, nofollow, mirror: nofollow", frozenset({NOFOLLOW})),
    ("", frozenset()),
    (None, frozenset()),
])
def test_x_robots_tag_directives(value: str | None, said: frozenset[str]) -> None:
    assert header_directives(value, "mirror") == said


def test_extraction_keeps_the_named_metas() -> None:
    found = extract_html(b'<html><head><meta name="ROBOTS" content="noindex">'
                         b'<meta http-equiv="refresh" content="5"><meta name=generator '
                         b'content="MediaWiki 1.39"></head><body>x</body></html>', "http://h/")
    assert found.metas == (("robots", "noindex"), ("generator", "MediaWiki 1.39"))


@pytest.mark.parametrize(("counts", "said"), [
    (RobotsCounts(pages=1, nofollow=1, start_pages=1, start_nofollow=1), "the start page says"),
    (RobotsCounts(pages=9, nofollow=2, start_pages=2, start_nofollow=2),
     "all 2 start pages say"),
    (RobotsCounts(pages=9, nofollow=5, start_pages=1, nofollow_indexed=5),
     "5 of 9 pages say"),
    (RobotsCounts(pages=10, nofollow=5, start_pages=1, nofollow_indexed=5),
     None),  # half is not most
    # a wiki: most pages are edit and history views that say noindex, nofollow
    (RobotsCounts(pages=900, noindex=750, nofollow=750, start_pages=1), None),
    (RobotsCounts(pages=9, nofollow=2, start_pages=2, start_nofollow=1), None),
    (RobotsCounts(pages=9, noindex=9, start_pages=1), None),  # noindex stops nothing
    (RobotsCounts(pages=1, nofollow=1, start_pages=1, start_nofollow=1, enabled=False), None),
])
def test_the_nofollow_warning(counts: RobotsCounts, said: str | None) -> None:
    warning = nofollow_warning(counts)
    if said is None:
        assert warning is None
    else:
        assert warning is not None and warning.startswith(said + " nofollow")
        assert META_ROBOTS_OFF in warning


# -- a crawl ---------------------------------------------------------------------------------

STYLE = "body { background: url(/bg.png) }"


def robots_site(site: TestSite, meta: str = "", header: str | None = None) -> TestSite:
    """/ links /a (its robots meta or X-Robots-Tag as given) and /c; /a links /b and has an
    image, a stylesheet (with its own image) and a frame; /c says noindex."""
    head = f'<meta name="robots" content="{meta}">' if meta else ""
    site.page("/", '<html><body><a href="/a">a</a> <a href="/c">c</a></body></html>')
    site.page("/a", f'<html><head>{head}<link rel=stylesheet href="/s.css"></head><body>'
                    '<img src="/i.png"><iframe src="/f.html"></iframe>'
                    '<a href="/b">b</a></body></html>',
              headers={"X-Robots-Tag": header} if header else None)
    site.page("/b", "<html><body>b</body></html>")
    site.page("/c", '<html><head><meta name="robots" content="noindex"></head><body>c'
                    "</body></html>")
    site.page("/s.css", STYLE, content_type="text/css")
    site.page("/f.html", "<html><body>frame</body></html>")
    for image in ("/i.png", "/bg.png"):
        site.page(image, b"\x89PNG", content_type="image/png")
    return site


def report_of(c: Any, run: int = 1) -> dict[str, Any]:
    return json.loads((c.archive / "reports" / f"{run}.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("where", ["meta", "header"])
async def test_a_nofollow_page_keeps_its_requisites_not_its_links(
        make_site: Callable[[], Awaitable[TestSite]], crawl: Any, where: str) -> None:
    site = robots_site(await make_site(), **(
        {"meta": "nofollow"} if where == "meta" else {"header": "noindex, nofollow"}))
    c = await crawl([site.base], scope={"robots": False})
    for requisite in ("/s.css", "/i.png", "/bg.png", "/f.html"):
        assert site.count(requisite) == 1, (requisite, site.log)
    assert site.count("/b") == 0, site.log
    assert c.skipped()[site.base + "b"] == "meta-robots"
    report = report_of(c)
    assert report["skipped"]["meta-robots"] == 1
    said = report["meta_robots"]
    assert (said["nofollow"], said["noindex"]) == (1, 2 if where == "header" else 1)
    assert said["warning"] is None  # the start page follows: one page of four says nofollow
    manifest = ManifestReader(c.archive / "manifest.sqlite3")
    try:
        flags = manifest.robots.page_robots(1)
        noindex = manifest.robots.noindex(1)
    finally:
        manifest.close()
    assert (site.base + "a", where == "header", True) in flags
    assert site.base + "c" in noindex
    c.assert_verifies()


async def test_a_link_from_another_page_is_still_followed(
        make_site: Callable[[], Awaitable[TestSite]], crawl: Any) -> None:
    site = robots_site(await make_site(), meta="noindex, nofollow")
    site.page("/c", '<html><body><a href="/b">b again</a></body></html>')
    c = await crawl([site.base], scope={"robots": False})
    assert site.count("/b") == 1
    assert "meta-robots" not in report_of(c)["skipped"]


async def test_meta_robots_false_follows_everything(
        make_site: Callable[[], Awaitable[TestSite]], crawl: Any) -> None:
    site = robots_site(await make_site(), meta="none")
    c = await crawl([site.base], scope={"robots": False, "meta_robots": False})
    assert site.count("/b") == 1
    report = report_of(c)
    assert "meta-robots" not in report["skipped"]
    assert report["meta_robots"]["noindex"] == report["meta_robots"]["nofollow"] == 0
    assert report["meta_robots"]["enabled"] is False


async def test_most_pages_nofollow_but_not_noindex_is_told(
        make_site: Callable[[], Awaitable[TestSite]], crawl: Any) -> None:
    site = await make_site()
    site.page("/", "".join(f'<a href="/p{i}">{i}</a>' for i in range(3))
              + '<a href="/edit">edit</a>')
    for i in range(3):
        site.page(f"/p{i}", '<html><head><meta name="robots" content="index, nofollow">'
                            f'</head><body><a href="/more{i}">more</a></body></html>')
    site.page("/edit", '<html><head><meta name="robots" content="noindex,nofollow"></head>'
                       "<body>edit</body></html>")
    said = report_of(await crawl([site.base], scope={"robots": False}))["meta_robots"]
    assert (said["pages"], said["nofollow"], said["nofollow_indexed"]) == (5, 4, 3)
    assert (said["noindex"], said["start_nofollow"]) == (1, 0)
    assert said["warning"].startswith("3 of 5 pages say nofollow"), said
    assert not any(site.count(f"/more{i}") for i in range(3))


# -- what a person is told -------------------------------------------------------------------


async def mirror_run(path: Path) -> tuple[int, str]:
    """`mirror run -q` as cron runs it: (exit code, what it printed on stdout)."""
    return await mirror_cmd("run", "-q", str(path))


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def test_a_nofollow_start_page_is_explained_in_the_summary_and_the_app(
        make_site: Callable[[], Awaitable[TestSite]], tmp_path: Path) -> None:
    site = await make_site()
    site.page("/", '<html><head><meta name="robots" content="noindex,nofollow"></head><body>'
                   '<a href="/a">a</a><a href="/b">b</a><img src="/i.png"></body></html>')
    site.page("/i.png", b"\x89PNG", content_type="image/png")
    library = tmp_path / "library"
    library.mkdir()
    path = site_file(library, "shy", site.base)
    code, out = await mirror_run(path)
    assert code == 0, out
    assert site.count("/a") == site.count("/b") == 0 and site.count("/i.png") == 1
    lines = out.splitlines()
    assert lines[1].startswith("  NOTE: the start page says nofollow"), out
    assert "[scope] meta_robots = false" in lines[1], out
    ui = UiProcess.start(library)
    try:
        async with ui.session() as session:
            async with session.get(ui.base) as r:
                home = await r.text()
            async with session.get(f"{ui.base}site/shy/runs/1") as r:
                report = text_of(await r.text())
    finally:
        ui.stop()
    row = re.search(r'<tr id="site-shy".*?</tr>', home, re.S)
    assert row, home
    assert "the start page says nofollow" in text_of(row[0]), row[0]
    assert "set [scope] meta_robots = false in the site file" in text_of(row[0])
    assert 'href="/site/shy/settings/file">edit the site file' in row[0]
    assert "note: the start page says nofollow" in report, report
    assert "1 noindex · 1 nofollow" in report, report
    assert "meta-robots: 2" in report, report

    # `mirror explain` says why /a was not fetched, and where it is linked from
    code, out = await mirror_cmd("explain", str(path), site.base + "a", "--offline")
    assert code == 0, out
    assert "in run 1             not fetched: rule meta-robots: the only pages" in out, out
    assert f"linked from {site.base} (nofollow)" in out, out

    # the setting the note names archives the site
    path.write_text(path.read_text().replace("robots = false",
                                             "robots = false\nmeta_robots = false"))
    code, out = await mirror_run(path)
    assert code == 0 and "NOTE" not in out, out
    assert site.count("/a") == 1
