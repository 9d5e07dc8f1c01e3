"""A prune's plan for the WARC files (pure): which records each file keeps, and where.

A file that holds a record to drop is written again under a new name: its warcinfo record
(renamed), then every record it keeps, copied byte for byte (each is one gzip member) in
the order they were, so a kept record's offset moves and nothing else about it changes.
A file that keeps nothing but its warcinfo is deleted; a file that drops nothing is left
alone. The new name is the old one with a new serial (the next free ones, as the writer
would take them), so names keep their time and serials keep rising (W8)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mirror.archive.warcwriter import FILE_RE
from mirror.errors import UsageError


class PruneError(UsageError):
    """Prune cannot go on (no policy, a damaged archive); the archive is unchanged."""


class PlanError(PruneError):
    """The manifest's records of a file do not fit in it (overlap, or past its end)."""


@dataclass(frozen=True)
class Member:
    """A kept capture's two records in the old file (each a whole gzip member)."""

    capture_id: int
    offset: int
    length: int
    req_offset: int
    req_length: int
    #: a page loaded in a browser: its conversion record (and screenshot record), which lie
    #: between its response and request records
    render_offset: int | None = None

    def spans(self) -> list[tuple[int, int]]:
        """(offset, length) of its records: the rendered DOM's up to the request record."""
        out = [(self.offset, self.length), (self.req_offset, self.req_length)]
        if self.render_offset is not None:
            out.append((self.render_offset, self.req_offset - self.render_offset))
        return out


@dataclass(frozen=True)
class Move:
    """Where a kept capture's records are in the new file."""

    capture_id: int
    filename: str
    offset: int
    length: int
    req_offset: int
    req_length: int
    render_offset: int | None = None


@dataclass(frozen=True)
class FileChange:
    """One WARC file the prune changes: rewritten as `new`, or deleted (new is None)."""

    old: str
    new: str | None
    members: tuple[Member, ...]
    old_size: int

    def ranges(self) -> list[tuple[int, int]]:
        """The (offset, length) of every record kept, in file order, checked to fit."""
        spans = sorted({span for m in self.members for span in m.spans()})
        end = 0
        for offset, length in spans:
            if offset < end or length <= 0 or offset + length > self.old_size:
                raise PlanError(f"{self.old}: the manifest's record at {offset} (length "
                                f"{length}) overlaps another or lies past the file's end "
                                f"({self.old_size} bytes); run `mirror verify`")
            end = offset + length
        return spans

    def kept_bytes(self) -> int:
        return sum(length for _, length in self.ranges())


def layout(change: FileChange, head: int) -> tuple[list[tuple[int, int]], list[Move], int]:
    """The records to copy (old offset, length) in order, where each kept capture lands
    when they follow a warcinfo record of `head` bytes, and the new file's size."""
    assert change.new is not None
    spans = change.ranges()
    new_offset: dict[int, int] = {}
    at = head
    for offset, length in spans:
        new_offset[offset] = at
        at += length
    moves = [Move(m.capture_id, change.new, new_offset[m.offset], m.length,
                  new_offset[m.req_offset], m.req_length,
                  None if m.render_offset is None else new_offset[m.render_offset])
             for m in change.members]
    return spans, moves, at


def new_name(old: str, serial: int) -> str:
    """The old name with another serial (a name the writer did not make: a suffix)."""
    match = FILE_RE.match(old)
    if match is None:
        return f"{old.removesuffix('.warc.gz')}-{serial:05d}.warc.gz"
    return f"{match['name']}-{match['ts']}-{serial:05d}.warc.gz"


def file_changes(kept: Mapping[str, Sequence[Member]], sizes: Mapping[str, int],
                 first_serial: int) -> list[FileChange]:
    """For each file holding a record to drop (`kept`: its captures that stay, maybe
    none), its change: deleted when nothing stays, else rewritten under the next serial."""
    changes, serial = [], first_serial
    for old in sorted(kept):
        members = tuple(sorted(kept[old], key=lambda m: m.offset))
        name = None
        if members:
            name, serial = new_name(old, serial), serial + 1
        changes.append(FileChange(old, name, members, sizes[old]))
    return changes


def freed(changes: Iterable[FileChange], new_sizes: dict[str, int]) -> int:
    """Bytes the changes free: the old files' sizes less the new files'."""
    return sum(c.old_size - (new_sizes.get(c.new, 0) if c.new else 0) for c in changes)
