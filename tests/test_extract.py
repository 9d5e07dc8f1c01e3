"""Links and page requisites from HTML and CSS; charset sniffing (P7)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lxml import etree

from mirror.web.charset import sniff_charset
from mirror.web.css import css_references
from mirror.web.extract import (
    SOURCES,
    Extracted,
    Link,
    _marked_text,
    extract,
    extract_css,
    extract_html,
)
from mirror.web.html import refresh_url, srcset_urls
from mirror.web.urls import _Resolver, resolve

PAGE = "http://example.com/dir/page.html"
D = "http://example.com/dir/"  # the page's directory
L, R = "link", "requisite"

Triple = tuple[str, str, str]


def found(html: str | bytes, url: str = PAGE, content_type: str | None = None) -> list[Triple]:
    body = html.encode() if isinstance(html, str) else html
    links = extract_html(body, url, content_type).links
    return [(link.url, link.kind, link.source) for link in links]


# --- every tag and attribute -----------------------------------------------------------------

TAG_CASES: list[tuple[str, str, list[Triple]]] = [
    ("a", '<a href="p.html">x</a>', [(D + "p.html", L, "a")]),
    ("area", '<map><area href="/m" shape=rect></map>', [("http://example.com/m", L, "area")]),
    ("img", '<img src="i.png">', [(D + "i.png", R, "img")]),
    ("img-srcset", '<img src="a.png" srcset="b.png 2x, c.png 3x">',
     [(D + "a.png", R, "img"), (D + "b.png", R, "srcset"), (D + "c.png", R, "srcset")]),
    ("picture", '<picture><source srcset="w.webp 1x, w2.webp 2x" type="image/webp">'
     '<img src="f.jpg"></picture>',
     [(D + "w.webp", R, "srcset"), (D + "w2.webp", R, "srcset"), (D + "f.jpg", R, "img")]),
    ("source-src", '<video><source src="v.mp4"></video>', [(D + "v.mp4", R, "source")]),
    ("stylesheet", '<link rel="stylesheet" href="s.css">', [(D + "s.css", R, "link-stylesheet")]),
    ("alt-stylesheet", '<link rel="alternate stylesheet" href="alt.css">',
     [(D + "alt.css", R, "link-stylesheet")]),
    ("rel-case", '<link rel=" StyleSheet " href="u.css">', [(D + "u.css", R, "link-stylesheet")]),
    ("icon", '<link rel="icon" href="/favicon.ico">',
     [("http://example.com/favicon.ico", R, "link-icon")]),
    ("shortcut-icon", '<link rel="Shortcut Icon" href="f.ico">', [(D + "f.ico", R, "link-icon")]),
    ("apple-touch-icon", '<link rel="apple-touch-icon" href="t.png">',
     [(D + "t.png", R, "link-icon")]),
    ("preload", '<link rel="preload" as="font" href="f.woff2">',
     [(D + "f.woff2", R, "link-preload")]),
    ("modulepreload", '<link rel="modulepreload" href="m.js">', [(D + "m.js", R, "link-preload")]),
    ("preload-imagesrcset", '<link rel="preload" as="image" href="h.png" imagesrcset="h1.png 1x, '
     'h2.png 2x">', [(D + "h.png", R, "link-preload"), (D + "h1.png", R, "srcset"),
                     (D + "h2.png", R, "srcset")]),
    ("manifest", '<link rel="manifest" href="/app.webmanifest">',
     [("http://example.com/app.webmanifest", R, "link-manifest")]),
    ("other-rels-ignored", '<link rel="canonical" href="c"><link rel="next" href="n">'
     '<link rel="prefetch" href="p"><link href="norel">', []),
    ("script", '<script src="app.js"></script><script>var x = "<a href=no>";</script>',
     [(D + "app.js", R, "script")]),
    ("iframe", '<iframe src="frame.html"></iframe>', [(D + "frame.html", R, "iframe")]),
    ("frame", '<frameset><frame src="left.html"><frame src="right.html"></frameset>',
     [(D + "left.html", R, "frame"), (D + "right.html", R, "frame")]),
    ("video", '<video src="v.webm" poster="p.jpg"><track src="t.vtt"></video>',
     [(D + "v.webm", R, "video"), (D + "p.jpg", R, "poster"), (D + "t.vtt", R, "track")]),
    ("audio", '<audio src="a.mp3"><source src="a.ogg"></audio>',
     [(D + "a.mp3", R, "audio"), (D + "a.ogg", R, "source")]),
    ("object", '<object data="movie.swf"></object>', [(D + "movie.swf", R, "object")]),
    ("embed", '<embed src="e.svg">', [(D + "e.svg", R, "embed")]),
    ("input-image", '<input type="IMAGE" src="go.png"><input type="text" src="no.png">',
     [(D + "go.png", R, "input-image")]),
    ("body-background", '<body background="bg.gif"><p>x</p></body>',
     [(D + "bg.gif", R, "body-background")]),
    ("style-attr", '<div style="background: url(\'d.png\')"><span style="x:url(s.png)"></span>'
     '</div>', [(D + "d.png", R, "style-attr"), (D + "s.png", R, "style-attr")]),
    ("style-block", '<style>@import "base.css"; .x { background: url(x.png) }</style>',
     [(D + "base.css", R, "style-import"), (D + "x.png", R, "style-block")]),
    ("style-block-is-raw-text", "<style>a>b{c:url(x.png)} </p> d{e:url(y.png)}</style>",
     [(D + "x.png", R, "style-block"), (D + "y.png", R, "style-block")]),
    ("meta-refresh", '<meta http-equiv="Refresh" content="5; url=next.html">',
     [(D + "next.html", R, "meta-refresh")]),
    ("meta-refresh-self", '<meta http-equiv="refresh" content="30">', []),
    ("svg-image", '<svg><image xlink:href="i.svg"/><image href="j.svg"/></svg>',
     [(D + "i.svg", R, "svg-image"), (D + "j.svg", R, "svg-image")]),
    ("svg-use", '<svg><use href="sprite.svg#icon"/><use xlink:href="#local"/></svg>',
     [(D + "sprite.svg#icon", R, "svg-use")]),
    ("upper-case-markup", '<A HREF="u.html"><IMG SRC="i.png"><svg><IMAGE XLINK:HREF="s.svg">',
     [(D + "u.html", L, "a"), (D + "i.png", R, "img"), (D + "s.svg", R, "svg-image")]),
    ("noscript", '<noscript><img src="ns.png"></noscript>', [(D + "ns.png", R, "img")]),
    ("nested-in-link", '<a href="big.jpg"><img src="small.jpg"></a>',
     [(D + "big.jpg", L, "a"), (D + "small.jpg", R, "img")]),
    ("comment", '<!-- <a href="commented.html"> --><a href="real.html">',
     [(D + "real.html", L, "a")]),
]


@pytest.mark.parametrize(("html", "expected"), [c[1:] for c in TAG_CASES],
                         ids=[c[0] for c in TAG_CASES])
def test_tags_and_attributes(html: str, expected: list[Triple]) -> None:
    assert found(html) == expected


def test_every_source_token_is_documented_and_produced() -> None:
    produced = {source for _, html, _ in TAG_CASES for _, _, source in found(html)}
    produced |= {link.source for link in extract_css(b"@import 'a'; b{c:url(d)}", PAGE).links}
    assert produced == set(SOURCES)


# --- what is kept, what is skipped -----------------------------------------------------------

REFERENCE_CASES = [
    ("empty", '<a href="">', []),
    ("blank", '<a href=" \t\n">', []),
    ("fragment-only", '<a href="#top"><a href=" #x ">', []),
    ("fragment-kept", '<a href="p.html#sec">', [D + "p.html#sec"]),
    ("query-only", '<a href="?q=1">', [PAGE + "?q=1"]),
    ("whitespace-stripped", '<a href="  \n p.html\t ">', [D + "p.html"]),
    ("tab-newline-removed", '<a href="pa\nge\t.html">', [D + "page.html"]),
    ("absolute", '<a href="https://other.example/x">', ["https://other.example/x"]),
    ("protocol-relative", '<a href="//cdn.example/y">', ["http://cdn.example/y"]),
    ("dot-segments", '<a href="../up/./x">', ["http://example.com/up/x"]),
    ("not-normalised", '<a href="http://Example.COM:80/a%7e">', ["http://Example.COM:80/a%7e"]),
    ("javascript", '<a href="javascript:void(0)">', ["javascript:void(0)"]),
    ("mailto", '<a href="mailto:me@example.com">', ["mailto:me@example.com"]),
    ("tel", '<a href="tel:+123">', ["tel:+123"]),
    ("data", '<img src="data:image/png;base64,AAAA">', ["data:image/png;base64,AAAA"]),
    ("unparsable", '<a href="http://[::1/">', []),
    ("entities", '<a href="p?a=1&amp;b=2">', [D + "p?a=1&b=2"]),
    ("non-ascii", '<a href="café.html">', [D + "café.html"]),
    ("duplicate-attribute-first-wins", '<a href="x" href="y">', [D + "x"]),
]


@pytest.mark.parametrize(("html", "expected"), [c[1:] for c in REFERENCE_CASES],
                         ids=[c[0] for c in REFERENCE_CASES])
def test_which_references_are_returned(html: str, expected: list[str]) -> None:
    assert [url for url, _, _ in found(html)] == expected


@pytest.mark.parametrize(
    ("base", "ref", "expected"),
    [
        (PAGE, "x", D + "x"),
        (PAGE, "", None),
        (PAGE, "#f", None),
        ("data:text/html,<p>", "rel.png", None),
        ("data:text/html,<p>", "?q", None),
        ("data:text/html,<p>", "http://x.example/", "http://x.example/"),
        ("DATA:text/html,x", "rel", None),
        ("about:blank", "rel", None),
        (PAGE, "http://[bad", None),
    ],
)
def test_resolve(base: str, ref: str, expected: str | None) -> None:
    assert resolve(base, ref) == expected


# A page's references are resolved by _Resolver, which joins relative paths itself: it must
# give what resolve() gives, for every base and reference.
URL_PARTS = ["a", "b.html", "/", "//", ".", "..", "?", "#", ";", ":", "\\", "\t", " ", "\x00",
             "%2e", "é", "[", "]", "@", "http:", "https://h.example", "x:y", "data:"]
url_text = st.lists(st.sampled_from(URL_PARTS) | st.text(max_size=2), max_size=8).map("".join)
BASES = [PAGE, "https://h.example", "HTTP://H.example/a;p/b?q#f", "http://h/a//b/",
         "http://h/a/../b/c", "http://[::1/x", " http://h/x", "http://h/\tx", "ftp://h/x/",
         "data:text/html,x", "about:blank"]


RELATIVE_REFS = [
    "x", ".", "..", "./", "../", "a/.", "a/..", "../../..", "/..", "/./x", "/a/./b/../c", "a//b",
    "//x", "a/b:c", "a:b", "a?", "a#", "a?#", "a?b#c", "a#b?c", "?q", "#f", "a;p", "a/b;p?q;r",
    "a\\b", "a?b\\c", "a\tb", " a ", "é/ü?é#é", "%2e%2e/x",
]


@pytest.mark.parametrize("base", BASES)
def test_page_resolver_agrees_with_resolve_on_path_shapes(base: str) -> None:
    resolver = _Resolver(base)
    assert [resolver(ref) for ref in RELATIVE_REFS] == [resolve(base, r) for r in RELATIVE_REFS]


@settings(max_examples=300, deadline=None)
@given(base=st.sampled_from(BASES) | url_text.map("http://h.example/".__add__) | url_text,
       ref=url_text)
def test_page_resolver_agrees_with_resolve(base: str, ref: str) -> None:
    resolver = _Resolver(base)
    assert resolver(ref) == resolve(base, ref)
    assert resolver(ref) == resolve(base, ref)  # memoised


# --- <base href> -----------------------------------------------------------------------------

BASE_CASES = [
    ("absolute", '<base href="http://cdn.example/root/"><a href="x">',
     "http://cdn.example/root/", ["http://cdn.example/root/x"]),
    ("relative", '<base href="../other/"><img src="i.png">',
     "http://example.com/other/", ["http://example.com/other/i.png"]),
    ("first-wins", '<base href="/one/"><base href="/two/"><a href="x">',
     "http://example.com/one/", ["http://example.com/one/x"]),
    ("first-with-href-wins", '<base target="_top"><base href="/b/"><a href="x">',
     "http://example.com/b/", ["http://example.com/b/x"]),
    ("applies-to-earlier", '<a href="x"><base href="/late/">',
     "http://example.com/late/", ["http://example.com/late/x"]),
    ("empty-href", '<base href=""><base href="/ignored/"><a href="x">', PAGE, [D + "x"]),
    ("unparsable", '<base href="http://[::1"><a href="x">', PAGE, [D + "x"]),
    ("data-base", '<base href="data:text/html,x"><a href="rel"><a href="http://abs.example/">',
     "data:text/html,x", ["http://abs.example/"]),
]


@pytest.mark.parametrize(("html", "base", "urls"), [c[1:] for c in BASE_CASES],
                         ids=[c[0] for c in BASE_CASES])
def test_base_href(html: str, base: str, urls: list[str]) -> None:
    result = extract_html(html.encode(), PAGE)
    assert result.base == base
    assert [link.url for link in result.links] == urls


# --- srcset ----------------------------------------------------------------------------------

SRCSET_CASES = [
    ("single", "a.png", ["a.png"]),
    ("density", "a.png 1x, b.png 2x", ["a.png", "b.png"]),
    ("width", " a.png 100w ,\n b.png 200w ", ["a.png", "b.png"]),
    ("no-space-after-comma", "a.png 1x,b.png 2x", ["a.png", "b.png"]),
    ("comma-in-url", "a,b.png 1x, c.png 2x", ["a,b.png", "c.png"]),
    ("no-descriptor-comma-is-url", "a.png,b.png", ["a.png,b.png"]),
    ("trailing-comma-ends-url", "a.png, b.png,", ["a.png", "b.png"]),
    ("url-ending-in-commas", "a.png,,, b.png", ["a.png", "b.png"]),
    ("data-url", "data:image/png;base64,iVBO= 1x, b.png 2x",
     ["data:image/png;base64,iVBO=", "b.png"]),
    ("parens-in-descriptor", "a.png (x, y) 1x, b.png", ["a.png", "b.png"]),
    ("bad-descriptor-kept", "a.png foo bar, b.png", ["a.png", "b.png"]),
    ("only-commas", " , ,, ", []),
    ("empty", "", []),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in SRCSET_CASES],
                         ids=[c[0] for c in SRCSET_CASES])
def test_srcset_parsing(value: str, expected: list[str]) -> None:
    assert srcset_urls(value) == expected


# --- meta refresh ----------------------------------------------------------------------------

REFRESH_CASES = [
    ("url-keyword", "5; url=next.html", "next.html"),
    ("upper-keyword", "0;URL=next.html", "next.html"),
    ("single-quotes", "0; url='next.html'", "next.html"),
    ("double-quotes", '0; url="next.html" trailing', "next.html"),
    ("unclosed-quote", "0; url='next.html", "next.html"),
    ("spaces-around-equals", "0 ; url = next.html", "next.html"),
    ("comma", "0, next.html", "next.html"),
    ("no-keyword", "3;http://x.example/", "http://x.example/"),
    ("space-only", "3 next.html", "next.html"),
    ("quoted-no-keyword", "3; 'next.html'", "next.html"),
    ("fraction", "1.5; url=n.html", "n.html"),
    ("leading-dot", ".5; url=n.html", "n.html"),
    ("keyword-without-equals", "0; urlfoo", "urlfoo"),
    ("delay-only", "5", None),
    ("delay-and-semicolon", "5;", None),
    ("no-delay", "url=next.html", None),
    ("junk-after-delay", "5x; url=n.html", None),
    ("empty", "", None),
]


@pytest.mark.parametrize(("content", "expected"), [c[1:] for c in REFRESH_CASES],
                         ids=[c[0] for c in REFRESH_CASES])
def test_meta_refresh_forms(content: str, expected: str | None) -> None:
    assert refresh_url(content) == expected


# --- CSS -------------------------------------------------------------------------------------

CSS_CASES = [
    ("bare", "a{background:url(a.png)}", [("a.png", False)]),
    ("single-quoted", "a{b:url('b.png')}", [("b.png", False)]),
    ("double-quoted", 'a{b:url("c.png")}', [("c.png", False)]),
    ("spaces", "a{b:url(  d.png  )}", [("d.png", False)]),
    ("spaces-in-quotes", "a{b:url( 'e f.png' )}", [("e f.png", False)]),
    ("upper-case", "a{b:URL(g.png)}", [("g.png", False)]),
    ("escaped-paren", r"a{b:url(h\(1\).png)}", [("h(1).png", False)]),
    ("escaped-quote", r'a{b:url("i\"j.png")}', [('i"j.png', False)]),
    ("hex-escape", r"a{b:url(\6b .png)}", [("k.png", False)]),
    ("line-continuation", 'a{b:url("l\\\nm.png")}', [("lm.png", False)]),
    ("several", "a{b:url(1.png), url(2.png)}", [("1.png", False), ("2.png", False)]),
    ("import-string", '@import "base.css";', [("base.css", True)]),
    ("import-single", "@import 'base.css' screen;", [("base.css", True)]),
    ("import-url", "@import url(base.css);", [("base.css", True)]),
    ("import-url-quoted", '@IMPORT url( "base.css" ) print;', [("base.css", True)]),
    ("import-no-space", '@import"base.css";', [("base.css", True)]),
    ("comment", "/* url(no.png) @import 'no.css'; */ a{b:url(yes.png)}", [("yes.png", False)]),
    ("unclosed-comment", "a{b:url(yes.png)} /* url(no.png)", [("yes.png", False)]),
    ("url-in-string", 'a{content:"url(no.png)"} b{c:url(yes.png)}', [("yes.png", False)]),
    ("comment-in-string", 'a{content:"/*"} b{c:url(yes.png)} /* */', [("yes.png", False)]),
    ("not-url-function", "a{b:myurl(no.png); c: --url(no2.png)}", []),
    ("bad-url", "a{b:url(two words.png)}", []),
    ("data-url", "a{b:url(data:image/gif;base64,R0lG)}", [("data:image/gif;base64,R0lG", False)]),
    ("namespace", "@namespace svg url(http://www.w3.org/2000/svg); a{b:url(x.png)}",
     [("x.png", False)]),
    ("image-set", 'a{b:image-set("1x.png" 1x, url(2x.png) 2x, "w.avif" type("image/avif"))}',
     [("1x.png", False), ("2x.png", False), ("w.avif", False)]),
    ("webkit-image-set", 'a{b:-webkit-image-set("w.png" 1x)}', [("w.png", False)]),
    ("font-face", "@font-face{src:url(f.woff2) format('woff2'), local(Arial)}",
     [("f.woff2", False)]),
]


@pytest.mark.parametrize(("css", "expected"), [c[1:] for c in CSS_CASES],
                         ids=[c[0] for c in CSS_CASES])
def test_css_reference_forms(css: str, expected: list[tuple[str, bool]]) -> None:
    assert list(css_references(css)) == expected


def test_extract_css_resolves_against_the_stylesheet() -> None:
    result = extract_css(b"@import 'print.css'; a{b:url(../img/a.png)} c{d:url()}",
                         "http://example.com/css/site.css")
    assert result == Extracted(
        (Link("http://example.com/css/print.css", R, "css-import"),
         Link("http://example.com/img/a.png", R, "css-url")),
        None, "utf-8", "http://example.com/css/site.css",
    )


@pytest.mark.parametrize(
    ("body", "content_type", "charset"),
    [
        (b'@charset "iso-8859-1"; a{b:url(\xe9.png)}', None, "windows-1252"),
        (b'\xef\xbb\xbf@charset "iso-8859-1"; a{b:url(\xc3\xa9.png)}', None, "utf-8"),
        (b"a{b:url(\xc3\xa9.png)}", "text/css; charset=utf-8", "utf-8"),
        (b'@charset "utf-8"; a{b:url(\xe9.png)}', "text/css; charset=latin1", "windows-1252"),
        (b'@charset "utf-16"; a{b:url(\xc3\xa9.png)}', None, "utf-8"),
        (b"@charset 'latin1'; a{b:url(\xc3\xa9.png)}", None, "utf-8"),  # not the exact form
        (b'@charset "bogus"; a{b:url(\xc3\xa9.png)}', None, "utf-8"),
    ],
    ids=["at-charset", "bom-beats-at-charset", "header", "header-beats-at-charset",
         "utf16-means-utf8", "single-quotes-ignored", "unknown-label"],
)
def test_css_charset(body: bytes, content_type: str | None, charset: str) -> None:
    result = extract_css(body, "http://example.com/s.css", content_type)
    assert result.charset == charset
    assert [link.url for link in result.links] == ["http://example.com/é.png"]


# --- charset sniffing (P7) -------------------------------------------------------------------

LATIN1_META = b'<meta charset="iso-8859-1">'
CHARSET_CASES = [
    ("default", b"<p>plain", None, "utf-8"),
    ("meta-charset", LATIN1_META, None, "windows-1252"),
    ("meta-unquoted", b"<meta charset=koi8-r>", None, "koi8-r"),
    ("meta-http-equiv", b'<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
     None, "cp932"),
    ("meta-http-equiv-no-pragma", b'<meta content="text/html; charset=Shift_JIS">', None, "utf-8"),
    ("meta-in-comment", b"<!-- <meta charset=koi8-r> --><p>", None, "utf-8"),
    ("meta-after-1024", b"<p>" + b" " * 1024 + LATIN1_META, None, "utf-8"),
    ("meta-utf16-means-utf8", b'<meta charset="utf-16">', None, "utf-8"),
    ("meta-unknown-falls-through", b"<meta charset=bogus><meta charset=latin2>", None,
     "iso-8859-2"),
    ("meta-x-user-defined-falls-through", b"<meta charset=x-user-defined>", None, "utf-8"),
    ("header-beats-meta", LATIN1_META, "text/html; charset=UTF-8", "utf-8"),
    ("header-quoted", b"", 'text/html; charset="windows-1251"', "windows-1251"),
    ("header-latin1-is-1252", b"", "text/html;charset=ISO-8859-1", "windows-1252"),
    ("header-ascii-is-1252", b"", "text/html; charset=us-ascii", "windows-1252"),
    ("header-unknown-falls-to-meta", LATIN1_META, "text/html; charset=bogus", "windows-1252"),
    ("header-replacement-falls-through", b"", "text/html; charset=iso-2022-kr", "utf-8"),
    ("header-without-charset", LATIN1_META, "text/html", "windows-1252"),
    ("bom-utf8-beats-header", b"\xef\xbb\xbf<p>", "text/html; charset=latin1", "utf-8"),
    ("bom-utf16le", b"\xff\xfe<\x00p\x00>\x00", "text/html; charset=utf-8", "utf-16-le"),
    ("bom-utf16be", b"\xfe\xff\x00<\x00p\x00>", None, "utf-16-be"),
]


@pytest.mark.parametrize(("body", "content_type", "charset"), [c[1:] for c in CHARSET_CASES],
                         ids=[c[0] for c in CHARSET_CASES])
def test_charset_order(body: bytes, content_type: str | None, charset: str) -> None:
    assert sniff_charset(body, content_type) == charset


def test_charset_default_can_be_chosen() -> None:
    assert sniff_charset(b"<p>", None, default="latin1") == "windows-1252"
    assert sniff_charset(b"<p>", None, default="bogus") == "utf-8"


def test_declared_charset_decodes_the_page() -> None:
    body = b'<meta charset="iso-8859-1"><title>Caf\xe9</title><a href="caf\xe9.html">'
    result = extract_html(body, PAGE)
    assert (result.charset, result.title) == ("windows-1252", "Café")
    assert [link.url for link in result.links] == [D + "café.html"]


def test_sniffed_charset_is_not_overridden_by_the_parser() -> None:
    body = '<meta charset="iso-8859-1"><title>Café</title><a href="café.html">'.encode()
    result = extract_html(body, PAGE, "text/html; charset=utf-8")
    assert (result.charset, result.title) == ("utf-8", "Café")
    assert [link.url for link in result.links] == [D + "café.html"]


def test_utf16_page_with_bom() -> None:
    body = '<title>Ünï</title><a href="ü.html">'.encode("utf-16")
    result = extract_html(body, PAGE)
    assert (result.title, [link.url for link in result.links]) == ("Ünï", [D + "ü.html"])


def test_wrong_declaration_does_not_crash() -> None:
    body = b'<title>Caf\xe9</title><a href="caf\xe9.html">'  # latin-1 bytes
    result = extract_html(body, PAGE, "text/html; charset=utf-8")
    assert result.charset == "utf-8"
    assert result.title == "Caf\ufffd"
    assert [link.url for link in result.links] == [D + "caf\ufffd.html"]


# --- title, order, duplicates, dispatch ------------------------------------------------------

TITLE_CASES = [
    ("plain", "<title>Hello</title>", "Hello"),
    ("whitespace", "<title>\n  Hello \t\n  world  </title>", "Hello world"),
    ("entities", "<title>Tom &amp; Jerry &lt;3</title>", "Tom & Jerry <3"),
    ("first", "<title>One</title><title>Two</title>", "One"),
    ("absent", "<p>no title</p>", None),
    ("empty", "<title>  </title>", None),
    ("svg-title-skipped", "<svg><title>icon</title></svg><title>Page</title>", "Page"),
    ("styled-svg-title-skipped", '<svg style="x"><title>i</title></svg><title>Page</title>',
     "Page"),
    ("nested-svg-title-skipped",
     "<svg><g><svg><title>a</title></svg><title>b</title></g></svg><title>Page</title>", "Page"),
    ("first-decides-even-if-empty", "<title> </title><title>Two</title>", None),
    ("markup-in-title-is-text", "<title>a <b>bold</b> &amp; c</title>", "a <b>bold</b> & c"),
    ("in-body", "<body><title>Late</title></body>", "Late"),
]


@pytest.mark.parametrize(("html", "title"), [c[1:] for c in TITLE_CASES],
                         ids=[c[0] for c in TITLE_CASES])
def test_title(html: str, title: str | None) -> None:
    assert extract_html(html.encode(), PAGE).title == title


def test_links_keep_document_order() -> None:
    html = """<html><head><link rel=stylesheet href=1.css><script src=2.js></script>
    <style>x{y:url(3.png)}</style></head><body><a href=4.html><img src=5.png></a>
    <div style="background:url(6.png)"><p><iframe src=7.html></iframe></div>
    <area href=8.html></body></html>"""
    assert [url.rsplit("/", 1)[1] for url, _, _ in found(html)] == [
        "1.css", "2.js", "3.png", "4.html", "5.png", "6.png", "7.html", "8.html"]


def test_duplicates_are_dropped_keeping_the_first() -> None:
    html = """<link rel=preload href=x.png><img src="x.png"><img src="./x.png">
    <a href="p.html">1</a><a href="p.html">2</a><a href="x.png">image</a>"""
    assert found(html) == [
        (D + "x.png", R, "link-preload"), (D + "p.html", L, "a"), (D + "x.png", L, "a")]


@pytest.mark.parametrize(
    ("mime", "count"),
    [("text/html", 2), ("application/xhtml+xml", 2), ("TEXT/HTML", 2),
     ("text/html; charset=utf-8", 2), ("text/css", 1), ("image/png", 0),
     ("application/json", 0), ("", 0)],
)
def test_extract_dispatches_on_mime(mime: str, count: int) -> None:
    body = b'<a href="a.html" style="b:url(x.png)">url(y.png)</a>'
    result = extract(body, PAGE, mime)
    assert len(result.links) == count
    assert result.base == PAGE


def test_xhtml_with_xml_declaration() -> None:
    body = (b'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
            b'<head><title>X</title></head><body><a href="x.html"/></body></html>')
    result = extract(body, PAGE, "application/xhtml+xml")
    assert (result.title, [link.url for link in result.links]) == ("X", [D + "x.html"])


# --- hostile input ---------------------------------------------------------------------------

MALFORMED = [
    b"",
    b"no markup at all",
    b"http://looks.like/a/url",
    b"<",
    b"<a href=",
    b'<a href="unclosed',
    b"<div><p><a href=x.html><table><tr><td><img src=y.png",
    b"\x00" * 100 + b"<a href='n\x00ul.html'>\x00",
    bytes(range(256)) * 4,
    b"\xff\xfe\xff\xfe<\x00a",
    b"<<<<>>>><a<a<a href=x>>><img src=>><script><!--</script>",
    b"<div>" * 3000 + b"<a href=deep.html>" + b"</div>" * 3000,
    b"<style>" + b"url(" * 2000 + b"</style>",
    b"<meta charset=utf-16><a href=x>",
    b"<img srcset=',,,, ,'><img srcset='(((((('><meta http-equiv=refresh content='.'>",
    b"<?xml version='1.0'?><!DOCTYPE x><x:y xmlns:x='u'>",
    b"</html></body><a href=after-end.html>",
]


@pytest.mark.parametrize("body", MALFORMED, ids=[f"m{i}" for i in range(len(MALFORMED))])
def test_malformed_html_never_raises(body: bytes) -> None:
    for content_type in (None, "text/html; charset=utf-8", "text/html; charset=bogus"):
        result = extract_html(body, PAGE, content_type)
        assert all(isinstance(link, Link) for link in result.links)
        extract_css(body, PAGE, content_type)


def test_what_follows_the_end_of_the_page_is_read() -> None:
    # libxml2 puts it in a second <html> element after the first
    html = b"<html><body><a href=a.html>A</a></body></html><img src=i.png><p>after</p><!--c-->"
    result = extract_html(html, PAGE)
    assert [link.url for link in result.links] == [D + "a.html", D + "i.png"]
    assert result.text == "A\nafter"


def test_deep_nesting_still_finds_links() -> None:
    body = b"<div>" * 3000 + b"<a href=deep.html>" + b"</div>" * 3000 + b"<img src=after.png>"
    assert [url for url, _, _ in found(body)] == [D + "deep.html", D + "after.png"]


def test_deep_nesting_keeps_the_text() -> None:
    # 1,500 levels: libxml2's tree and the XSLT transform; 3,000 and 20,000: past libxml2's
    # depth limit, a tree lxml builds and walked for its text
    for depth in (1500, 3000, 20_000):
        body = (b"<div>" * depth + b"<p>deep <a href=x>link</a>, words</p>" + b"</div>" * depth
                + b"<p>after</p>")
        assert extract_html(body, PAGE).text == "deep link, words\nafter", depth


def test_deep_nesting_keeps_base_and_title() -> None:
    body = b"<font>" * 1000 + b"<base href=/b/><title>Deep</title><a href=x>"
    result = extract_html(body, PAGE)
    assert (result.base, result.title) == ("http://example.com/b/", "Deep")
    assert [link.url for link in result.links] == ["http://example.com/b/x"]


C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
FRAGMENTS = [
    "<a href=", "<img src='", "<img srcset=\"", "<link rel=stylesheet href=", "<base href=",
    "<meta http-equiv=refresh content='", "<style>", "</style>", "url(", "@import '", ")",
    "'", '"', ">", " ", ",", "#", "//", "http://h.example/", "data:", "javascript:", "\x00",
    "<!--", "-->", "<title>", "</title>", "<svg>", "\\", "é", "[", "%",
]
htmlish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=40).map("".join)


def check_urls(result: Extracted) -> None:
    for link in result.links:
        assert isinstance(link.url, str) and link.url
        assert link.url == link.url.strip(C0_AND_SPACE)
        assert link.kind in (L, R)
        assert link.source in SOURCES


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=400) | htmlish.map(lambda s: s.encode("utf-8", "surrogatepass")),
       content_type=st.none() | st.sampled_from(["text/html", "text/html; charset=latin1",
                                                 "text/css; charset=utf-16", "x; charset=\""]))
def test_extractors_never_raise(body: bytes, content_type: str | None) -> None:
    check_urls(extract_html(body, PAGE, content_type))
    check_urls(extract_css(body, PAGE, content_type))
    assert isinstance(sniff_charset(body, content_type), str)


def test_one_page_leaves_nothing_behind_for_the_next() -> None:
    # the parser and the text transform are reused page after page (per thread)
    extract_html(b"<title>first<style>a { background: url(one.png) }<svg>", D)
    page = extract_html(b"<title>second</title><a href=two.html>", D)
    assert page.title == "second"
    assert [(link.url, link.source) for link in page.links] == [(D + "two.html", "a")]


# --- visible text (search and diffs) ------------------------------------------------------

TEXT_FRAGMENTS = ["<p>", "</p>", "<div>", "</div>", "<a href=x>", "</a>", "<br>", "<li>", "<b>",
                  "</b>", "<script>", "</script>", "<noscript>", "</noscript>", "<title>",
                  "</title>", "<svg>", "<style>", "</style>", "<template>", "<input>", "<head>",
                  "<td>", "<!--", "-->", " ", "\n", ",", ")", "x", "&nbsp;", "&amp;", "\xa0",
                  "</body>", "</html>", "<html>"]


def test_visible_text_leaves_out_what_a_page_does_not_show() -> None:
    html = (b"<html><head><title>T</title><style>p{}</style><script>var s</script></head>"
            b"<body><noscript>enable js</noscript><template>tpl</template>"
            b"<h1>Big  news</h1><p>one <b>bo</b>ld\n word</p><ul><li>a<li>b</ul>"
            b"<table><tr><td>c1<td>c2</table>tail<br>end</body></html>")
    found = extract_html(html, "http://x/")
    assert found.title == "T"
    assert found.text == "Big news\none bold word\na\nb\nc1\nc2\ntail\nend"


def test_links_do_not_glue_words_and_punctuation_stays_put() -> None:
    html = b"<nav><a href=/a>About</a><a href=/b>Blog</a></nav><p>See <a>here</a>, or <a>x</a>y."
    assert extract_html(html, "http://x/").text == "About Blog\nSee here, or x y."


@settings(max_examples=300, deadline=None)
@given(html=st.lists(st.sampled_from(TEXT_FRAGMENTS) | st.text(max_size=4), max_size=50)
       .map("".join))
def test_both_ways_of_marking_text_agree(html: str) -> None:
    # the XSLT transform (every tree libxml2 builds) and the walk (trees deeper than XSLT
    # goes) give the same marks around the same text
    root = etree.fromstring(html, etree.HTMLParser()) if html else None
    assume(root is not None)
    assert _marked_text(root, deep=False) == _marked_text(root, deep=True)


def test_visible_text_is_capped_at_a_word_and_has_no_control_characters() -> None:
    from mirror.web.extract import MAX_TEXT

    words = b"word " * (MAX_TEXT // 4)
    text = extract_html(b"<p>" + words + b"</p>", "http://x/").text
    assert text is not None and MAX_TEXT // 2 < len(text) <= MAX_TEXT
    assert text.endswith("word")
    assert extract_html(b"<p>a\x02b\x03c\x7f</p>", "http://x/").text == "abc"
    assert extract_html(b"<p> </p><script>x</script>", "http://x/").text is None


def test_the_cap_counts_the_text_kept_not_the_markup() -> None:
    from mirror.web.extract import MAX_TEXT

    # 10 characters of text in 40 of markup: the text is cut at MAX_TEXT of its own
    para = b"<p>\n      word  word\n   </p>\n"
    text = extract_html(para * (MAX_TEXT // 5), "http://x/").text
    assert text is not None and MAX_TEXT - 10 < len(text) <= MAX_TEXT
    assert text.startswith("word word\nword word\n") and text.endswith("word")
