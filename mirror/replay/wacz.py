"""WACZ 1.2.0 export: the WARC files, a CDXJ index, pages.jsonl (with each page's text) and
datapackage.json in a ZIP."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from warcio.timeutils import timestamp_to_iso_date

from mirror import __version__
from mirror.archive.damage import Damage, report
from mirror.archive.warcread import ReadError
from mirror.archive.warcwriter import OPEN_SUFFIX
from mirror.model import WorkProgress as Progress
from mirror.model import work_stage as stage
from mirror.replay.captures import Capture, CaptureIndex
from mirror.replay.destination import aside, check_destination, is_our_wacz
from mirror.web.extract import extract_html
from mirror.web.http import HTML_TYPES

#: py-wacz 0.6's validator knows only this version string; WACZ 1.2.0 keeps the field optional
WACZ_VERSION_FIELD = "1.1.1"
_CHUNK = 1 << 20
_ZIP64_SIZE = 1 << 31
_SPOOL = 16 << 20
#: No "hasText": ReplayWeb.page (2.4, wabac.js 2.26) searches the `text` of every page it
#: lists without it; with it, it searches a separate read of pages.jsonl cut at 1 MiB
#: compressed, whose torn last line fails the whole search (tests/test_replayweb_search.py).
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}


@dataclass(frozen=True)
class WaczResult:
    path: Path
    warc_files: int
    captures: int
    pages: int
    bytes: int

    def summary(self) -> str:
        return (f"wrote {self.path} ({self.warc_files} WARC files, {self.captures} captures, "
                f"{self.pages} pages, {self.bytes:,} bytes)")


def final_name(filename: str) -> str:
    """The name a WARC file has once closed (a .open file is packed as its complete prefix)."""
    return filename.removesuffix(OPEN_SUFFIX)


def page_lines(archive: CaptureIndex, on_progress: Progress | None = None
               ) -> Iterator[dict[str, str]]:
    """pages.jsonl entries: every HTML page archived with a 2xx status, with the title and
    the visible text read back from its record (one at a time: nothing is kept);
    on_progress(captures looked at, captures in all)."""
    total = len(archive.captures)
    for done, cap in enumerate(archive.captures, 1):
        if on_progress is not None:
            on_progress(done, total)
        status, mime = archive.status_and_mime(cap)
        if mime not in HTML_TYPES or not status or not 200 <= status < 300:
            continue
        entry = {"id": hashlib.sha1(f"{cap.timestamp}/{cap.url}".encode()).hexdigest()[:20],
                 "url": cap.url, "ts": timestamp_to_iso_date(cap.timestamp)}
        entry.update(_title_and_text(archive, cap))
        yield entry


def _title_and_text(archive: CaptureIndex, cap: Capture) -> dict[str, str]:
    try:
        record = archive.read(cap)
    except ReadError as exc:
        report(Damage(f"warc/{cap.filename}", cap.offset, f"page text left out: {exc}"))
        return {}
    body, decoded = record.decoded()
    if not decoded:  # still content-coded: parsing it would index noise
        return {}
    page = extract_html(body, cap.url, record.content_type)
    found = {"title": page.title, "text": page.text}
    return {key: value for key, value in found.items() if value}


def jsonl(header: Mapping[str, object], entries: Iterable[Mapping[str, object]]
          ) -> Iterator[bytes]:
    """The header and entries, a JSON object a line, in UTF-8 (\\u escapes would double
    the size of a CJK text)."""
    for entry in itertools.chain([header], entries):
        yield json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n"


class _Packer:
    """Adds entries to the ZIP and remembers each one's size and sha256 for datapackage.json."""

    def __init__(self, zf: zipfile.ZipFile, spool_dir: Path) -> None:
        self.zf = zf
        self.spool_dir = spool_dir
        self.resources: list[dict[str, object]] = []

    def add_stream(self, name: str, src: IO[bytes], size: int,
                   copied: Callable[[int], None] | None = None) -> None:
        """A WARC file: already gzipped, and readers seek into it: stored; copied(bytes)
        after each chunk."""
        self._copy(name, src, size, zipfile.ZIP_STORED, copied)

    def add_lines(self, name: str, lines: Iterable[bytes]) -> int:
        """Deflate the lines into the entry `name`; returns how many there were. They are
        spooled first (to disk past _SPOOL bytes) because only the size says whether the
        entry needs ZIP64 headers, and ReplayWeb.page misreads an entry that has them in its
        local header but not in the central directory, as a small one forced to ZIP64 has."""
        count = 0
        with tempfile.SpooledTemporaryFile(_SPOOL, dir=str(self.spool_dir)) as spool:
            for line in lines:
                spool.write(line)
                count += 1
            size = spool.tell()
            spool.seek(0)
            self._copy(name, spool, size, zipfile.ZIP_DEFLATED)
        return count

    def _copy(self, name: str, src: IO[bytes], size: int, compress_type: int,
              copied: Callable[[int], None] | None = None) -> None:
        info = zipfile.ZipInfo(name, _zip_time())
        info.compress_type = compress_type
        digest = hashlib.sha256()
        zip64 = size >= _ZIP64_SIZE
        with self.zf.open(info, "w", force_zip64=zip64) as dst:
            left = size
            while left and (chunk := src.read(min(_CHUNK, left))):
                digest.update(chunk)
                dst.write(chunk)
                left -= len(chunk)
                if copied is not None:
                    copied(len(chunk))
        self._note(name, size - left, digest.hexdigest())

    def add_bytes(self, name: str, data: bytes, *, listed: bool = True) -> None:
        info = zipfile.ZipInfo(name, _zip_time())
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(info, data)
        if listed:
            self._note(name, len(data), hashlib.sha256(data).hexdigest())

    def _note(self, name: str, size: int, sha256: str) -> None:
        self.resources.append({"name": os.path.basename(name).lower(), "path": name,
                               "hash": f"sha256:{sha256}", "bytes": size})


