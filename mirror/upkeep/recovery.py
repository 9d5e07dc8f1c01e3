"""Start-up repair of WARC files left open by a crash: cut torn tails, find unrecorded captures."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from mirror import crashpoints
from mirror.archive.fsutil import TEMP_GLOB
from mirror.archive.warcread import complete_prefix
from mirror.archive.warcwriter import (
    NOT_MODIFIED,
    OPEN_SUFFIX,
    CaptureLocation,
    Exchange,
    RecordLocation,
    Revisit,
)
from mirror.layout import ArchiveLayout
from mirror.model import CAPTURE_TYPES
from mirror.upkeep.prune import finish_interrupted_prune
from mirror.web.http import header_map

log = logging.getLogger(__name__)

SPOOL = 1 << 20
#: the records a page loaded in a browser has between its response and request records:
#: its rendered DOM (conversion) and screenshot (resource)
RENDER_TYPES = ("conversion", "resource")


@dataclass(frozen=True)
class Found:
    """A complete capture group (response or revisit + its request) read back from a WARC
    file, as the writer was given it: the exchange (for a revisit, its status, headers and
    payload length, without the payload), where it lies, and the revisit it was written as."""

    exchange: Exchange
    location: CaptureLocation
    revisit: Revisit | None = None
    rendered: bool = False  # the page's rendered DOM (a conversion record) is in the group


def remove_temporaries(output_dir: Path) -> None:
    """Delete what a crash while replacing index.cdxj or a report left beside them; then
    finish, or undo, a `mirror prune` a crash interrupted (before a run looks at a file)."""
    for folder in (output_dir, ArchiveLayout(output_dir).reports):
        for path in folder.glob(TEMP_GLOB) if folder.is_dir() else ():
            path.unlink(missing_ok=True)
    for path in output_dir.glob(".index-*") if output_dir.is_dir() else ():
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    if done := finish_interrupted_prune(output_dir):
        log.warning("%s", done)


#: seconds of doubt around the boot time (/proc/stat gives whole seconds, and the clock may
#: have been set since): a process last seen this close to the boot counts as before it
BOOT_MARGIN = 60.0


def rebooted_since(alive: float | None, stat: Path = Path("/proc/stat")) -> bool:
    """Whether the machine may have crashed (or lost power) since a process was last seen
    alive at `alive` (Unix time): it booted after that, or its boot time is unknown (not
    Linux), or so was `alive`. A process killed while the machine kept running cannot
    damage what SQLite committed nor what was flushed to the OS before: only a machine crash
    can, and then the manifest and the open WARC files are checked whole."""
    if alive is None:
        return True
    try:
        for line in stat.read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) >= alive - BOOT_MARGIN
    except (OSError, ValueError, IndexError):
        pass
    return True


def open_files(warc_dir: Path) -> list[Path]:
    if not warc_dir.is_dir():
        return []
    return sorted(warc_dir / n for n in os.listdir(warc_dir) if n.endswith(OPEN_SUFFIX))


def cut_torn_tail(path: Path, whole_to: int = 0) -> int:
    """Cut the file back to its last complete gzip member; returns the new size. `whole_to`:
    the end of the last record the manifest recorded in it, read from there on (a file
    shorter than that, cut by a power loss, is read whole)."""
    size = path.stat().st_size
    keep = complete_prefix(path, whole_to if whole_to <= size else 0)
    if keep < size:
        log.warning("cut torn tail of %s: %d -> %d bytes", path.name, size, keep)
        truncate(path, keep)
        crashpoints.reached("recover:cut", "file")
    return keep


def file_size(path: Path) -> int:
    """The file's size; 0 when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def scan_groups(path: Path, start: int, final_name: str) -> tuple[list[Found], int]:
    """Capture groups that begin at or after `start`, and the offset where the last complete
    group ends (a response whose request record is missing is not complete)."""
    found: list[Found] = []
    good_end = start
    pending: tuple[dict[str, Any], int, int] | None = None  # response parts, offset, length
    with open(path, "rb") as f:
        f.seek(start)
        it = ArchiveIterator(f)
        for record in it:
            kind = record.rec_type
            # read the body before asking for the offset: warcio skips it to learn the length
            parts = _response_parts(record) if kind in CAPTURE_TYPES else None
            offset = it.get_record_offset()  # warcio counts from the file's start (tell())
            if parts is not None:
                _discard(pending)
                pending = (parts, offset, _length(it))
            elif kind == "request":
                concurrent = record.rec_headers.get_header("WARC-Concurrent-To")
                if pending is not None and concurrent == pending[0]["id"]:
                    q = (offset, _length(it))
                    found.append(_found(pending[0], _request_parts(record), final_name,
                                        pending[1:], q))
                    good_end, pending = sum(q), None
            elif pending is not None and kind in RENDER_TYPES:  # between response and request
                pending[0]["rendered"] = True
            elif pending is None:  # warcinfo, metadata: complete on their own
                good_end = offset + _length(it)
            else:
                break  # an unpaired response then something else: keep nothing after it
    _discard(pending)
    return found, good_end


