"""Scratch tables in bounded memory for reading a big archive (issue 36): an archive's
captures for CaptureIndex's lookups, an export's plan, a set of digests, verify's count of
the index lines and what it keeps of the records it read (verify/facts.py). A million-page
archive has about 1.4 million captures; as objects they took 1.2 KB each (1.7 GB), and an
export's plan 1 GB more. Here they take SQLite's page cache (CACHE_KB), whatever the size.

Each table is in a temporary SQLite database of its own (an empty name: a file in the
temporary folder that SQLite deletes when it is closed, and nothing else opens), with no
journal: nothing in it outlives the process. The rows are plain tuples; the modules that
use them make objects of them (replay.captures, replay.exportplan, verify). Lookups may come from
several threads (the replay server reads records in a thread pool): each holds the table's
lock for its query, and a walk over every row holds it for one batch at a time."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator

#: SQLite's page cache for one table, in KiB (its own default is 2 MB)
CACHE_KB = 32 * 1024
#: rows read per query when walking every row
BATCH = 2000
Row = tuple[object, ...]
#: a capture's row: replay.captures.Capture's fields, in their order
CAPTURE = "url, ts, mime, status, digest, filename, off, len, key, data"
_CAPTURE_INDEXES = (
    "CREATE INDEX caps_url ON caps (url, ts)",
    "CREATE INDEX caps_digest ON caps (digest, url, ts)"
    " WHERE mime != 'warc/revisit' AND digest != ''",
)


def scratch_db(cache_kb: int = CACHE_KB) -> sqlite3.Connection:
    """A temporary SQLite database of this process's own (on disk, gone once closed), for
    any thread that holds its user's lock, with `cache_kb` KiB of page cache and no journal."""
    db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
    for pragma in (f"cache_size = -{cache_kb}", "journal_mode = OFF", "synchronous = OFF"):
        db.execute(f"PRAGMA {pragma}")
    return db


