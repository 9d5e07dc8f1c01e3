"""Pages a script builds: the report names the HTML pages that are only a shell."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mirror.web.extract import browser_hint, extract_html

ARTICLE = "<p>" + "A real paragraph of text that a reader came for. " * 8 + "</p>"


@pytest.mark.parametrize(("html", "hint"), [
    ('<html><head><script src="/app.js"></script></head><body><div id="root"></div>'
     "</body></html>", "an empty app root (root) that scripts fill"),
    ('<html><body><div id="__next"></div><script src="/_next/main.js"></script></body></html>',
     "an empty app root (__next) that scripts fill"),
    ("<html><body><app-root></app-root><script src=main.js></script></body></html>",
     "an empty app root (app-root) that scripts fill"),
    ("<html><body><noscript>You need to enable JavaScript to run this app.</noscript>"
     '<div id="main"></div></body></html>', "its <noscript> asks for JavaScript"),
    ('<html><body><h1>Hi</h1><script>render()</script></body></html>',
     "2 characters of text and 1 script"),
    # real pages
    (f"<html><body><h1>Title</h1>{ARTICLE}<script src=a.js></script></body></html>", None),
    ('<html><body><div id="root"><p>Server-rendered text.</p></div>'
     f"{ARTICLE}<script src=hydrate.js></script></body></html>", None),
    ("<html><body><p>Short page, no scripts.</p></body></html>", None),
    ('<html><body><div id="root"></div></body></html>', None),  # nothing would fill it
    (f"<html><body>{ARTICLE}<noscript><img src=pixel.gif></noscript></body></html>", None),
])
def test_a_shell_is_told_from_a_page(html: str, hint: str | None) -> None:
    assert extract_html(html.encode(), "https://example.com/").needs_browser == hint


def test_browser_hint_table() -> None:
    assert browser_hint(0, 0, None, "") is None
    assert browser_hint(500, 3, None, "") is None
    assert browser_hint(199, 1, None, "") == "199 characters of text and 1 script"
    assert browser_hint(5000, 1, None, "Please turn on JavaScript") is not None


async def test_the_report_lists_pages_that_may_need_a_browser(make_site: Any,
                                                              crawl: Any) -> None:
    site = await make_site()
    site.page("/", f'<html><body>{ARTICLE}<a href="/app">app</a><a href="/doc">doc</a>'
                   "</body></html>")
    site.page("/app", '<html><body><div id="root"></div><script src="/app.js"></script>'
                      "</body></html>")
    site.page("/doc", f"<html><body><h1>Doc</h1>{ARTICLE}</body></html>")
    site.page("/app.js", "document.getElementById('root').textContent = 'hi'",
              content_type="text/javascript")
    c = await crawl([site.base], browser={"mode": "off"})  # auto would load it in one
    report = json.loads((c.archive / "reports" / "1.json").read_text())
    assert report["needs_browser"] == [
        {"url": site.base + "app", "reason": "an empty app root (root) that scripts fill"}]
    assert report["browser"]["needing"] == (
        '1 page may need a browser to archive (scripts build them); [browser] mode = "auto" '
        "would load them in one")