def _discard(pending: tuple[dict[str, Any], int, int] | None) -> None:
    if pending is not None:
        pending[0]["body"].close()


def _length(it: ArchiveIterator) -> int:
    return int(it.get_record_length())


def _response_parts(record: Any) -> dict[str, Any]:
    body: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(SPOOL)
    length = 0
    while chunk := record.raw_stream.read(1 << 16):
        body.write(chunk)
        length += len(chunk)
    body.seek(0)
    h, http = record.rec_headers, record.http_headers
    return {
        "type": record.rec_type,
        "profile": h.get_header("WARC-Profile"),
        "refers_to": h.get_header("WARC-Refers-To"),
        "refers_to_uri": h.get_header("WARC-Refers-To-Target-URI"),
        "refers_to_date": h.get_header("WARC-Refers-To-Date"),
        "id": h.get_header("WARC-Record-ID"),
        "url": h.get_header("WARC-Target-URI"),
        "date": h.get_header("WARC-Date"),
        "digest": h.get_header("WARC-Payload-Digest") or "",
        "truncated": h.get_header("WARC-Truncated"),
        "ip": h.get_header("WARC-IP-Address"),
        "status": int(http.get_statuscode()) if http else 0,
        "statusline": http.statusline if http else "",
        "protocol": http.protocol if http else "HTTP/1.1",
        "headers": tuple(http.headers) if http else (),
        "body": body,
        "length": length,
    }


def _request_parts(record: Any) -> dict[str, Any]:
    http = record.http_headers  # warcio reads "GET /a?b HTTP/1.1" as protocol + statusline
    target = http.statusline.rsplit(" ", 1)[0]
    return {"method": http.protocol, "target": target, "headers": tuple(http.headers)}


def _found(
    resp: dict[str, Any], req: dict[str, Any], filename: str,
    r: tuple[int, int], q: tuple[int, int],
) -> Found:
    reason = resp["statusline"].partition(" ")[2]
    status, length, revisit = resp["status"], resp["length"], _revisit(resp)
    if revisit is not None and revisit.profile == NOT_MODIFIED:
        status, length = 304, 0  # an empty block: what was received was a bodiless 304
    elif revisit is not None:  # the headers as stored say how long the payload was
        length = int(header_map(resp["headers"]).get("content-length") or 0)
    ex = Exchange(
        url=resp["url"], method=req["method"], target=req["target"],
        request_headers=req["headers"], http_version=resp["protocol"].partition("/")[2] or "1.1",
        status=status, reason=reason, response_headers=resp["headers"],
        body=resp["body"], body_length=length, truncated=resp["truncated"],
        peer_ip=resp["ip"], payload_digest=resp["digest"],
    )
    loc = CaptureLocation(
        RecordLocation(filename, *r), RecordLocation(filename, *q),
        resp["date"], resp["id"], resp["digest"],
    )
    return Found(ex, loc, revisit, bool(resp.get("rendered")))


def _revisit(resp: dict[str, Any]) -> Revisit | None:
    if resp["type"] != "revisit":
        return None
    return Revisit(resp["profile"] or "", resp["refers_to"] or "", resp["refers_to_uri"] or "",
                   resp["refers_to_date"] or "", resp["digest"])
