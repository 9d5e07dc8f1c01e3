"""Storing a capture durably: revisit choice, WARC append and flush, group commit, undo."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mirror import __version__, crashpoints
from mirror.archive import warcread
from mirror.archive.diskspace import disk_full_message, free_bytes, is_disk_full
from mirror.archive.warcwriter import (
    NOT_MODIFIED,
    OPEN_SUFFIX,
    CaptureLocation,
    Conversion,
    Exchange,
    Revisit,
    WarcWriter,
)
from mirror.crawl import history
from mirror.crawl.discover import MAX_PARSE_BYTES
from mirror.crawl.parsehelper import Page
from mirror.errors import MirrorError
from mirror.manifest.renders import RenderRow
from mirror.manifest.writer import (
    CaptureRow,
    DatabaseGone,
    Manifest,
    ManifestReconnected,
    ManifestWriteError,
    NewUrl,
    Original,
    Previous,
    UrlItem,
)
from mirror.model import Discovered, ExitCode, HostLease, PageText
from mirror.web.http import header_map, mime_of
from mirror.web.robotsmeta import HEADER, header_values

if TYPE_CHECKING:
    from mirror.browser.api import Rendered

log = logging.getLogger(__name__)

#: times a group's transaction is run again after the database connection was lost and
#: made again (each reconnection is bounded in time by itself: manifest/reconnect.py)
RECOMMITS = 10

#: whether link discovery needs a response's body: (status, headers, truncated, the URL)
WantsBody = Callable[[int, dict[str, str], str | None, UrlItem | None], bool]
#: told of each capture once its group is committed: (item, exchange, error, URLs found)
Committed = Callable[[UrlItem, Exchange, str | None, list[NewUrl]], None]
#: told of each capture inside its transaction (what it writes joins it): run, item, found
Learn = Callable[[int, UrlItem, Discovered], None]

#: most captures in one group, i.e. one manifest transaction (bench/README.md: the
#: manifest's CPU per capture halves from 1 to 16, and changes little after 32)
GROUP_SIZE = 32
#: longest a flushed capture waits for its group's commit, in seconds, so that a slow
#: crawl neither holds captures long nor keeps their new URLs from the frontier
GROUP_WAIT = 0.02


class StorageError(MirrorError):
    """The archive cannot be written (disk full, I/O error): the run stops, nothing is lost."""


class StorageFull(StorageError):
    """The archive's disk is full (archive.diskspace): the run stops, nothing is lost."""

    exit_code = ExitCode.DISK_FULL


def storage_error(what: str, exc: BaseException, path: Path | str) -> StorageError:
    """The error a failed write of `path` stops the run with (a PostgreSQL manifest's
    full disk is its server's, said as the server says it)."""
    if isinstance(path, Path) and is_disk_full(exc):
        return StorageFull(disk_full_message(path, free_bytes(path)))
    return StorageError(f"{what}: {getattr(exc, 'strerror', None) or exc}")


@dataclass(frozen=True)
class _Pending:
    """A capture whose records are flushed, waiting in the group for its commit."""

    run_id: int
    item: UrlItem
    ex: Exchange
    error: str | None
    links: Discovered
    loc: CaptureLocation
    row: CaptureRow
    kind: str  # for the crash-point tests (set while a hook is)
    render: RenderRow | None = None  # a page loaded in a browser: its conversion record


