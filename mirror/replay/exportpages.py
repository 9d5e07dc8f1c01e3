"""The pages an export (folder or ZIM) and the replay server generate: the contents pages,
redirect and notice pages, and what they share (the style, the viewport, URLs shown as text)."""

from __future__ import annotations

import html
import tempfile
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import quote

from mirror.replay.sitesearch import SEARCH_PAGE

if TYPE_CHECKING:
    from mirror.replay.exportplan import Entry

#: the export may not reach the network at all; 'self' keeps it working when hosted on http
#: (a form's target is a navigation, which default-src does not cover: form-action does)
EXPORT_CSP = ("default-src 'self' file: data: blob: 'unsafe-inline' 'unsafe-eval'; "
              "frame-src 'self' file:; object-src 'self' file:; form-action 'self' file:")
_STYLE = (
    "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em}"
    "h1{overflow-wrap:anywhere}table{border-collapse:collapse;width:100%}"
    "td,th{text-align:left;padding:.25em .5em;border-bottom:1px solid #ddd;vertical-align:top}"
    "td.n{text-align:right;white-space:nowrap}table.pages td:first-child,.u{overflow-wrap:anywhere}"
    ".u{color:#555;font-size:90%}input{font:inherit;max-width:100%}input[type=search]{width:20em}"
    ".scroll{overflow-x:auto}"  # a table too wide for a phone scrolls inside its own box
    "@media (max-width:640px){body{margin:1em auto;padding:0 .6em}h1{font-size:1.3em}"
    "td,th{padding:.25em .3em}}"
)

#: a phone lays the page out at its own width (without it: at 980 px, shrunk)
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'


def html_page(title: str, body: str, head: str = "") -> bytes:
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8">{VIEWPORT}{head}'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    ).encode()


def shown_url(url: str) -> str:
    """A URL as text in generated pages: without its scheme, so that nothing reads as a link."""
    return url.partition("://")[2] or url


def page_rows(rows: Iterable[tuple[str, str, str | None, int | None, int]]) -> str:
    """Table rows of (href, url, title, status, size)."""
    return "\n".join(
        f'<tr><td><a href="{html.escape(href)}">{html.escape(title or shown_url(url))}</a>'
        f'<div class="u">{html.escape(shown_url(url))}</div></td>'
        f'<td class="n">{status or ""}</td><td class="n">{size:,}</td></tr>'
        for href, url, title, status, size in rows
    )


#: the export's first contents page; past CONTENTS_ROWS pages the others are contents-2.html
#: and on, beside it (no exported file is in the export's root: exportpath.export_path)
CONTENTS = "index.html"
#: rows of one contents page: a browser shows and filters this many at once without a wait
CONTENTS_ROWS = 5000


def contents_name(k: int) -> str:
    """The file of contents page k (from 0)."""
    return CONTENTS if k == 0 else f"contents-{k + 1}.html"


class ContentsPages:
    """The contents of an export, a row per page or redirect in the order given (the plan's:
    by URL). The rows go to a temporary file as they come; at the end (leaving the `with`
    block without an error) the pages are written through `write(name, data)`."""

    def __init__(self, write: Callable[[str, bytes], None]) -> None:
        self.write = write
        self.count = 0
        self._starts: list[int] = []  # where each page's rows start in the spool
        self._spool = tempfile.TemporaryFile()

    def add(self, entry: Entry, title: str | None, size: int) -> None:
        if self.count % CONTENTS_ROWS == 0:
            self._starts.append(self._spool.tell())
        row = page_rows([(quote(entry.path, safe="/="), entry.capture.url, title, entry.status,
                          size)])
        self._spool.write(row.encode() + b"\n")
        self.count += 1

    def __enter__(self) -> ContentsPages:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if kind is None:
                self._finish()
        finally:
            self._spool.close()

    def _finish(self) -> None:
        ends = [*self._starts[1:], self._spool.tell()]
        pages = max(len(self._starts), 1)
        for k in range(pages):
            rows = b""
            if self._starts:
                self._spool.seek(self._starts[k])
                rows = self._spool.read(ends[k] - self._starts[k])
            self.write(contents_name(k), contents_page(rows.decode(), self.count, k, pages))


def _pager(k: int, pages: int, total: int) -> str:
    """Where contents page k of `pages` is, with links to the first, the one before and after."""
    first, last = k * CONTENTS_ROWS + 1, min((k + 1) * CONTENTS_ROWS, total)
    links = [f'<a href="{contents_name(n)}">{label}</a>' for n, label in
             ((0, "first"), (k - 1, "previous"), (k + 1, "next"), (pages - 1, "last"))
             if 0 <= n < pages and n != k]
    return (f'<p class="pager">Pages {first:,}–{last:,} of {total:,} (contents page {k + 1} of '
            f"{pages}): {' · '.join(links)}</p>")


def contents_page(rows: str, total: int, k: int = 0, pages: int = 1) -> bytes:
    """Contents page k of `pages`: its table rows (page_rows), and a filter of these rows."""
    pager = _pager(k, pages, total) if pages > 1 else ""
    body = (
        f'<h1>Archived pages</h1><form action="{SEARCH_PAGE}"><input name="q" type="search" '
        'placeholder="words in the pages" aria-label="words in the pages"> '
        "<button>Search the text</button></form>"
        f"<p>{total:,} page{'' if total == 1 else 's'}. "
        '<input id="q" type="search" placeholder="filter" autofocus></p>'
        f"{pager}"
        '<table class="pages"><tr><th>page</th><th>status</th><th>bytes</th></tr>\n'
        f"{rows}</table>{pager}"
        "<script>document.getElementById('q').oninput=function(){var q=this.value."
        "toLowerCase();document.querySelectorAll('tr').forEach(function(r,i){if(i)r.style."
        "display=r.textContent.toLowerCase().includes(q)?'':'none'})}</script>"
    )
    return html_page("Archived pages", body, f'<meta http-equiv="Content-Security-Policy" '
                     f'content="{EXPORT_CSP}">')


def redirect_page(source: str, target: str | None, ref: str | None, status: int) -> bytes:
    """The page a redirect source becomes: it moves on to the target when that was archived."""
    shown = html.escape(shown_url(target or "?"))
    if ref is None:
        return notice_page(f"Redirect ({status})", source,
                           f"redirected to {shown}, which is not in this archive")
    head = f'<meta http-equiv="refresh" content="0; url={html.escape(ref)}">'
    body = (f"<p>{html.escape(shown_url(source))} redirected ({status}) to "
            f'<a href="{html.escape(ref)}">{shown}</a>.</p>')
    return html_page("Redirect", body, head)


def notice_page(title: str, url: str, message: str) -> bytes:
    return html_page(title, f"<h1>{html.escape(title)}</h1><p>{html.escape(shown_url(url))}: "
                     f"{message}.</p>")
