"""Static export: a folder of rewritten files that opens from file://, with a contents page
and a search of the pages' text (sitesearch.py)."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from mirror.archive.damage import Damage, report
from mirror.archive.warcread import ReadError
from mirror.errors import UsageError
from mirror.model import WorkProgress as Progress
from mirror.model import work_stage as stage
from mirror.replay.captures import CaptureIndex, Record
from mirror.replay.exportpages import (
    CONTENTS,
    EXPORT_CSP,
    ContentsPages,
    notice_page,
    redirect_page,
    shown_url,
)
from mirror.replay.exportpath import export_path, relative_ref
from mirror.replay.exportplan import Entry, Plan
from mirror.replay.renders import RenderedPages, page_source
from mirror.replay.seal import SEAL_SCRIPT
from mirror.replay.sitesearch import ASSETS, INDEX_SCRIPT, SearchIndex, asset
from mirror.web.extract import extract_html
from mirror.web.http import HTML_TYPES
from mirror.web.rewrite import Mapper, rewrite_css_bytes, rewrite_html
from mirror.web.urls import join

log = logging.getLogger(__name__)

MARKER = ".mirror-export"  # marks a folder as ours, so a new export may overwrite it
EXPORT_HEAD = (
    f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">{SEAL_SCRIPT}'
    "<style>[data-mirror-href]:not([href]){text-decoration:underline dotted;"
    "cursor:not-allowed}</style>"
)
REWRITTEN_TYPES = HTML_TYPES | {"text/css"}
MAX_REDIRECTS = 10

# --- writing an export --------------------------------------------------------------------


@dataclass
class ExportResult:
    folder: Path
    files: int = 0
    pages: int = 0
    redirects: int = 0
    unreadable: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        return (f"exported {self.files} files ({self.pages} pages, {self.redirects} redirects) "
                f"in {self.seconds:.1f}s: open {self.folder / CONTENTS}")


class ExportError(UsageError):
    """The export folder cannot be used."""


def plan_export(archive: CaptureIndex, at: str | None = None) -> Plan:
    """URL -> what to write where: the newest capture of each URL at or before `at`."""
    return Plan(_planned(archive, at))


def _planned(archive: CaptureIndex, at: str | None) -> Iterator[tuple[str, Entry]]:
    for cap in archive.latest(at):
        status, mime = archive.status_and_mime(cap)
        status = status or 200
        mime = "text/html" if 300 <= status < 400 else mime
        yield cap.url, Entry(cap, status, mime, export_path(cap.url, mime))


class Links:
    """How the files of an export refer to each other: by the path of each URL's entry, and a
    link to a redirect goes straight to where its chain ends, skipping the hops."""

    def __init__(self, archive: CaptureIndex, plan: Plan) -> None:
        self.archive, self.plan = archive, plan
        self.redirects: dict[str, str] = {}  # source URL -> target URL (canonical)
        for url, entry in plan.redirects():  # damage is reported when the entry is written
            record = read_entry(archive, entry, quiet=True)
            location = record.header("Location") if record else None
            if location:
                self.redirects[url] = archive.key(join(url, location))

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

    def __init__(self, archive: CaptureIndex, plan: Plan, out: Path,
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
        stage(self.on_progress, "writing files", len(self.plan))
        searchable = sum(_searchable(entry) for entry in self.plan.values())
        self.search = SearchIndex(self._open(INDEX_SCRIPT), searchable)
        try:
            with ContentsPages(self._write) as contents:
                for url, entry in self.plan.items():
                    record = self._read(entry, result)
                    title, size = self._write_entry(url, entry, record, result)
                    result.files += 1
                    if self.on_progress is not None:
                        self.on_progress(result.files, len(self.plan))
                    if entry.mime in HTML_TYPES or 300 <= entry.status < 400:
                        contents.add(entry, title, size)
        finally:
            self.search.close()
        for name in ASSETS:
            self._write(name, asset(name))
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
    stage(on_progress, "choosing the captures", len(archive.captures))
    return FolderWriter(archive, plan_export(archive, at), out, on_progress).run()
