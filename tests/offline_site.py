"""The test site the offline-browsing tests archive: CSS with @import, images with srcset, a
redirect, a gzipped page with headers replay must drop, and references to a second server
that must never be contacted (it is excluded from the crawl, so nothing of it is archived)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re
import struct
import zlib
from pathlib import Path
from typing import Any

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from mirror.archive import index

BODY_RGB = (10, 20, 30)
H1_RGB = (200, 100, 50)


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def index_html(other: str) -> str:
    return f"""<!doctype html>
<html><head><meta charset="iso-8859-1"><title>Home page</title>
<link rel="stylesheet" href="css/main.css" integrity="sha256-AAAA" crossorigin="anonymous">
<link rel="stylesheet" href="{other}x.css">
<style>.hero {{ width: 8px; height: 8px; background-image: url('/img/hero.png') }}</style>
</head><body>
<h1>Welcome caf\xe9</h1>
<img id="a" src="img/a.png" srcset="img/a.png 1x, /img/a2.png 2x" width="40" height="40">
<img id="gone" src="{other}img.png">
<div class="hero"></div><div style="background: url(img/s.png); width: 4px; height: 4px"></div>
<p><a id="about" href="about">About</a> <a id="old" href="/old">Old about</a>
<a id="elsewhere" href="{other}page">Elsewhere</a> <a id="missing" href="missing">Missing</a>
<a id="top" href="#top">Top</a> <a id="mail" href="mailto:x@example.invalid">Mail</a>
<a id="headers" href="headers?x=1">Headers</a> <a id="corrupt" href="corrupt">Corrupt</a></p>
<script>fetch("{other}beacon").catch(function () {{}})</script>
</body></html>"""


ABOUT_HTML = """<!doctype html><html><head><title>About us</title>
<link rel="stylesheet" href="/css/main.css"></head>
<body><h1>About</h1><p><a id="home" href="./">Home</a></p>
<form action="/search"><input name="q"></form></body></html>"""

HEADERS_HTML = b"<!doctype html><title>Headers</title><h1>gzipped</h1><a href='/'>home</a>"
CORRUPT = b"<a href='http://live.example/'>not gzip at all</a>"
DROPPED_HEADERS = {
    "Set-Cookie": "session=secret-cookie; Path=/",
    "Strict-Transport-Security": "max-age=31536000",
    "Content-Security-Policy": "default-src https://cdn.example",
    "Service-Worker-Allowed": "/",
}
MAIN_CSS = f"""@import 'type.css';
body {{ background: rgb{BODY_RGB} url(../img/bg.png); }}
/* url(not-a-reference.png) */
"""
TYPE_CSS = f"h1 {{ color: rgb{H1_RGB} }}"
IMAGES = {"a.png": (4, 4, (255, 0, 0)), "a2.png": (8, 8, (0, 255, 0)),
          "bg.png": (2, 2, (0, 0, 255)), "hero.png": (8, 8, (9, 9, 9)),
          "s.png": (4, 4, (1, 2, 3))}


def build(site: Any, other: Any) -> None:
    """Routes of the archived site; `other` is the second server (its routes answer 200 so
    that a request to it could only be noticed in its log)."""
    site.page("/", index_html(other.base).encode("iso-8859-1"),
              content_type="text/html; charset=iso-8859-1")
    site.page("/about", ABOUT_HTML)
    site.redirect("/old", "/about", 301)
    site.page("/headers", gzip.compress(HEADERS_HTML),
              headers={"Content-Encoding": "gzip", **DROPPED_HEADERS})
    site.page("/corrupt", CORRUPT, headers={"Content-Encoding": "gzip"})  # says gzip, is not
    site.page("/css/main.css", MAIN_CSS, content_type="text/css")
    site.page("/css/type.css", TYPE_CSS, content_type="text/css")
    for name, (w, h, rgb) in IMAGES.items():
        site.page(f"/img/{name}", png(w, h, rgb), content_type="image/png")
    for path in ("/page", "/img.png", "/x.css", "/beacon"):
        other.page(path, "other server")


async def crawl_site(make_site: Any, crawl: Any, browser: str = "off"
                     ) -> tuple[Any, Any, Any]:
    """(site, other, crawl result): the site archived, the second server untouched.
    `browser`: the [browser] mode (the home page, a script and little text, is flagged:
    "auto" loads it in Chromium)."""
    site, other = await make_site(), await make_site()
    build(site, other)
    done = await crawl([site.base], crawl={"workers": 4},
                       scope={"exclude": [re.escape(other.base)]}, browser={"mode": browser})
    assert other.log == []
    return site, other, done


# --- a synthetic history written with warcio: two runs, both kinds of revisit ------------

HISTORY_URL = "http://history.test/page"
HISTORY_TWIN = "http://history.test/twin"  # same payload as v2, found by digest alone
V1 = b"<!doctype html><title>v1</title><p>first version</p>"
V2 = b"<!doctype html><title>v2</title><p>second version</p>"
HISTORY = [  # (kind, url, WARC-Date, body)
    ("response", HISTORY_URL, "2024-01-01T00:00:00Z", V1),
    ("response", HISTORY_URL, "2025-01-01T00:00:00Z", V2),
    ("identical", HISTORY_URL, "2025-06-01T00:00:00Z", V2),
    ("not-modified", HISTORY_URL, "2025-07-01T00:00:00Z", V2),
    ("digest-only", HISTORY_TWIN, "2025-08-01T00:00:00Z", V2),
]
_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def write_history(folder: Path, name: str = "hist-20240101000000000-00001.warc.gz") -> Path:
    """An archive folder whose WARC holds HISTORY (responses and revisits, each with a request
    record) and an index.cdxj made from it. Revisits point at the 2025-01-01 response."""
    warc_dir = folder / "warc"
    warc_dir.mkdir(parents=True, exist_ok=True)
    path = warc_dir / name
    digest = "sha1:" + base64.b32encode(hashlib.sha1(V2).digest()).decode()
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=True, warc_version="WARC/1.1")
        for kind, url, date, body in HISTORY:
            request = writer.create_warc_record(url, "request", http_headers=StatusAndHeaders(
                "GET / HTTP/1.1", [("Host", "history.test")], is_http_request=True),
                warc_headers_dict={"WARC-Date": date})
            for record in (_history_record(writer, kind, url, date, body, digest), request):
                writer.write_record(record)
                record.raw_stream.close()  # warcio may have spooled it to a temporary file
    index.rebuild_from_warcs(warc_dir, folder / "index.cdxj")
    return path


def _history_record(writer: WARCWriter, kind: str, url: str, date: str, body: bytes,
                    digest: str) -> Any:
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                       ("Set-Cookie", "k=v")], protocol="HTTP/1.1")
    if kind == "response":
        return writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                         http_headers=http, warc_headers_dict={"WARC-Date": date})
    if kind == "not-modified":  # empty block: only the WARC headers say what it repeats
        return writer.create_warc_record(url, "revisit", payload=io.BytesIO(b""), length=0,
                                         warc_headers_dict={
            "WARC-Date": date, "WARC-Profile": _NOT_MODIFIED,
            "WARC-Refers-To-Target-URI": HISTORY_URL,
            "WARC-Refers-To-Date": "2025-01-01T00:00:00Z"})
    record = writer.create_revisit_record(url, digest, HISTORY_URL, "2025-01-01T00:00:00Z",
                                          http_headers=http)
    record.rec_headers.replace_header("WARC-Date", date)
    if kind == "digest-only":
        record.rec_headers.remove_header("WARC-Refers-To-Target-URI")
        record.rec_headers.remove_header("WARC-Refers-To-Date")
    return record
