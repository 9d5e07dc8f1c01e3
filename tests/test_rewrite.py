"""Link rewriting of HTML and CSS (pure functions, no server)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from mirror.web.rewrite import (
    INERT_CSS_URL,
    map_reference,
    rewrite_css,
    rewrite_css_bytes,
    rewrite_html,
)

BASE = "http://site.test/dir/page.html"


def serve_map(url: str) -> str | None:
    """Like replay: every http(s) URL into the server, except what was 'not archived'."""
    return None if "gone" in url else "/T/" + url


def rewrite(markup: str, mapper=serve_map, **kw) -> BeautifulSoup:  # type: ignore[no-untyped-def]
    page = rewrite_html(markup.encode(), BASE, "text/html; charset=utf-8", mapper, **kw)
    return BeautifulSoup(page.body, "html.parser", multi_valued_attributes=None)


@pytest.mark.parametrize("ref, expected", [
    ("a.png", "/T/http://site.test/dir/a.png"),
    ("/a.png", "/T/http://site.test/a.png"),
    ("//cdn.test/x.css", "/T/http://cdn.test/x.css"),
    ("../up?q=1#frag", "/T/http://site.test/up?q=1#frag"),
    ("https://other.test/", "/T/https://other.test/"),
    ("#section", "#section"),
    ("", ""),
    ("mailto:a@b.test", "mailto:a@b.test"),
    ("javascript:void(0)", "javascript:void(0)"),
    ("data:image/png;base64,AAAA", "data:image/png;base64,AAAA"),
    ("gone.png", None),
])
def test_map_reference(ref: str, expected: str | None) -> None:
    assert map_reference(BASE, ref, serve_map) == expected


def test_css_references_rewritten_everything_else_kept() -> None:
    css = ("@import 'a.css';\n@import url(b.css) screen;\n"
           "x { background: url( c.png ) , url(\"d\\\".png\"); }\n"
           "/* url(comment.png) */ y { content: 'url(string.png)' }\n"
           "z { background-image: image-set('e.png' 1x, url(f.png) 2x); }\n"
           "w { background: url(gone.png) } v { background: url(data:image/gif;base64,R0) }")
    out = rewrite_css(css, BASE, serve_map)
    for name in ("a.css", "b.css", "c.png", 'd".png', "e.png", "f.png"):
        escaped = name.replace('"', '\\"')
        assert f'"/T/http://site.test/dir/{escaped}"' in out, name
    assert "/* url(comment.png) */" in out and "'url(string.png)'" in out
    assert f'url("{INERT_CSS_URL}")' in out and "gone" not in out
    assert "url(data:image/gif;base64,R0)" in out
    assert out.count("@import") == 2 and " screen;" in out


def test_stylesheet_bytes_are_reencoded_as_utf8() -> None:
    body = '@charset "iso-8859-1";\n.a::after { content: "caf\xe9" } b { x: url(i.png) }'
    out = rewrite_css_bytes(body.encode("iso-8859-1"), BASE, None, serve_map).decode("utf-8")
    assert out.startswith('@charset "utf-8";') and 'content: "café"' in out
    assert 'url("/T/http://site.test/dir/i.png")' in out


def test_every_kind_of_html_reference_is_rewritten() -> None:
    soup = rewrite("""<html><head><base href="http://site.test/b/" target="_top">
    <link rel="stylesheet" href="s.css" integrity="sha256-x" crossorigin="anonymous">
    <style>@import "i.css"; p { background: url(p.png) }</style>
    <meta http-equiv="refresh" content="5; URL='next.html'"></head>
    <body background="bg.png" style="background-image: url(st.png)">
    <a id="a" href="x.html#f" ping="/track">x</a>
    <img id="i" src="i.png" srcset="i.png 1x, i2.png 2x">
    <picture><source srcset="w.webp 100w"></picture> <video poster="v.jpg" src="v.mp4"></video>
    <form action="/post"><input type="image" src="btn.png"></form>
    <iframe src="f.html"></iframe> <svg><image href="svg.png"/></svg>
    </body></html>""")
    base = "/T/http://site.test/b/"
    assert soup.find("base").attrs == {"target": "_top"}  # applied, then removed
    link = soup.find("link")
    assert link.attrs == {"rel": "stylesheet", "href": base + "s.css"}
    style = soup.find("style").string
    assert f'"{base}i.css"' in style and f'"{base}p.png"' in style
    refresh = soup.find("meta", attrs={"http-equiv": "refresh"})
    assert refresh["content"] == f"5; url={base}next.html"
    assert soup.body["background"] == base + "bg.png"
    assert soup.body["style"] == f'background-image: url("{base}st.png")'
    assert soup.find(id="a").attrs == {"id": "a", "href": base + "x.html#f"}
    assert soup.find(id="i")["srcset"] == f"{base}i.png 1x, {base}i2.png 2x"
    assert soup.find("source")["srcset"] == f"{base}w.webp 100w"
    assert soup.find("video")["poster"] == base + "v.jpg"
    assert soup.find("form")["action"] == "/T/http://site.test/post"
    assert soup.find("input")["src"] == base + "btn.png"
    assert soup.find("iframe")["src"] == base + "f.html"
    assert soup.find("image")["href"] == base + "svg.png"


def test_references_not_archived_become_inert() -> None:
    soup = rewrite("""<a id="a" href="gone/page">g</a> <img id="i" src="gone.png">
    <img id="s" src="ok.png" srcset="ok.png 1x, gone.png 2x">
    <meta http-equiv="refresh" content="0;url=gone.html"> <link rel=stylesheet href="gone.css">
    <p style="background: url(gone.png)">""")
    a = soup.find(id="a")
    assert "href" not in a.attrs and a["data-mirror-href"] == "http://site.test/dir/gone/page"
    assert "src" not in soup.find(id="i").attrs
    assert soup.find(id="i")["data-mirror-src"] == "http://site.test/dir/gone.png"
    s = soup.find(id="s")
    assert s["srcset"] == "/T/http://site.test/dir/ok.png 1x"
    assert s["data-mirror-srcset"] == "ok.png 1x, gone.png 2x"
    meta = soup.find("meta", attrs={"data-mirror-content": True})
    assert meta is not None and "content" not in meta.attrs
    assert "href" not in soup.find("link").attrs
    assert soup.find("p")["style"] == f'background: url("{INERT_CSS_URL}")'


def test_charset_is_utf8_declared_once_and_archived_policies_are_inert() -> None:
    markup = ('<!DOCTYPE html><html><head><meta http-equiv="Content-Type" '
              'content="text/html; charset=windows-1252"><meta charset="windows-1252">'
              '<meta http-equiv="Content-Security-Policy" content="upgrade-insecure-requests">'
              "<title> Caf\xe9\n menu </title></head><body>\u20ac caf\xe9</body></html>")
    page = rewrite_html(markup.encode("windows-1252"), BASE, None, serve_map,
                        head='<meta name="x" content="y">')
    text = page.body.decode("utf-8")
    assert page.title == "Café menu"
    assert text.count("charset") == 1
    assert text.index('<meta charset="utf-8">') < text.index('<meta name="x" content="y">')
    assert "€ café" in text
    soup = BeautifulSoup(page.body, "html.parser")
    assert soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"}) is None
    assert soup.find("meta", attrs={"data-mirror-http-equiv": "Content-Security-Policy"})


@pytest.mark.parametrize("markup", [
    b"", b"plain text, no markup", b"<p>fragment", b"<?xml version='1.0'?><html/>",
    b"<a href='http://[bad'>x</a>", b"<img srcset=', , ,'>", b"<style>url(</style>",
])
def test_odd_documents_do_not_crash(markup: bytes) -> None:
    page = rewrite_html(markup, BASE, "text/html", serve_map)
    assert isinstance(page.body, bytes)


def test_charset_meta_goes_first_even_without_head_and_no_doctype_is_added() -> None:
    body = rewrite_html(b"<!doctype html><p>hi", BASE, None, serve_map).body
    assert body.startswith(b"<!DOCTYPE html>")
    assert body.index(b'<head><meta charset="utf-8"></head>') < body.index(b"<p>hi")
    quirks = rewrite_html(b"<!-- old --><p>hi", BASE, None, serve_map).body
    assert quirks.startswith(b'<!-- old --><html><head><meta charset="utf-8">'), quirks
