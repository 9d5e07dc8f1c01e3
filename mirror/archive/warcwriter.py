"""WARC writer: the only code that writes WARC bytes (warcinfo, request/response, rotation)."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import IO

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from mirror import __version__, crashpoints
from mirror.archive.fsutil import fsync_dir
from mirror.archive.index import SCREENSHOT as SCREENSHOT  # the writer's callers' name
from mirror.model import IDENTICAL as IDENTICAL  # what the writer is given: in model.py,
from mirror.model import NOT_MODIFIED as NOT_MODIFIED  # for the pure stages without
from mirror.model import Exchange as Exchange  # warcio; named here for the writer's
from mirror.model import Revisit as Revisit  # callers
from mirror.web.http import fix_response_headers, redact_request_headers

try:  # ISA-L's deflate: about 10x zlib's speed on web pages, output about 5% larger
    from isal import isal_zlib as _deflate

    GZIP_LEVEL = 2  # ISA-L's default; its level 3 halves the speed on incompressible data
except ImportError:  # no isal wheel for this platform: the standard library's zlib
    _deflate = zlib  # type: ignore[misc, no-redef, unused-ignore]  # (no-redef with isal)
    GZIP_LEVEL = 6

log = logging.getLogger(__name__)

WARC_VERSION = "WARC/1.1"
OPEN_SUFFIX = ".open"
FILE_RE = re.compile(r"^(?P<name>.+)-(?P<ts>\d{17})-(?P<serial>\d{5,})\.warc\.gz(?:\.open)?$")


@dataclass(frozen=True)
class RecordLocation:
    """Where one record lives: file name (final, not .open), byte offset, compressed length."""

    filename: str
    offset: int
    length: int


@dataclass(frozen=True)
class CaptureLocation:
    """What the manifest needs to find a capture again."""

    response: RecordLocation
    request: RecordLocation
    warc_date: str
    record_id: str
    payload_digest: str
    #: a page loaded in a browser: its conversion record (the rendered DOM)
    conversion: RecordLocation | None = None


@dataclass(frozen=True)
class Conversion:
    """A page's rendered DOM (and screenshot), written right after its response record:
    a WARC conversion record (WARC/1.1 6.8) that refers to it, then the screenshot as a
    resource record named SCREENSHOT + the page URL."""

    html: bytes  # the serialised DOM, UTF-8
    rendered_by: str  # WARC-Rendered-By: "mirror/<version>; <browser>/<version>"
    screenshot: bytes | None = None  # PNG



def _sha1_of(data: bytes) -> str:
    return sha1_digest(hashlib.sha1(data))


def sha1_digest(hasher: hashlib._Hash) -> str:
    """A WARC digest value: the algorithm, a colon, the digest in base32."""
    return "sha1:" + base64.b32encode(hasher.digest()).decode("ascii")


def warc_filename(name: str, when: datetime, serial: int) -> str:
    stamp = when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"
    return f"{name}-{stamp}-{serial:05d}.warc.gz"


def next_serial(warc_dir: Path) -> int:
    """One more than the highest serial in the folder, so serials keep rising across runs."""
    serials = [int(m["serial"]) for p in _listdir(warc_dir) if (m := FILE_RE.match(p))]
    return max(serials, default=0) + 1


def _listdir(folder: Path) -> list[str]:
    return os.listdir(folder) if folder.is_dir() else []


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def utc_now() -> datetime:
    return datetime.now(UTC)


class WarcWriter:
    """Appends capture groups to the open WARC file of a site, rotating by size.

    Single owner of the files under warc/: each file is written as ``<final>.open`` and renamed
    when closed. Clock and record-id factory are injected so output can be pinned in tests.
    """

    def __init__(
        self,
        warc_dir: Path,
        name: str,
        max_bytes: int,
        info: dict[str, str],
        *,
        clock: Callable[[], datetime] = utc_now,
        new_id: Callable[[], str] = new_record_id,
        fsync: bool = False,
        opener: Callable[[Path], IO[bytes]] | None = None,
    ) -> None:
        self.warc_dir = warc_dir
        self.name = name
        self.max_bytes = max_bytes
        self.info = info
        self.clock = clock
        self.new_id = new_id
        self.fsync = fsync
        self.opener = opener or _create  # tests inject a file that fails (ENOSPC) here
        # warcio builds the records; we gzip each one ourselves (see _GzipMember)
        self._writer = WARCWriter(None, gzip=False, warc_version=WARC_VERSION)
        self._file: IO[bytes] | None = None
        self._abandoned = False  # the file was closed after a failed write, not renamed
        self._good = 0  # where the file's flushed, kept bytes end (a failed flush: cut here)
        self._filename = ""
        self._warcinfo_id = ""

    @property
    def open_path(self) -> Path:
        """The file being written (`.open`), or the folder between two files."""
        return self.warc_dir / (self._filename + OPEN_SUFFIX) if self._filename else \
            self.warc_dir

    # -- file lifecycle -------------------------------------------------------------
    def _open_new(self) -> None:
        self.warc_dir.mkdir(parents=True, exist_ok=True)
        self._filename = warc_filename(self.name, self.clock(), next_serial(self.warc_dir))
        path = self.warc_dir / (self._filename + OPEN_SUFFIX)
        self._file = self.opener(path)
        self._warcinfo_id = self.new_id()
        record = self._writer.create_warc_record(
            "",
            "warcinfo",
            payload=BytesIO(_warc_fields(self.info)),
            length=len(_warc_fields(self.info)),
            warc_content_type="application/warc-fields",
            warc_headers_dict={
                "WARC-Record-ID": self._warcinfo_id,
                "WARC-Date": self._date(self.clock()),
                "WARC-Filename": self._filename,
            },
        )
        try:
            self._append(record)
            crashpoints.reached("open:unflushed", "warcinfo")
            self._flush()
        except BaseException:  # e.g. ENOSPC: leave no file with a torn warcinfo behind
            self._good = 0
            self._abandon()
            self._abandoned = False
            path.unlink(missing_ok=True)
            raise
        log.info("opened %s", self._filename)

    def close(self) -> None:
        """Flush and rename the open file to its final name (also one abandoned after a
        failed write: it holds its kept records only)."""
        if self._file is None:
            if self._abandoned:
                self._abandoned = False
                self._rename()
            return
        try:
            self._flush(force_sync=True)
        except OSError:  # e.g. ENOSPC: cut back, closed; renamed by a later close()
            self._abandon()
            raise
        self._file.close()
        self._file = None
        self._rename()

    def _rename(self) -> None:
        open_path = self.warc_dir / (self._filename + OPEN_SUFFIX)
        crashpoints.reached("rotate:before-rename", "file")
        os.replace(open_path, self.warc_dir / self._filename)
        crashpoints.reached("rotate:after-rename", "file")
        fsync_dir(self.warc_dir)
        log.info("closed %s", self._filename)

    # -- writing --------------------------------------------------------------------
    def write_capture(self, ex: Exchange, revisit: Revisit | None = None,
                      conversion: Conversion | None = None) -> CaptureLocation:
        """Append a response (or revisit) record, the page's rendered DOM if it was loaded in
        a browser (`conversion`), and the request record; return where.

        On any error the file is cut back to where the group started, so a failed write
        never leaves a partial record behind.
        """
        # Rotate before writing, never right after: a file is renamed only once the manifest
        # has recorded everything in it, so recovery needs to look at .open files alone.
        if self._file is not None and self._file.tell() >= self.max_bytes:
            self.close()
        if self._file is None:
            self.close()  # a file abandoned after a failed write gets its final name
            self._open_new()
        assert self._file is not None
        date = self._date(self.clock())
        resp_id, req_id = self.new_id(), self.new_id()
        response = (self._revisit_record(ex, date, resp_id, revisit) if revisit
                    else self._response_record(ex, date, resp_id))
        request = self._request_record(ex, date, req_id, resp_id)
        start = self._file.tell()
        try:
            crashpoints.reached("append:before")
            resp_loc = self._append(response)
            crashpoints.reached("append:between")
            conv_loc = (self._append_rendered(conversion, ex.url, date, resp_id)
                        if conversion is not None else None)
            req_loc = self._append(request)
            crashpoints.reached("append:unflushed")
            self._flush()
        except BaseException:
            self._rollback(start)
            raise
        digest = revisit.payload_digest if revisit else response.payload_digest
        return CaptureLocation(resp_loc, req_loc, date, resp_id, digest, conv_loc)

    def _append_rendered(self, conv: Conversion, url: str, date: str,
                         resp_id: str) -> RecordLocation:
        """The conversion record (and the screenshot's resource record after it)."""
        headers = {
            "WARC-Record-ID": self.new_id(), "WARC-Date": date,
            "WARC-Warcinfo-ID": self._warcinfo_id, "WARC-Refers-To": resp_id,
            "WARC-Refers-To-Target-URI": url, "WARC-Refers-To-Date": date,
            "WARC-Payload-Digest": _sha1_of(conv.html), "WARC-Rendered-By": conv.rendered_by,
        }
        loc = self._append(self._writer.create_warc_record(
            url, "conversion", payload=BytesIO(conv.html), length=len(conv.html),
            warc_content_type="text/html; charset=utf-8", warc_headers_dict=headers))
        if conv.screenshot is not None:
            self._append(self._writer.create_warc_record(
                SCREENSHOT + url, "resource", payload=BytesIO(conv.screenshot),
                length=len(conv.screenshot), warc_content_type="image/png",
                warc_headers_dict={
                    "WARC-Record-ID": self.new_id(), "WARC-Date": date,
                    "WARC-Warcinfo-ID": self._warcinfo_id, "WARC-Concurrent-To": resp_id,
                    "WARC-Payload-Digest": _sha1_of(conv.screenshot)}))
        return loc

    def _response_record(self, ex: Exchange, date: str, record_id: str) -> _Record:
        http = StatusAndHeaders(
            f"{ex.status} {ex.reason}".rstrip(),
            fix_response_headers(ex.response_headers, ex.body_length),
            protocol=f"HTTP/{ex.http_version}",
        ).to_ascii_bytes()
        fields = [("WARC-Record-ID", record_id), ("WARC-Date", date),
                  ("WARC-Warcinfo-ID", self._warcinfo_id)]
        if ex.peer_ip:
            fields.append(("WARC-IP-Address", ex.peer_ip))
        if ex.truncated:
            fields.append(("WARC-Truncated", ex.truncated))
        ex.body.seek(0)
        body = ex.body.read() if ex.body_length <= IN_MEMORY_BODY else None
        block, payload = _digests(http, body, ex.body, not ex.payload_digest)
        if ex.payload_digest:  # hashed while the body streamed in: no pass for it here
            fields.append(("WARC-Payload-Digest", ex.payload_digest))
        fields += [("WARC-Type", "response"), ("WARC-Target-URI", ex.url)]
        if payload:
            fields.append(("WARC-Payload-Digest", payload))
        fields += [("WARC-Block-Digest", block),
                   ("Content-Type", "application/http; msgtype=response"),
                   ("Content-Length", str(len(http) + ex.body_length))]
        return _Record(_head(fields), http, body, ex.body, ex.payload_digest or payload)

    def _revisit_record(self, ex: Exchange, date: str, record_id: str, rv: Revisit):  # type: ignore[no-untyped-def]
        http_headers = None
        if rv.profile == IDENTICAL:
            http_headers = StatusAndHeaders(
                f"{ex.status} {ex.reason}".rstrip(),
                fix_response_headers(ex.response_headers, ex.body_length),
                protocol=f"HTTP/{ex.http_version}",
            )
        record = self._writer.create_revisit_record(
            ex.url, rv.payload_digest, rv.refers_to_uri, rv.refers_to_date,
            http_headers=http_headers,
            warc_headers_dict={
                "WARC-Record-ID": record_id,
                "WARC-Date": date,
                "WARC-Warcinfo-ID": self._warcinfo_id,
                "WARC-Refers-To": rv.refers_to,
            },
        )
        record.rec_headers.replace_header("WARC-Profile", rv.profile)
        if ex.peer_ip:
            record.rec_headers.add_header("WARC-IP-Address", ex.peer_ip)
        return record

    def _request_record(self, ex: Exchange, date: str, record_id: str,
                        resp_id: str) -> _Record:
        http = StatusAndHeaders(
            f"{ex.method} {ex.target} HTTP/{ex.http_version}",
            redact_request_headers(ex.request_headers),
            is_http_request=True,
        ).to_ascii_bytes()
        fields = [("WARC-Record-ID", record_id), ("WARC-Date", date),
                  ("WARC-Warcinfo-ID", self._warcinfo_id), ("WARC-Concurrent-To", resp_id),
                  ("WARC-Type", "request"), ("WARC-Target-URI", ex.url),
                  ("WARC-Payload-Digest", EMPTY_DIGEST),  # as warcio wrote it: no payload
                  ("WARC-Block-Digest", sha1_digest(hashlib.sha1(http))),
                  ("Content-Type", "application/http; msgtype=request"),
                  ("Content-Length", str(len(http)))]
        return _Record(_head(fields), http, b"", None, "")

    def _append(self, record) -> RecordLocation:  # type: ignore[no-untyped-def]
        """One record as one gzip member: a _Record built here, or warcio's (warcinfo,
        revisit)."""
        assert self._file is not None
        offset = self._file.tell()
        member = _GzipMember(self._file)
        if isinstance(record, _Record):
            record.write(member)
        else:
            self._writer.out = member
            self._writer.write_record(record)
        member.close()
        return RecordLocation(self._filename, offset, self._file.tell() - offset)

    def _flush(self, force_sync: bool = False) -> None:
        assert self._file is not None
        self._file.flush()
        if self.fsync or force_sync:
            os.fsync(self._file.fileno())
        self._good = self._file.tell()

    def undo(self, loc: CaptureLocation) -> None:
        """Remove the last capture group again (its manifest commit failed)."""
        if self._file is not None and loc.response.filename == self._filename:
            self._rollback(loc.response.offset)

    def _rollback(self, offset: int) -> None:
        """Cut torn bytes off after a failed write (e.g. ENOSPC); the URL stays pending."""
        assert self._file is not None
        try:
            self._file.seek(offset)
            self._file.truncate(offset)
            self._file.flush()
            self._good = offset
        except OSError as exc:  # the buffer cannot be flushed (ENOSPC): drop it and the file
            log.warning("%s: cut back to offset %d and closed after a failed write (%s); it "
                        "stays .open for the next run's recovery", self._filename,
                        min(offset, self._good), exc.strerror or exc)
            self._good = min(offset, self._good)
            self._abandon()

    def _abandon(self) -> None:
        """After a write or flush that failed: cut the file back to its last flushed, kept
        byte (no torn record) and close its descriptor without writing what its buffer
        holds (the descriptor is pointed at /dev/null first, where the buffer goes). close()
        gives it its final name; the writer opens a new one for its next capture."""
        f, self._file = self._file, None
        if f is None:
            return
        self._abandoned = True
        try:
            fd = f.fileno()
            os.ftruncate(fd, self._good)
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
        except OSError:
            log.exception("could not cut %s back to offset %d", self._filename, self._good)
        try:
            f.close()
        except OSError:
            pass  # the descriptor is closed whatever its flush said

    @staticmethod
    def _date(when: datetime) -> str:
        return str(datetime_to_iso_date(when.astimezone(UTC).replace(tzinfo=None), use_micros=True))


def _create(path: Path) -> IO[bytes]:
    return open(path, "xb")  # noqa: SIM115 - the writer closes it


class _GzipMember:
    """One gzip member per record. warcio's own wrapper uses zlib at level 9; compressing
    was the largest single cost of a crawl (bench/compress_speed.py compares the codecs)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.compressor = _deflate.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def write(self, data: bytes) -> None:
        self.out.write(self.compressor.compress(data))

    def flush(self) -> None:
        pass  # warcio flushes after each record; the member ends only in close()

    def close(self) -> None:
        self.out.write(self.compressor.flush())


#: largest body read into memory to build its response record in one pass; a larger one is
#: read twice from its file (the block digest, then the write)
IN_MEMORY_BODY = 8 << 20
EMPTY_DIGEST = sha1_digest(hashlib.sha1())
_CHUNK = 1 << 20


@dataclass
class _Record:
    """A request or response record built here (not by warcio's record builder): its WARC
    head, its HTTP head, and its body (in memory, or read again from `stream`)."""

    head: bytes
    http: bytes
    body: bytes | None
    stream: IO[bytes] | None
    payload_digest: str

    def write(self, out: _GzipMember) -> None:
        out.write(self.head + self.http)
        if self.body is not None:
            out.write(self.body)
        elif self.stream is not None:
            self.stream.seek(0)
            while chunk := self.stream.read(_CHUNK):
                out.write(chunk)
        out.write(b"\r\n\r\n")


def _head(fields: list[tuple[str, str]]) -> bytes:
    """A WARC record's head as warcio writes it (UTF-8, one field a line, a blank line)."""
    return (WARC_VERSION + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
            + "\r\n").encode("utf-8")


def _digests(http: bytes, body: bytes | None, stream: IO[bytes],
             payload: bool) -> tuple[str, str]:
    """(block digest, payload digest or "" unless `payload`) of a response record."""
    block = hashlib.sha1(http)
    hasher = hashlib.sha1() if payload else None
    chunks = [body] if body is not None else iter(lambda: stream.read(_CHUNK), b"")
    for chunk in chunks:
        block.update(chunk)
        if hasher is not None:
            hasher.update(chunk)
    return sha1_digest(block), sha1_digest(hasher) if hasher is not None else ""


def _warc_fields(info: dict[str, str]) -> bytes:
    return "".join(f"{k}: {v}\r\n" for k, v in info.items() if v).encode("utf-8")


def default_info(config_digest: str, crawl_id: str) -> dict[str, str]:
    """warcinfo fields: software, format, config digest, crawl id -- never credentials."""
    return {
        "software": f"mirror/{__version__}",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "isPartOf": crawl_id,
        "mirror-config-digest": config_digest,
    }