class _Scratch:
    def __init__(self, cache_kb: int = CACHE_KB) -> None:
        self._lock = threading.Lock()
        self._db = scratch_db(cache_kb)

    def _one(self, sql: str, args: Row = ()) -> Row | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()  # type: ignore[no-any-return]

    def _all(self, sql: str, args: Row = ()) -> list[Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _count(self, table: str) -> int:
        row = self._one(f"SELECT count(*) FROM {table}")
        return int(row[0]) if row else 0  # type: ignore[call-overload]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class BatchedScratch(_Scratch):
    """A scratch database for one thread, whose rows are written a batch at a time
    (executemany, in a transaction: about half the time of a statement a row) and read
    through `settled()`; the tables and queries are its subclass's (verify/facts.py)."""

    def __init__(self, schema: str, cache_kb: int, batch: int = 2000) -> None:
        super().__init__(cache_kb)
        self._db.executescript(schema)
        self._batch = batch
        self._waiting: dict[str, list[Row]] = {}
        self._rows_waiting = 0

    def write(self, sql: str, args: Row) -> None:
        """Write a row with the rows before it (in their order, statement by statement)."""
        self._waiting.setdefault(sql, []).append(args)
        self._rows_waiting += 1
        if self._rows_waiting >= self._batch:
            self.settled()

    def settled(self) -> sqlite3.Connection:
        """The database with every row written, to be read."""
        if self._rows_waiting:
            self._db.execute("BEGIN")
            for sql, rows in self._waiting.items():
                self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
            self._waiting, self._rows_waiting = {}, 0
        return self._db


class CaptureTable(_Scratch):
    """Every capture of an archive (rows of CAPTURE), ordered by (URL, timestamp, order of
    arrival) as CaptureIndex lists them, looked up by URL and by payload digest."""

    def __init__(self, rows: Iterable[Row]) -> None:
        super().__init__()
        self._db.execute(f"CREATE TABLE caps (id INTEGER PRIMARY KEY, {CAPTURE})")
        self._db.execute("BEGIN")
        self._db.executemany(f"INSERT INTO caps ({CAPTURE}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        for statement in _CAPTURE_INDEXES:
            self._db.execute(statement)
        self._db.execute("COMMIT")
        self.count = self._count("caps")
        self._bases = False  # the fuzzy lookup's table, made at its first use

    def ordered(self) -> Iterator[Row]:
        """Every capture, by URL, then timestamp, then order of arrival; a batch at a time."""
        rows = self._all(f"SELECT id, {CAPTURE} FROM caps ORDER BY url, ts, id LIMIT ?",
                         (BATCH,))
        while rows:
            yield from (row[1:] for row in rows)
            last = rows[-1]
            rows = self._all(f"SELECT id, {CAPTURE} FROM caps WHERE (url, ts, id) > (?, ?, ?)"
                             " ORDER BY url, ts, id LIMIT ?", (last[1], last[2], last[0], BATCH))

    def nth(self, n: int) -> Row:
        """The n-th capture in that order (IndexError past the end)."""
        if not -self.count <= n < self.count:
            raise IndexError(n)
        row = self._one(f"SELECT {CAPTURE} FROM caps ORDER BY url, ts, id LIMIT 1 OFFSET ?",
                        (n % self.count,))
        assert row is not None
        return row

    def of_url(self, url: str) -> list[Row]:
        """Captures of exactly this URL, oldest first."""
        return self._all(f"SELECT {CAPTURE} FROM caps WHERE url = ? ORDER BY ts, id", (url,))

    def first_with_digest(self, digest: str) -> Row | None:
        """The first response (not revisit) with this payload digest, in the table's order."""
        return self._one(f"SELECT {CAPTURE} FROM caps WHERE digest = ? AND mime != "
                         "'warc/revisit' AND digest != '' ORDER BY url, ts, id LIMIT 1", (digest,))

    def urls_like(self, url: str, base_of: Callable[[str], str]) -> list[str]:
        """Every URL stored with the same base as `url` (replay.fuzzy.base_of, always the same
        function for one table), in URL order."""
        with self._lock:
            if not self._bases:
                self._db.create_function("base_of", 1, base_of, deterministic=True)
                self._db.executescript(
                    "BEGIN; CREATE TABLE bases (base TEXT, url TEXT);"
                    "INSERT INTO bases SELECT base_of(url), url FROM caps GROUP BY url;"
                    "CREATE INDEX bases_base ON bases (base, url); COMMIT;")
                self._bases = True
            rows = self._db.execute("SELECT url FROM bases WHERE base = ? ORDER BY url",
                                    (base_of(url),)).fetchall()
        return [row[0] for row in rows]

    def sorted_lines(self, line: Callable[[Row], str]) -> Iterator[str]:
        """line(row) of every capture, in the byte order of their UTF-8 (a CDXJ index's
        order), sorted by SQLite (on disk past its cache) and read a batch at a time."""
        with self._lock:
            self._db.execute("DROP TABLE IF EXISTS lines")
            self._db.execute("CREATE TABLE lines (line TEXT)")
        walk = self.ordered()
        while batch := list(itertools.islice(walk, BATCH)):  # itertools.batched: Python 3.12
            with self._lock:
                self._db.executemany("INSERT INTO lines VALUES (?)",
                                     ((line(row),) for row in batch))
        with self._lock:
            self._db.execute("CREATE INDEX lines_line ON lines (line)")
        rows = self._all("SELECT line, rowid FROM lines ORDER BY line, rowid LIMIT ?", (BATCH,))
        while rows:
            yield from (str(row[0]) for row in rows)
            rows = self._all("SELECT line, rowid FROM lines WHERE (line, rowid) > (?, ?) "
                             "ORDER BY line, rowid LIMIT ?", (*rows[-1], BATCH))


class KeyedTable(_Scratch):
    """Rows of `width` values under unique string keys (a key given again replaces its row),
    walked in the order given, optionally only the rows whose first value is in a range."""

    def __init__(self, rows: Iterable[tuple[str, Row]], width: int) -> None:
        super().__init__(CACHE_KB // 2)
        values = ", ".join(f"v{i}" for i in range(width))
        self._values = values
        self._db.execute(f"CREATE TABLE keyed (n INTEGER PRIMARY KEY, k TEXT UNIQUE, {values})")
        self._db.execute("BEGIN")
        self._db.executemany(
            f"INSERT OR REPLACE INTO keyed (k, {values}) VALUES ({','.join('?' * (width + 1))})",
            ((key, *row) for key, row in rows))
        self._db.execute("COMMIT")
        self.count = self._count("keyed")

    def items(self, first_in: range | None = None) -> Iterator[tuple[str, Row]]:
        """(key, row) in order; with `first_in`, the rows whose first value is in it."""
        where, bounds = ("", ()) if first_in is None else (
            "AND v0 >= ? AND v0 < ?", (first_in.start, first_in.stop))
        last = 0
        while rows := self._all(f"SELECT n, k, {self._values} FROM keyed WHERE n > ? {where} "
                                "ORDER BY n LIMIT ?", (last, *bounds, BATCH)):
            yield from ((str(row[1]), row[2:]) for row in rows)
            last = rows[-1][0]  # type: ignore[assignment]

    def get(self, key: str) -> Row | None:
        return self._one(f"SELECT {self._values} FROM keyed WHERE k = ?", (key,))


class SeenSet(_Scratch):
    """A set of strings that may grow past memory: `add` says whether a string is new."""

    def __init__(self) -> None:
        super().__init__(1024)
        self._db.execute("CREATE TABLE seen (s TEXT PRIMARY KEY) WITHOUT ROWID")

    def add(self, text: str) -> bool:
        with self._lock:
            return self._db.execute("INSERT OR IGNORE INTO seen VALUES (?)",
                                    (text,)).rowcount == 1


class BytesCounter(_Scratch):
    """A multiset of bytes that may grow past memory: `add` counts one in, `take` one out
    when there is one (and says whether there was)."""

    def __init__(self) -> None:
        super().__init__(CACHE_KB // 4)
        self._db.execute("CREATE TABLE bag (k BLOB PRIMARY KEY, n INTEGER) WITHOUT ROWID")
        self.total = 0

    def add_all(self, keys: Iterable[bytes]) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            for key in keys:
                self._db.execute("INSERT INTO bag VALUES (?, 1) ON CONFLICT (k) DO UPDATE "
                                 "SET n = n + 1", (key,))
                self.total += 1
            self._db.execute("COMMIT")

    def take(self, key: bytes) -> bool:
        with self._lock:
            taken = self._db.execute("UPDATE bag SET n = n - 1 WHERE k = ? AND n > 0",
                                     (key,)).rowcount == 1
        self.total -= taken
        return taken


def _walk(db: sqlite3.Connection, sql: str, args: Row = ()) -> Iterator[Row]:
    """The rows of `sql` (whose first column is its table's n, and which ends in `n > ?
    ORDER BY n LIMIT ?`), a batch at a time, without the n."""
    last = 0
    while rows := db.execute(sql, (*args, last, BATCH)).fetchall():
        yield from (row[1:] for row in rows)
        last = rows[-1][0]


class PairTable(BatchedScratch):
    """A WARC file's record ids, its requests and its responses and revisits, and the
    WARC-Concurrent-To links between them (either way), under 8-byte integer keys:
    verify/facts.py checks them."""

    def __init__(self) -> None:
        super().__init__(
            "CREATE TABLE ids (k INTEGER PRIMARY KEY, where_ TEXT);"
            "CREATE TABLE requests (n INTEGER PRIMARY KEY, k INTEGER UNIQUE, where_ TEXT, "
            "uri TEXT, date TEXT);"
            "CREATE TABLE subjects (n INTEGER PRIMARY KEY, k INTEGER UNIQUE, where_ TEXT, "
            "uri TEXT, date TEXT);"
            "CREATE TABLE links (req INTEGER, subj INTEGER, PRIMARY KEY (req, subj)) "
            "WITHOUT ROWID;"
            "CREATE INDEX links_subj ON links (subj, req);", CACHE_KB // 4)

    def note_ids(self, ids: list[tuple[int, str]]) -> dict[int, str]:
        """Note record ids, (key, where); {} when each is new, else where each of them
        was noted first (before, or earlier in `ids`)."""
        before = self._db.total_changes
        self._db.execute("BEGIN")
        self._db.executemany("INSERT OR IGNORE INTO ids VALUES (?, ?)", ids)
        self._db.execute("COMMIT")
        if self._db.total_changes - before == len(ids):
            return {}
        return dict(self._db.execute(
            "SELECT k, where_ FROM ids WHERE k IN (SELECT value FROM json_each(?))",
            (json.dumps([k for k, _ in ids]),)).fetchall())

    def add(self, key: int, where: str, uri: str, date: str, *, subject: bool) -> None:
        """A request (not `subject`), or a response or revisit; a record noted again under
        its key replaces the first."""
        table = "subjects" if subject else "requests"
        self.write(f"INSERT OR REPLACE INTO {table} (k, where_, uri, date) VALUES (?,?,?,?)",
                   (key, where, uri, date))

    def link(self, request: int, subject: int) -> None:
        self.write("INSERT OR IGNORE INTO links (req, subj) VALUES (?, ?)", (request, subject))

    def requests(self) -> Iterator[Row]:
        """(key, where, uri, date) of each request, in the order noted."""
        return _walk(self.settled(), "SELECT n, k, where_, uri, date FROM requests "
                     "WHERE n > ? ORDER BY n LIMIT ?")

    def subjects_of(self, request: int) -> list[Row]:
        """(uri, date) of the responses and revisits linked with a request."""
        return self.settled().execute(
            "SELECT s.uri, s.date FROM links l JOIN subjects s ON s.k = l.subj "
            "WHERE l.req = ? ORDER BY s.k", (request,)).fetchall()

    def subjects(self) -> Iterator[Row]:
        """(key, where, how many requests it is linked with) of each response and revisit,
        in the order noted."""
        return _walk(self.settled(),
                     "SELECT n, k, where_, (SELECT COUNT(*) FROM links l JOIN requests r "
                     "ON r.k = l.req WHERE l.subj = s.k) FROM subjects s WHERE n > ? "
                     "ORDER BY n LIMIT ?")


class OriginalsTable(BatchedScratch):
    """What revisits may point at, under 8-byte integer keys: (uri, date) -> payload
    digest, record id -> (uri, date); and the revisits noted (verify/facts.py)."""

    def __init__(self) -> None:
        super().__init__(
            "CREATE TABLE captures (k INTEGER PRIMARY KEY, digest INTEGER);"
            "CREATE TABLE ids (k INTEGER PRIMARY KEY, at INTEGER);"
            "CREATE TABLE revisits (n INTEGER PRIMARY KEY, where_ TEXT, profile TEXT, "
            "refers_to TEXT, uri TEXT, date TEXT, digest TEXT);", CACHE_KB // 4)

    def add(self, at: int, digest: int, record_id: int) -> None:
        self.write("INSERT OR REPLACE INTO captures VALUES (?, ?)", (at, digest))
        self.write("INSERT OR REPLACE INTO ids VALUES (?, ?)", (record_id, at))

    def add_revisit(self, row: Row) -> None:
        """(where, profile, refers_to, uri, date, digest)"""
        self.write("INSERT INTO revisits (where_, profile, refers_to, uri, date, digest) "
                   "VALUES (?, ?, ?, ?, ?, ?)", row)

    def digest_at(self, at: int) -> int | None:
        row = self.settled().execute("SELECT digest FROM captures WHERE k = ?",
                                     (at,)).fetchone()
        return int(row[0]) if row else None

    def capture_of(self, record_id: int) -> int | None:
        row = self.settled().execute("SELECT at FROM ids WHERE k = ?",
                                     (record_id,)).fetchone()
        return int(row[0]) if row else None

    def revisits(self) -> Iterator[Row]:
        """The revisits' rows, in the order noted."""
        return _walk(self.settled(), "SELECT n, where_, profile, refers_to, uri, date, "
                     "digest FROM revisits WHERE n > ? ORDER BY n LIMIT ?")
