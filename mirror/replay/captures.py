"""Read an archive for replay: its captures (index.cdxj plus unindexed WARCs) and one record."""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from warcio.timeutils import (
    PAD_14_DOWN,
    PAD_14_UP,
    iso_date_to_timestamp,
    pad_timestamp,
    timestamp_to_sec,
)

from mirror.archive import index
from mirror.archive.damage import Damage, report
from mirror.archive.scratch import CaptureTable, Row
from mirror.archive.warcread import RawRecord, ReadError, complete_prefix, read_raw_from
from mirror.archive.warcwriter import OPEN_SUFFIX
from mirror.replay.fuzzy import base_of, best_matches
from mirror.store.files import ArchiveFiles, LocalFiles, archive_files
from mirror.store.objstore import StoreError
from mirror.web.codings import DecodeError, decode_body
from mirror.web.http import mime_of
from mirror.web.urls import DEFAULT_IGNORE_QUERY, InvalidURL, normalize

log = logging.getLogger(__name__)

#: most bytes a replayed body may decode to (P4 applies to replay too)
MAX_DECODED = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Capture:
    """One index line: where a response/revisit record is and what the index says of it.
    Small on purpose (slots, the line's JSON kept as text, shared strings): an export or a
    replay server holds one per capture, 138,000 for a 100,000-page site."""

    url: str
    timestamp: str  # 14 digits
    mime: str
    status: int | None
    digest: str
    filename: str
    offset: int
    length: int
    key: str  # SURT
    data: str = field(compare=False, hash=False, repr=False)  # the line's JSON object

    @property
    def fields(self) -> dict[str, str]:
        return dict(json.loads(self.data))

    @property
    def is_revisit(self) -> bool:
        return self.mime == index.REVISIT_MIME

    def cdxj(self, filename: str | None = None) -> str:
        """The index line again, optionally naming the WARC file differently."""
        fields = dict(self.fields, filename=filename or self.filename)
        return f"{self.key} {self.timestamp} {json.dumps(fields)}\n"


def capture_row(cap: Capture) -> Row:
    """A capture as a scratch table's row (scratch.CAPTURE), and back (capture_of)."""
    return (cap.url, cap.timestamp, cap.mime, cap.status, cap.digest, cap.filename, cap.offset,
            cap.length, cap.key, cap.data)


def capture_of(row: Row) -> Capture:
    return Capture(*row)  # type: ignore[arg-type]  # the columns in Capture's field order


#: an offset or length past this is no record's (a file of 2**48 bytes is 256 TiB)
MAX_OFFSET = 1 << 48


def parse_cdxj(line: str) -> Capture | None:
    """A Capture from one CDXJ line, or None when the line is not one."""
    cap = cdxj_or_why(line)
    return cap if isinstance(cap, Capture) else None


def cdxj_or_why(line: str) -> Capture | str:
    """A Capture from one CDXJ line, or what is wrong with the line."""
    try:
        key, timestamp, data = line.rstrip("\n").split(" ", 2)
        fields = json.loads(data)
        status = fields.get("status")
        offset, length = int(fields["offset"]), int(fields["length"])
        if not (0 <= offset < MAX_OFFSET and 0 < length < MAX_OFFSET):
            return f"offset {offset} or length {length} is out of range"
        return Capture(
            url=fields["url"], timestamp=pad_timestamp(timestamp[:14], PAD_14_DOWN),
            mime=sys.intern(fields.get("mime", "")), status=int(status) if status else None,
            digest=fields.get("digest", ""), filename=sys.intern(fields["filename"]),
            offset=offset, length=length, key=key, data=data,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"not a CDXJ line with url, offset, length and filename ({type(exc).__name__})"


@dataclass(frozen=True)
class Record:
    """An archived HTTP response with revisits resolved to the original payload."""

    url: str
    date: str  # WARC-Date of the record asked for
    status: int
    headers: tuple[tuple[str, str], ...]  # archived HTTP headers
    payload: bytes  # as stored: content-coded as received
    truncated: str | None = None
    revisit_of: str | None = None  # WARC-Date of the original, for a resolved revisit

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), None)

    @property
    def content_type(self) -> str | None:
        return self.header("Content-Type")

    @property
    def mime(self) -> str:
        return mime_of(self.content_type) or ""

    def decoded(self, max_bytes: int = MAX_DECODED) -> tuple[bytes, bool]:
        """(payload with Content-Encoding undone, decoded). A body that cannot be decoded
        comes back as stored with decoded=False: the caller keeps its Content-Encoding."""
        try:
            return decode_body(self.payload, self.header("Content-Encoding"), max_bytes)[0], True
        except DecodeError as exc:
            log.warning("cannot decode %s: %s", self.url, exc)
            return self.payload, False