class CaptureStore:
    """The single owner of the durability order. A capture's records are appended to the
    open WARC file and flushed; the capture then waits in a group of flushed captures, and
    one manifest transaction records every capture of the group, each URL's outcome and the
    URLs they link to. If that transaction fails, the group's records are cut off again
    (they are the tail of the open file), so the manifest never misses a record the WARC
    file holds; a crash before it leaves flushed records past the last commit, which
    start-up adopts in order (Startup._adopt_tail). A payload the archive already has (a
    304 that confirms the last capture, or the same 2xx payload of the same status
    anywhere) is written as a revisit record.

    A group is committed when it holds `group_size` captures, `group_wait` seconds after
    its first one (when an event loop runs), before the WARC file rotates or closes,
    before a revisit lookup that a capture of the group could answer, with an out-of-band
    capture (robots.txt), and whenever the frontier runs dry (`commit_pending`): new URLs
    are leasable only once committed. `group_size` 1 commits each capture at once."""

    def __init__(self, manifest: Manifest, warc_dir: Path, wants_body: WantsBody, *,
                 writer: WarcWriter | None = None, history: bool = False,
                 group_size: int | None = None, group_wait: float | None = None,
                 committed: Committed | None = None,
                 failed: Callable[[str, ExitCode], object] | None = None,
                 learn: Learn | None = None,
                 lease_of: Callable[[UrlItem], HostLease | None] | None = None,
                 opened_file: Callable[[str], object] | None = None,
                 closed_file: Callable[[str], None] | None = None) -> None:
        self.manifest = manifest
        self.warc_dir = warc_dir
        self.wants_body = wants_body
        #: None in the store start-up adopts with (commit, page, previous: it writes nothing)
        self.writer = writer
        self.history = history  # an earlier run than the one stored into has captures
        self.group_size = GROUP_SIZE if group_size is None else max(group_size, 1)
        self.group_wait = GROUP_WAIT if group_wait is None else group_wait
        self.committed = committed
        self.failed = failed  # told why a group committed outside store() failed
        self._group: list[_Pending] = []
        self._originals: set[tuple[str, int]] = set()  # (digest, status) of its responses
        self._timer: asyncio.TimerHandle | None = None
        #: told the name of each WARC file the writer closed ([archive] store uploads it)
        self.closed_file = closed_file
        #: told the name of each WARC file the writer began (a shared run records it)
        self.opened_file = opened_file
        #: a shared run: the host lease a URL was taken under, which fences its commit
        #: (one capture per group then: a record fenced off is the file's tail, cut off)
        self.lease_of = lease_of
        self._file = ""  # the file the last capture went to
        #: learned trap patterns (crawl/learned.py): each capture's figures, committed with it
        self.learn = learn

    def previous(self, run_id: int, item: UrlItem) -> Previous | None:
        """The URL's latest capture from an earlier run (no query when there is none); in
        a shared run only one in this worker's own files (a 304 is read back from it)."""
        prev = self.manifest.captures.previous(item.id, run_id) if self.history else None
        if prev is not None and not self._own(prev.original.filename):
            return None
        return prev

    def store(self, run_id: int, item: UrlItem, ex: Exchange, error: str | None,
              prev: Previous | None, links: Discovered, rendered: Rendered | None = None,
              browser: str = "") -> None:
        """Append the capture's records and flush them; the capture joins the group (which
        may be committed now). Raises StorageError when the archive cannot be written (the
        URL is then not done: it is fetched again on resume). A page loaded in a browser
        (`rendered`, by `browser`, e.g. "Chromium/120.0") has its DOM written as a
        conversion record after the response record, a renders row, and its rendered text
        as its text (search, diffs)."""
        assert self.writer is not None
        conversion = None
        if rendered is not None:
            conversion = Conversion(rendered.html.encode("utf-8", "surrogatepass"),
                                    rendered_by(browser), rendered.screenshot)
            links = links._replace(text=PageText(rendered.title, rendered.text))
        dedupable = history.dedupable(ex)
        if dedupable and (ex.payload_digest, ex.status) in self._originals:
            self.commit_group()  # the lookup sees committed captures only
        same = (self.manifest.captures.original_by_digest(ex.payload_digest, ex.status)
                if dedupable else None)
        if same is not None and not self._own(same.filename):
            same = None  # another worker's file may yet be declared lost
        revisit, original = history.choose_revisit(ex, prev, same)
        kind = ""
        if crashpoints.hook is not None:
            kind = crashpoints.label = history.capture_kind(ex, revisit, original, item.via,
                                                            run_id)
        if self._group:
            crashpoints.reached("group:between")
        try:
            loc = self.writer.write_capture(ex, revisit, conversion)
        except OSError as exc:
            raise storage_error("cannot write to the archive", exc,
                                self.writer.open_path) from exc
        self._note_file(loc.response.filename)
        row = capture_row(ex, loc, links.target, revisit, original, prev)
        render = render_row(loc, rendered_by(browser), rendered.requests) \
            if rendered is not None else None
        self._join(_Pending(run_id, item, ex, error, links, loc, row, kind, render))
        crashpoints.reached("commit:before")
        # the writer rotates before the next capture once the file is this long, and a
        # file is closed only when the manifest has every capture in it
        end = loc.request.offset + loc.request.length
        if len(self._group) >= self.group_size or end >= self.writer.max_bytes:
            self.commit_group()

    def _join(self, pending: _Pending) -> None:
        if not self._group and self.group_size > 1 and math.isfinite(self.group_wait):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: the group waits for a size or an explicit commit
                loop = None
            if loop is not None:
                self._timer = loop.call_later(self.group_wait, self.commit_pending)
        self._group.append(pending)
        if pending.row.record_type == "response" and pending.row.truncated is None:
            self._originals.add((pending.row.payload_digest, pending.row.status))

    def commit_group(self) -> bool:
        """Commit the captures waiting in the group, in one manifest transaction; False
        when none waits. If the transaction fails, every record of the group is cut off
        the WARC file again and the URLs go back to pending: StorageError."""
        group, self._group = self._group, []
        self._originals.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not group:
            return False
        try:
            fenced = self._commit_rows(group)
        except ManifestWriteError as exc:
            self._undo(group)
            if isinstance(exc, DatabaseGone):  # its own words and exit code
                raise
            raise storage_error("cannot update the manifest", exc, self.manifest.path) from exc
        return self._committed(group, fenced)

    def _commit_rows(self, group: list[_Pending]) -> list[_Pending]:
        """The group's rows in one transaction; the captures whose fenced commit was
        refused (a lost lease). Run again whole when the database connection was lost and
        made again meanwhile (ManifestReconnected: it did not commit; its records are
        still the file's tail)."""
        for attempt in range(1, RECOMMITS + 1):
            try:
                return self._commit_once(group)
            except ManifestReconnected as exc:
                if attempt == RECOMMITS:
                    raise
                log.warning("committing %d captures again: %s", len(group), exc)
        raise AssertionError("unreachable")

    def _commit_once(self, group: list[_Pending]) -> list[_Pending]:
        fenced: list[_Pending] = []
        with self.manifest.group():
            for p in group:
                if crashpoints.hook is not None:
                    crashpoints.label = p.kind
                lease = self.lease_of(p.item) if self.lease_of is not None else None
                if not self.manifest.captures.commit(
                        p.run_id, p.item, p.row, p.links.links, failed_reason=p.error,
                        note=p.links.note, text=p.links.text, lease=lease,
                        robots=p.links.robots, render=p.render):
                    fenced.append(p)
                elif self.learn is not None:
                    self.learn(p.run_id, p.item, p.links)
            if len(group) > 1:
                crashpoints.reached("group:inside", "group")
        return fenced

    def _committed(self, group: list[_Pending], fenced: list[_Pending]) -> bool:
        if fenced:  # a shared run's lease lost: one capture per group, the file's tail
            assert self.writer is not None and len(group) == 1
            self.writer.undo(group[0].loc)
            crashpoints.reached("fenced:after-undo", "group")
            log.warning("not stored: %s (this worker lost the lease on %s; it is fetched "
                        "again by the worker that holds the host now)", group[0].item.url,
                        group[0].item.site)
            return True
        for p in group:
            crashpoints.reached("commit:after", p.kind)
            if self.committed is not None:
                self.committed(p.item, p.ex, p.error, p.links.links)
        try:
            self.manifest.texts.index_due()
        except ManifestWriteError as exc:  # the captures are committed: index them later
            log.warning("search index not updated (%s); it is at the end of the run", exc)
        return True

    def commit_pending(self) -> bool:
        """commit_group for callers that store nothing themselves (the group's timer, the
        frontier run dry, the end of the run): a failure goes to `failed` (the run stops),
        or is raised when no one is told."""
        try:
            return self.commit_group()
        except (StorageError, DatabaseGone) as exc:
            if self.failed is None:
                raise
            self.failed(str(exc), exc.exit_code)
            return False

    def _undo(self, group: list[_Pending]) -> None:
        """A group whose transaction failed: its records are the tail of the open file
        (nothing else is appended while a group waits, and a file never rotates under
        one), so cutting back to its first record removes exactly them."""
        assert self.writer is not None
        self.writer.undo(group[0].loc)
        try:
            self.manifest.urls.unlease([p.item.id for p in group])
        except ManifestWriteError:  # leased URLs go back to pending on resume anyway
            pass

    def commit(self, run_id: int, item: UrlItem, ex: Exchange, loc: CaptureLocation,
               error: str | None, revisit: Revisit | None, original: Original | None,
               prev: Previous | None, links: Discovered) -> None:
        """Record one capture whose records are flushed, adopted at start-up, and what it
        links to, in its own manifest transaction (in file order: a revisit's original is
        committed before it)."""
        row = capture_row(ex, loc, links.target, revisit, original, prev)
        crashpoints.reached("commit:before")
        with self.manifest.group():
            self.manifest.captures.commit(run_id, item, row, links.links, failed_reason=error,
                                         note=links.note, text=links.text, robots=links.robots)
            if self.learn is not None:
                self.learn(run_id, item, links)
        self.manifest.texts.index_due()
        crashpoints.reached("commit:after")

    def _own(self, filename: str) -> bool:
        """Whether a capture's file is one this process may read and refer to: any in a
        folder of its own; in a shared run, only those in this worker's folder."""
        if self.lease_of is None:
            return True
        return self.warc_path(filename).exists()

    def warc_path(self, filename: str) -> Path:
        return warc_path(self.warc_dir, filename)

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
            status, headers = raw.status or 200, _discovery_headers(raw.headers or ())
            wanted = self.wants_body(status, headers, None, item)
            return Page(status, headers, raw.payload if wanted else None, None)
        headers = _discovery_headers(ex.response_headers)
        body = None
        if self.wants_body(ex.status, headers, ex.truncated, item):
            if stored is not None:
                body = warcread.read_raw(self.warc_path(stored.filename), stored.offset).payload
            else:
                ex.body.seek(0)  # a longer body is not read whole into memory (parse_cut)
                body = ex.body.read(MAX_PARSE_BYTES)
        return Page(ex.status, headers, body, ex.truncated)

    def _note_file(self, filename: str) -> None:
        """The writer rotated when a capture lands in another file: the last one is closed."""
        if filename != self._file:
            if self._file and self.closed_file is not None:
                self.closed_file(self._file)
            self._file = filename
            if filename and self.opened_file is not None:
                self.opened_file(filename)

    def close(self) -> None:
        """Commit the group, then close the open WARC file (rename it to its final name)."""
        try:
            self.commit_pending()
        finally:
            if self.writer is not None:
                self.writer.close()
                self._note_file("")


def warc_path(warc_dir: Path, filename: str) -> Path:
    """A WARC file by its final name, or still .open (while recovery adopts its tail)."""
    path = warc_dir / filename
    return path if path.exists() else path.with_name(filename + OPEN_SUFFIX)


def _discovery_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A response's headers as discovery reads them: the first value of each, but every
    X-Robots-Tag value (web.robotsmeta: one agent prefix holds for its own header only)."""
    headers = header_map(pairs)
    if HEADER in headers:
        headers[HEADER] = header_values(pairs) or ""
    return headers


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


def rendered_by(browser: str) -> str:
    """WARC-Rendered-By of a conversion record: mirror's version, then the browser's."""
    return f"mirror/{__version__}; {browser or 'unknown browser'}"


def render_row(loc: CaptureLocation, browser: str, requests: int) -> RenderRow | None:
    """The renders row of a capture written with its conversion record."""
    if loc.conversion is None:
        return None
    return RenderRow(loc.conversion.filename, loc.conversion.offset, loc.conversion.length,
                     browser, requests, loc.warc_date)
