"""The SPA fixture (tests/spasite.py) seen by an HTTP-only crawl: every app page it can
find is flagged as needing a browser, no plain page is, and none of the content scripts
would fetch is archived."""

from __future__ import annotations

import json
from typing import Any

import spasite


async def test_an_http_only_run_finds_and_flags_the_app_pages(crawl: Any) -> None:
    with spasite.serve(plain=4, apps=10) as site:
        c = await crawl([site.base], crawl={"workers": 2, "parse_processes": 0},
                        browser={"mode": "off"})  # HTTP only
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    flagged = {r["url"].removeprefix(site.base.rstrip("/")) for r in report["needs_browser"]}
    assert flagged == set(site.linked_app_paths())
    done = {u.removeprefix(site.base.rstrip("/")) for u, s in c.states().items() if s == "done"}
    assert set(site.plain_paths()) | flagged <= done
    # without scripts, nothing an app fetches is seen: no JSON, no route, no image
    assert not [p for p in site.counts() if p.startswith(("/api/", "/img/", "/private/"))]
    assert not set(site.app_paths()) - set(site.linked_app_paths()) & done
    assert site.posts() == 0


def test_each_app_page_has_words_of_its_own() -> None:
    site = spasite.SpaSite(plain=2, apps=10)
    words = [w for p in site.app_paths() for w in site.words(p)]
    assert len(words) == len(set(words))
    assert {site.kind(i) for i in range(10)} == set(spasite.KINDS)
