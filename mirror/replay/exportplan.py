"""What an export writes where (URL -> Entry), in a scratch table (archive/scratch.py): an
export of a million-page archive looks up every link of every page in it, and as a dict of
objects it took about a GB. The order is the order the entries were given in (URL order,
from CaptureIndex.latest)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from mirror.archive.scratch import KeyedTable, Row
from mirror.replay.captures import Capture, capture_of, capture_row

#: a redirect's status (Plan.redirects)
REDIRECT = range(300, 400)
#: entries a plan keeps of its last lookups (about 1 KB each)
RECENT = 10_000


@dataclass(frozen=True)
class Entry:
    capture: Capture
    status: int
    mime: str
    path: str


def _row(entry: Entry) -> Row:
    return (entry.status, entry.mime, entry.path, *capture_row(entry.capture))


def _entry(row: Row) -> Entry:
    status, mime, path, *capture = row
    return Entry(capture_of(tuple(capture)), status, mime, path)  # type: ignore[arg-type]


class Plan:
    """URL -> Entry, read-only once made; iterated in the order given, a batch at a time."""

    def __init__(self, entries: Iterable[tuple[str, Entry]]) -> None:
        self._table = KeyedTable(((url, _row(entry)) for url, entry in entries), 13)
        # the entries looked up last (pages share their menus, styles and images): a link
        # seen again costs no query
        self._recent: OrderedDict[str, Entry | None] = OrderedDict()

    def __len__(self) -> int:
        return self._table.count

    def items(self) -> Iterator[tuple[str, Entry]]:
        return ((url, _entry(row)) for url, row in self._table.items())

    def values(self) -> Iterator[Entry]:
        return (entry for _, entry in self.items())

    def redirects(self) -> Iterator[tuple[str, Entry]]:
        """The entries of redirects (3xx), in order."""
        return ((url, _entry(row)) for url, row in self._table.items(REDIRECT))

    def get(self, url: str) -> Entry | None:
        if url in self._recent:
            self._recent.move_to_end(url)
            return self._recent[url]
        row = self._table.get(url)
        entry = self._recent[url] = _entry(row) if row is not None else None
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        return entry

    def __getitem__(self, url: str) -> Entry:
        entry = self.get(url)
        if entry is None:
            raise KeyError(url)
        return entry

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self.get(url) is not None

    def where(self, keep: Callable[[Entry], bool]) -> Plan:
        """A new plan of the entries `keep` says yes to, in the same order."""
        return Plan((url, entry) for url, entry in self.items() if keep(entry))

    def close(self) -> None:
        self._table.close()
