"""Storing a capture durably: revisit choice, WARC append and flush, one manifest commit, undo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from mirror import crashpoints
from mirror.archive import warcread
from mirror.archive.manifest import (
    CaptureRow,
    Manifest,
    ManifestWriteError,
    Original,
    Previous,
    UrlItem,
)
from mirror.archive.warcwriter import (
    NOT_MODIFIED,
    OPEN_SUFFIX,
    CaptureLocation,
    Exchange,
    Revisit,
    WarcWriter,
)
from mirror.crawl import history
from mirror.crawl.parsepool import Page
from mirror.model import Discovered
from mirror.web.http import header_map, mime_of

#: whether link discovery needs a response's body: (status, headers, truncated, the URL)
WantsBody = Callable[[int, dict[str, str], str | None, UrlItem | None], bool]


class StorageError(Exception):
    """The archive cannot be written (disk full, I/O error): the run stops, nothing is lost."""


class CaptureStore:
    """The single owner of the durability order. A capture's records are appended to the
    open WARC file and flushed; then one manifest transaction records the capture, the URL's
    outcome and the URLs it links to; if that transaction fails, the records are cut off
    again, so the manifest never misses a record the WARC file holds. A payload the archive
    already has (a 304 that confirms the last capture, or the same 2xx payload of the same
    status anywhere) is written as a revisit record."""

    def __init__(self, manifest: Manifest, warc_dir: Path, wants_body: WantsBody) -> None:
        self.manifest = manifest
        self.warc_dir = warc_dir
        self.wants_body = wants_body
        self.writer: WarcWriter | None = None  # opened once recovery has closed old files
        self.history = False  # an earlier run than the one stored into has captures

    def previous(self, run_id: int, item: UrlItem) -> Previous | None:
        """The URL's latest capture from an earlier run (no query when there is none)."""
        return self.manifest.previous_capture(item.id, run_id) if self.history else None

    def store(self, run_id: int, item: UrlItem, ex: Exchange, error: str | None,
              prev: Previous | None, links: Discovered) -> None:
        """Append the capture's records, flush, commit. Raises StorageError when the archive
        cannot be written (the URL is then not done: it is fetched again on resume)."""
        assert self.writer is not None
        same = (self.manifest.original_by_digest(ex.payload_digest, ex.status)
                if history.dedupable(ex) else None)
        revisit, original = history.choose_revisit(ex, prev, same)
        if crashpoints.hook is not None:
            crashpoints.label = history.capture_kind(ex, revisit, original, item.via, run_id)
        try:
            loc = self.writer.write_capture(ex, revisit)
        except OSError as exc:
            raise StorageError(f"cannot write to the archive: {exc.strerror or exc}") from exc
        try:
            self.commit(run_id, item, ex, loc, error, revisit, original, prev, links)
        except ManifestWriteError as exc:
            self.writer.undo(loc)  # the manifest must never miss a record the WARC has
            raise StorageError(f"cannot update the manifest: {exc}") from exc

    def commit(self, run_id: int, item: UrlItem, ex: Exchange, loc: CaptureLocation,
               error: str | None, revisit: Revisit | None, original: Original | None,
               prev: Previous | None, links: Discovered) -> None:
        """Record a capture whose records are flushed (also one adopted at start-up) and
        what it links to, in one manifest transaction."""
        row = capture_row(ex, loc, links.target, revisit, original, prev)
        crashpoints.reached("commit:before")
        self.manifest.commit_capture(run_id, item, row, links.links, failed_reason=error,
                                     note=links.note, text=links.text)
        crashpoints.reached("commit:after")

    def warc_path(self, filename: str) -> Path:
        """A WARC file by its final name, or still .open (while recovery adopts its tail)."""
        path = self.warc_dir / filename
        return path if path.exists() else path.with_name(filename + OPEN_SUFFIX)

    def page(self, ex: Exchange, prev: Previous | None, stored: Original | None = None,
             item: UrlItem | None = None) -> Page:
        """What link discovery reads: the response, or for a 304 that confirms an earlier
        capture, the copy stored then (so discovery goes on through unchanged pages). An
        identical-payload revisit read back from the WARC has its payload in `stored`.
        `item` (the URL fetched) says whether a body that is not a page's is wanted too:
        a sitemap's, a robots.txt's."""
        confirmed = history.not_modified(ex, prev)
        if confirmed is not None:
            raw = warcread.read_raw(self.warc_path(confirmed.filename), confirmed.offset)
            status, headers = raw.status or 200, header_map(raw.headers or ())
            wanted = self.wants_body(status, headers, None, item)
            return Page(status, headers, raw.payload if wanted else None, None)
        headers = header_map(ex.response_headers)
        body = None
        if self.wants_body(ex.status, headers, ex.truncated, item):
            if stored is not None:
                body = warcread.read_raw(self.warc_path(stored.filename), stored.offset).payload
            else:
                ex.body.seek(0)
                body = ex.body.read()
        return Page(ex.status, headers, body, ex.truncated)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def capture_row(ex: Exchange, loc: CaptureLocation, location: str | None,
                revisit: Revisit | None, original: Original | None,
                prev: Previous | None) -> CaptureRow:
    """The manifest row of a capture, from what was received and where it was written."""
    headers = header_map(ex.response_headers)
    row = CaptureRow(
        warc_date=loc.warc_date,
        record_id=loc.record_id,
        filename=loc.response.filename,
        offset=loc.response.offset,
        length=loc.response.length,
        req_offset=loc.request.offset,
        req_length=loc.request.length,
        status=ex.status,
        mime=mime_of(headers.get("content-type")) or "",
        payload_digest=loc.payload_digest,
        payload_length=ex.body_length,
        etag=headers.get("etag"),
        last_modified=headers.get("last-modified"),
        location=location,
        truncated=ex.truncated,
    )
    if revisit is not None and original is not None:
        row = replace(row, original_id=original.id, record_type=(
            "not-modified" if revisit.profile == NOT_MODIFIED else "revisit"))
    if row.record_type == "not-modified" and original is not None and prev is not None:
        # the validators of the representation the 304 confirmed: what the archive holds
        # (the 304's own headers are not stored: its revisit record has an empty block)
        row = replace(row, mime=original.mime, etag=prev.etag, last_modified=prev.last_modified)
    return row
