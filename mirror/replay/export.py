"""Static export: a folder of rewritten files that opens from file://, with a contents page
and a search of the pages' text (sitesearch.py)."""

from __future__ import annotations

import functools
import html
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from mirror.archive.damage import Damage, report
from mirror.archive.warcread import ReadError
from mirror.errors import UsageError
from mirror.replay.captures import Capture, CaptureIndex, Record
from mirror.replay.exportpath import export_path, relative_ref
from mirror.replay.renders import RenderedPages, page_source
from mirror.replay.seal import SEAL_SCRIPT
from mirror.replay.sitesearch import ASSETS, INDEX_SCRIPT, SEARCH_PAGE, SearchIndex, asset
from mirror.web.extract import extract_html
from mirror.web.http import HTML_TYPES
from mirror.web.rewrite import Mapper, rewrite_css_bytes, rewrite_html
from mirror.web.urls import join

#: on_progress(done, total)
Progress = Callable[[int, int], None]

log = logging.getLogger(__name__)

CONTENTS = "index.html"
MARKER = ".mirror-export"  # marks a folder as ours, so a new export may overwrite it
#: the export may not reach the network at all; 'self' keeps it working when hosted on http
#: (a form's target is a navigation, which default-src does not cover: form-action does)
EXPORT_CSP = ("default-src 'self' file: data: blob: 'unsafe-inline' 'unsafe-eval'; "
              "frame-src 'self' file:; object-src 'self' file:; form-action 'self' file:")
EXPORT_HEAD = (
    f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">{SEAL_SCRIPT}'
    "<style>[data-mirror-href]:not([href]){text-decoration:underline dotted;"
    "cursor:not-allowed}</style>"
)
REWRITTEN_TYPES = HTML_TYPES | {"text/css"}
MAX_REDIRECTS = 10

# --- writing an export --------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    capture: Capture
    status: int
    mime: str
    path: str


@dataclass
class ExportResult:
    folder: Path
    files: int = 0
    pages: int = 0
    redirects: int = 0
    unreadable: int = 0
    seconds: float = 0.0
    contents: list[tuple[Entry, str | None, int]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"exported {self.files} files ({self.pages} pages, {self.redirects} redirects) "
                f"in {self.seconds:.1f}s: open {self.folder / CONTENTS}")


class ExportError(UsageError):
    """The export folder cannot be used."""


def plan_export(archive: CaptureIndex, at: str | None = None) -> dict[str, Entry]:
    """URL -> what to write where: the newest capture of each URL at or before `at`."""
    plan = {}
    for cap in archive.latest(at):
        status, mime = archive.status_and_mime(cap)
        status = status or 200
        mime = "text/html" if 300 <= status < 400 else mime
        plan[cap.url] = Entry(cap, status, mime, export_path(cap.url, mime))
    return plan


class Links:
    """How the files of an export refer to each other: by the path of each URL's entry, and a
    link to a redirect goes straight to where its chain ends, skipping the hops."""

    def __init__(self, archive: CaptureIndex, plan: dict[str, Entry]) -> None:
        self.archive, self.plan = archive, plan
        self.redirects: dict[str, str] = {}  # source URL -> target URL (canonical)

    def read_redirects(self, read: Callable[[Entry], Record | None]
                       ) -> dict[str, Record | None]:
        """Learn where each redirect of the plan leads; returns the records read, by URL."""
        records = {}
        for url, entry in self.plan.items():
            if 300 <= entry.status < 400:
                record = records[url] = read(entry)
                location = record.header("Location") if record else None
                if location:
                    self.redirects[url] = self.archive.key(join(url, location))
        return records

    def follow(self, url: str) -> Entry | None:
        """The entry a link to `url` opens: where its redirect chain ends in the plan (at most
        MAX_REDIRECTS hops), or None when the URL is not in the plan."""
        key = self.archive.key(url)
        for _ in range(MAX_REDIRECTS):
            nxt = self.redirects.get(key)
            if nxt is None or nxt not in self.plan:
                break
            key = nxt
        return self.plan.get(key)

    def ref(self, from_path: str, url: str) -> str | None:
        entry = self.follow(url)
        return relative_ref(from_path, entry.path) if entry else None

    def mapper(self, from_path: str) -> Mapper:
        return functools.partial(self.ref, from_path)