def _zip_time() -> tuple[int, int, int, int, int, int]:
    now = datetime.now(UTC)
    return (now.year, now.month, now.day, now.hour, now.minute, now.second)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def datapackage(resources: list[dict[str, object]], title: str,
                home: Capture | None) -> dict[str, object]:
    """WACZ 1.2.0 says profile "wacz", but the reference validator (py-wacz, through
    frictionless) rejects any profile but "data-package", which py-wacz itself writes."""
    package: dict[str, object] = {
        "profile": "data-package",
        "wacz_version": WACZ_VERSION_FIELD,
        "title": title,
        "created": _now(),
        "modified": _now(),
        "software": f"mirror {__version__}",
        "resources": resources,
    }
    if home is not None:
        package["mainPageURL"] = home.url
        package["mainPageDate"] = timestamp_to_iso_date(home.timestamp)
    return package


def write_wacz(archive: CaptureIndex, out: Path, *, title: str,
               start_urls: tuple[str, ...] = (),
               on_progress: Progress | None = None,
               force: bool = False) -> WaczResult:
    """Pack every WARC file of the archive into `out` (written aside, then renamed), with
    progress in three steps (model.work_stage): WARC bytes packed, captures indexed, captures
    looked at for pages. `out` may be an
    earlier WACZ of mirror's, any regular file with `force`, nothing else (DestinationError)."""
    check_destination(out, force=force, ours=is_our_wacz)
    files = archive.files
    listed = files.warc_files()  # a symlink out of the archive is not listed (reported)
    lines = (line.encode("utf-8") for line in archive.captures.cdxj_lines(final_name))
    tmp = aside(out)
    try:
        pages = _pack(archive, tmp, listed, lines, title, start_urls, on_progress)
        check_destination(out, force=force, ours=is_our_wacz)  # nothing else came meanwhile
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return WaczResult(out, len(listed), len(archive.captures), pages, out.stat().st_size)


def _pack(archive: CaptureIndex, tmp: Path, listed: dict[str, int], lines: Iterable[bytes],
          title: str, start_urls: tuple[str, ...],
          on_progress: Progress | None) -> int:
    files = archive.files
    sizes = {name: files.packable_size(name, size) for name, size in listed.items()}
    packed, total = 0, sum(sizes.values())

    def copied(size: int) -> None:
        nonlocal packed
        packed += size
        if on_progress is not None:
            on_progress(packed, total)

    with zipfile.ZipFile(tmp, "w") as zf:
        packer = _Packer(zf, tmp.parent)
        stage(on_progress, "packing the WARC files (bytes)", total)
        for name, size in sizes.items():
            with files.stream(name) as src:  # a file in a store is streamed, not downloaded
                packer.add_stream(f"archive/{final_name(name)}", src, size, copied)
        stage(on_progress, "sorting the index")
        packer.add_lines("indexes/index.cdxj", lines)
        stage(on_progress, "the pages' text", len(archive.captures))
        pages = packer.add_lines("pages/pages.jsonl",
                                 jsonl(PAGES_HEADER, page_lines(archive, on_progress))) - 1
        home = next((c for u in start_urls for c in archive.captures_of(u)), None)
        package = json.dumps(datapackage(packer.resources, title, home), indent=2).encode()
        packer.add_bytes("datapackage.json", package, listed=False)
        digest = {"path": "datapackage.json",
                  "hash": "sha256:" + hashlib.sha256(package).hexdigest()}
        packer.add_bytes("datapackage-digest.json", json.dumps(digest, indent=2).encode(),
                         listed=False)
    return pages
