"""A rendered DOM made inert for the exports (mirror.web.inert), element by element."""

from __future__ import annotations

from lxml import html as lxml_html

from mirror.web.inert import make_inert


def inert(markup: str) -> str:
    root = lxml_html.document_fromstring(markup)
    make_inert(root)
    return lxml_html.tostring(root, encoding="unicode")


def test_scripts_and_script_preloads_go_data_blocks_stay() -> None:
    out = inert('<html><head><script src="a.js"></script><script type="module">x()</script>'
                '<link rel="modulepreload" href="m.js"><link rel="preload" as="script" '
                'href="p.js"><link rel="preload" as="image" href="i.png">'
                '<script type="application/ld+json">{"@type": "Thing"}</script></head>'
                "<body><p>kept<script>y()</script> after</p></body></html>")
    assert "a.js" not in out and "x()" not in out and "y()" not in out
    assert "m.js" not in out and "p.js" not in out and "i.png" in out
    assert '{"@type": "Thing"}' in out
    assert "<p>kept after</p>" in out  # the text after a removed script stays


def test_handlers_and_javascript_addresses_go() -> None:
    out = inert('<body onload="go()"><a href="javascript:void(0)" onclick="x()">a</a>'
                '<a href="/b" onmouseover="y()">b</a><form action="javascript:z()"></form>'
                '<img src="i.png" onerror="w()"></body>')
    for gone in ("go()", "javascript:", "x()", "y()", "z()", "w()"):
        assert gone not in out
    assert 'href="/b"' in out and 'src="i.png"' in out


def test_noscript_goes() -> None:
    out = inert("<body><noscript>You need to enable JavaScript</noscript><h1>Built</h1></body>")
    assert "enable JavaScript" not in out and "<h1>Built</h1>" in out


def test_lazy_images_get_their_real_address_once_only() -> None:
    out = inert('<body><img data-src="late.png" loading="lazy">'
                '<img src="data:image/gif;base64,R0lGOD" data-src="held.png">'
                '<img src="loaded.png" data-src="other.png">'
                '<img data-srcset="a.png 1x, b.png 2x" src="">'
                '<iframe data-src="frame.html"></iframe></body>')
    assert 'src="late.png"' in out and "loading" not in out
    assert 'src="held.png"' in out and "R0lGOD" not in out
    assert ' src="loaded.png"' in out and ' src="other.png"' not in out
    assert 'srcset="a.png 1x, b.png 2x"' in out
    assert 'src="frame.html"' in out