class CaptureIndex:
    """Every capture of an archive, by URL and by payload digest, read-only.

    The archive is a folder, or an object store (store.files). The index is the source
    of truth for the files it names; local WARC files it does not name (a run killed
    before it rebuilt the index, or a ``.open`` file still being written) are indexed here
    from their complete records. A store's are left out (reading them would mean reading
    them whole): its index is uploaded once the files it names are. Needs no manifest.
    """

    def __init__(self, folder: Path | ArchiveFiles, captures: Iterable[Capture],
                 ignore_query: Sequence[str] = DEFAULT_IGNORE_QUERY) -> None:
        self.files = archive_files(folder)
        self.folder = self.files.local  # None for an archive in a store
        self.ignore_query = tuple(ignore_query)
        self._table = CaptureTable(map(capture_row, captures))  # bounded memory at any size
        self.captures = Captures(self._table)

    @classmethod
    def load(cls, folder: Path | ArchiveFiles,
             ignore_query: Sequence[str] = DEFAULT_IGNORE_QUERY) -> CaptureIndex:
        files = archive_files(folder)
        indexed: set[str] = set()
        return cls(files, itertools.chain(_read_index(files, indexed),
                                          _unindexed(files, indexed)), ignore_query)

    # -- lookups -------------------------------------------------------------------------
    def key(self, url: str) -> str:
        """The URL as the index spells it (canonical), or as given if it cannot be."""
        try:
            return normalize(url, self.ignore_query)
        except InvalidURL:
            return url

    def captures_of(self, url: str) -> list[Capture]:
        """Captures of a URL, oldest first."""
        rows = self._table.of_url(url) or self._table.of_url(self.key(url))
        return [capture_of(row) for row in rows]

    def closest(self, url: str, timestamp: str) -> Capture | None:
        """The capture nearest in time to a 1-14 digit timestamp (ties: the earlier one)."""
        caps = self.captures_of(url)
        if not caps:
            return None
        want = pad_timestamp(timestamp[:14], PAD_14_DOWN)
        i = bisect.bisect_left([c.timestamp for c in caps], want)
        near = caps[max(i - 1, 0) : i + 1]
        return min(near, key=lambda c: (_distance(c.timestamp, want), c.timestamp))

    def fuzzy(self, url: str, timestamp: str) -> Capture | None:
        """For a URL not archived as asked: the capture nearest in time among the URLs of the
        same path that differ from it only by what fuzzy.py ignores (a cache-busting `?_=`,
        a per-request callback name), or None."""
        key = self.key(url)
        near = [self.closest(match, timestamp)
                for match in best_matches(key, self._table.urls_like(key, base_of))]
        want = pad_timestamp(timestamp[:14], PAD_14_DOWN)
        return min((c for c in near if c is not None), default=None,
                   key=lambda c: (_distance(c.timestamp, want), c.timestamp, c.url))

    def latest(self, at: str | None = None) -> Iterator[Capture]:
        """The last capture of every URL at or before a timestamp (default: the newest), in
        URL order; a short timestamp means the end of that period ('2024' = up to 2024-12-31
        23:59:59)."""
        until = pad_timestamp(at[:14], PAD_14_UP) if at else None
        walk = map(capture_of, self._table.ordered())
        for _, caps in itertools.groupby(walk, key=lambda c: c.url):
            chosen = None
            for cap in caps:
                if until is None or cap.timestamp <= until:
                    chosen = cap
            if chosen is not None:
                yield chosen

    def original(self, cap: Capture) -> Capture:
        """For a revisit, the capture whose payload it repeats as far as the index tells: the
        URL's last earlier response with the same digest, any response with that digest (many
        URLs share the digest of an empty body), the URL's last earlier response; else itself."""
        if not cap.is_revisit:
            return cap
        earlier = [c for c in self.captures_of(cap.url)
                   if c.timestamp <= cap.timestamp and not c.is_revisit]
        same = [c for c in earlier if cap.digest and c.digest == cap.digest]
        if same:
            return same[-1]
        first = self._first_with_digest(cap.digest)
        if first is not None:
            return first
        return earlier[-1] if earlier else cap

    def _first_with_digest(self, digest: str) -> Capture | None:
        row = self._table.first_with_digest(digest) if digest else None
        return capture_of(row) if row is not None else None

    def status_and_mime(self, cap: Capture) -> tuple[int | None, str]:
        """What the capture replays as, from the index alone (revisits via their original)."""
        orig = self.original(cap)
        status = cap.status if cap.status and cap.status != 304 else orig.status
        return status, orig.mime if cap.is_revisit else cap.mime

    # -- reading -------------------------------------------------------------------------
    def warc_paths(self) -> list[Path]:
        """Every local WARC file of the archive, closed or still ``.open``, in name order
        (none for an archive in a store)."""
        if not isinstance(self.files, LocalFiles):
            return []
        return [self.files.path(name) for name in self.files.warc_files()]

    def raw(self, cap: Capture) -> RawRecord:
        """The record a capture names, as stored (one ranged GET in a store)."""
        where = f"{os.path.basename(cap.filename)}@{cap.offset}"
        try:
            with self.files.record_at(cap.filename, cap.offset, cap.length) as f:
                return read_raw_from(f, where)
        except StoreError as exc:
            raise ReadError(f"{where}: {exc.reason}") from exc

    def read(self, cap: Capture) -> Record:
        raw = self.raw(cap)
        date = raw.warc.get("WARC-Date", "")
        if raw.rec_type != "revisit":
            return Record(cap.url, date, raw.status or 200, raw.headers or (), raw.payload,
                          raw.warc.get("WARC-Truncated"))
        orig_cap = self._refers_to(raw)
        orig = self.raw(orig_cap)
        if orig.rec_type == "revisit":
            raise ReadError(f"revisit of {cap.url} points at another revisit")
        # identical-payload-digest revisits carry the new headers; not-modified ones do not
        own = raw.headers is not None and raw.status not in (None, 304)
        return Record(
            cap.url, date, (raw.status if own else orig.status) or 200,
            (raw.headers if own else orig.headers) or (), orig.payload,
            orig.warc.get("WARC-Truncated"), orig.warc.get("WARC-Date"),
        )

    def _refers_to(self, raw: RawRecord) -> Capture:
        uri = raw.warc.get("WARC-Refers-To-Target-URI")
        date = raw.warc.get("WARC-Refers-To-Date")
        if uri and date:
            ts = iso_date_to_timestamp(date)
            for cap in self.captures_of(uri):
                if cap.timestamp == ts and not cap.is_revisit:
                    return cap
        digest = raw.warc.get("WARC-Payload-Digest", "")
        first = self._first_with_digest(digest)
        if first is not None:
            return first
        raise ReadError(f"revisit of {raw.warc.get('WARC-Target-URI')}: original not found "
                        f"({uri} at {date}, digest {digest or '-'})")