class FolderWriter:
    """Writes the files of one export; links resolve through the plan and redirect chains."""

    def __init__(self, archive: CaptureIndex, plan: dict[str, Entry], out: Path,
                 on_progress: Progress | None = None) -> None:
        self.archive, self.plan, self.out = archive, plan, out
        self.on_progress = on_progress
        self.links = Links(archive, plan)
        self.root = os.path.realpath(out)
        self.search: SearchIndex | None = None
        self.rendered = RenderedPages.load(archive)  # browser-captured pages: their DOMs

    def run(self) -> ExportResult:
        started = time.monotonic()
        result = ExportResult(self.out)
        records = self.links.read_redirects(lambda entry: self._read(entry, result))
        searchable = sum(_searchable(entry) for entry in self.plan.values())
        self.search = SearchIndex(self._open(INDEX_SCRIPT), searchable)
        try:
            for url, entry in self.plan.items():
                record = records.pop(url) if url in records else self._read(entry, result)
                title, size = self._write_entry(url, entry, record, result)
                result.files += 1
                if self.on_progress is not None:
                    self.on_progress(result.files, len(self.plan))
                if entry.mime in HTML_TYPES or 300 <= entry.status < 400:
                    result.contents.append((entry, title, size))
        finally:
            self.search.close()
        for name in ASSETS:
            self._write(name, asset(name))
        self._write(CONTENTS, contents_page(result.contents))
        self._write(MARKER, b"written by mirror export\n")
        result.seconds = time.monotonic() - started
        return result

    def _read(self, entry: Entry, result: ExportResult) -> Record | None:
        record = read_entry(self.archive, entry)
        result.unreadable += record is None
        return record

    def _write_entry(
        self, url: str, entry: Entry, record: Record | None, result: ExportResult
    ) -> tuple[str | None, int]:
        if record is None:
            self._write(entry.path, notice_page("Not readable", url, "could not be read"))
            return None, 0
        if 300 <= entry.status < 400:
            result.redirects += 1
            target = self.links.redirects.get(url)
            ref = self.links.ref(entry.path, target) if target else None
            self._write(entry.path, redirect_page(url, target, ref, entry.status))
            return None, 0
        body, decoded = record.decoded()
        title = None
        if not decoded and entry.mime in REWRITTEN_TYPES:  # its links cannot be rewritten
            result.unreadable += 1
            self._write(entry.path, notice_page("Not readable", url, "could not be decoded"))
            return None, 0
        if entry.mime in HTML_TYPES:
            source = page_source(self.rendered, self.archive, entry.capture, body,
                                 record.content_type)
            page = rewrite_html(source.body, url, source.content_type,
                                self.links.mapper(entry.path), head=EXPORT_HEAD,
                                prepare=source.prepare)
            self._index(url, entry, page.title, source.body, source.content_type)
            body, title = page.body, page.title
            result.pages += 1
        elif entry.mime == "text/css":
            body = rewrite_css_bytes(body, url, record.content_type, self.links.mapper(entry.path))
        self._write(entry.path, body)
        return title, len(body)

    def _index(self, url: str, entry: Entry, title: str | None, body: bytes,
               content_type: str | None) -> None:
        """Add the page's text, as archived (as rendered, for a browser-captured page), to
        the search index: pages that answered 2xx."""
        if self.search is not None and _searchable(entry):
            text = extract_html(body, url, content_type).text
            self.search.add(quote(entry.path, safe="/="), shown_url(url), title, text,
                            entry.capture.digest, url)

    def _write(self, rel: str, data: bytes) -> None:
        with self._open(rel) as f:
            f.write(data)

    def _open(self, rel: str) -> BinaryIO:
        path = os.path.join(self.out, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.realpath(path).startswith(self.root + os.sep):
            raise ExportError(f"{rel}: would be written outside {self.out}")  # a symlink
        return open(path, "wb")


def read_entry(archive: CaptureIndex, entry: Entry, *, quiet: bool = False) -> Record | None:
    """The record of a planned capture, or None (with a warning unless `quiet`) when it
    cannot be read: one bad record never stops an export."""
    try:
        return archive.read(entry.capture)
    except ReadError as exc:
        if not quiet:
            cap = entry.capture
            report(Damage(f"warc/{cap.filename}", cap.offset, f"{cap.url} not exported: {exc}"))
        return None


def _searchable(entry: Entry) -> bool:
    return entry.mime in HTML_TYPES and 200 <= entry.status < 300


def export_folder(archive: CaptureIndex, out: Path, at: str | None = None,
                  on_progress: Progress | None = None) -> ExportResult:
    """Write the export of `archive` (as of `at`) into `out`, an empty or earlier export;
    on_progress(files written, files in all) after each file."""
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ExportError(f"{out}: not empty and not an earlier export; choose another folder")
    out.mkdir(parents=True, exist_ok=True)
    return FolderWriter(archive, plan_export(archive, at), out, on_progress).run()


# --- generated pages ----------------------------------------------------------------------

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


def contents_page(contents: list[tuple[Entry, str | None, int]]) -> bytes:
    rows = page_rows(
        (quote(e.path, safe="/="), e.capture.url, title, e.status, size)
        for e, title, size in sorted(contents, key=lambda c: c[0].capture.url)
    )
    body = (
        f'<h1>Archived pages</h1><form action="{SEARCH_PAGE}"><input name="q" type="search" '
        'placeholder="words in the pages" aria-label="words in the pages"> '
        "<button>Search the text</button></form>"
        f"<p>{len(contents)} pages. "
        '<input id="q" type="search" placeholder="filter" autofocus></p>'
        '<table class="pages"><tr><th>page</th><th>status</th><th>bytes</th></tr>\n'
        f"{rows}\n</table>"
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