class Captures:
    """The captures of a CaptureIndex as a read-only sequence, by URL then timestamp, read
    from its table as they are walked (never all held at once)."""

    def __init__(self, table: CaptureTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return self._table.count

    def __iter__(self) -> Iterator[Capture]:
        return map(capture_of, self._table.ordered())

    def __getitem__(self, n: int) -> Capture:
        return capture_of(self._table.nth(n))

    def cdxj_lines(self, filename: Callable[[str], str]) -> Iterator[str]:
        """Every capture's index line, naming its WARC file filename(name), in the byte order
        of a CDXJ index (sorted on disk)."""
        def line(row: Row) -> str:
            cap = capture_of(row)
            return cap.cdxj(filename(cap.filename))
        return self._table.sorted_lines(line)


def _distance(a: str, b: str) -> int:
    return abs(int(timestamp_to_sec(a)) - int(timestamp_to_sec(b)))


def _read_index(files: ArchiveFiles, filenames: set[str]) -> Iterator[Capture]:
    """The captures of index.cdxj, a line at a time; `filenames` gets the WARC files named."""
    f = files.open_index()
    if f is None:
        return
    with f:
        for n, line in enumerate(f, 1):
            cap = cdxj_or_why(line.decode("utf-8", "replace"))
            if isinstance(cap, str):
                report(Damage("index.cdxj", None, f"line {n}: {cap}; left out"))
            else:
                filenames.add(cap.filename)
                yield cap


def _unindexed(files: ArchiveFiles, indexed: set[str]) -> Iterator[Capture]:
    """The captures of the local WARC files index.cdxj does not name (read once the index
    has been: `indexed` is complete by then); a store's are not read (logged)."""
    unindexed = [name for name in files.warc_files() if name not in indexed]
    if isinstance(files, LocalFiles):
        for name in unindexed:
            yield from _scan(files.path(name))
    elif unindexed:
        log.warning("%s: %d WARC files are not in its index.cdxj yet (a run is under way, "
                    "or its index was not uploaded): not shown", files.label, len(unindexed))


def _scan(path: Path) -> list[Capture]:
    """Index lines of a WARC file the index does not cover, complete records only."""
    end = complete_prefix(path) if path.name.endswith(OPEN_SUFFIX) else path.stat().st_size
    out: list[Capture] = []
    being_written = path.name.endswith(OPEN_SUFFIX)  # its torn tail is no damage
    for line in index.lines_from_warc(path, _quiet if being_written else report):
        cap = parse_cdxj(line)
        if cap is None or cap.offset + cap.length > end:
            break
        out.append(cap)
    return out


def _quiet(damage: Damage) -> None:
    log.debug("%s", damage)
