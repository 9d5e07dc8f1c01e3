"""`mirror verify --db`: a crawl shared by several workers, checked as a whole.

Its WARC files are all in one place only in the site's store (each worker writes its own
files on its own disk and uploads the closed ones), and its manifest is in PostgreSQL. So
the store is checked as `mirror verify s3://...` checks one (check_archive: every record,
the manifest against the records, the index against both), with the PostgreSQL manifest in
place of a snapshot, and then what only a shared run promises (DISTRIBUTED.md §5.2): every
URL's capture is in exactly one uploaded file, the store holds nothing else, and a
complete run left nothing to fetch and no host leased.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import IO, Any, cast

from mirror.manifest.db import ManifestError, is_database_url
from mirror.manifest.reader import ManifestReader, open_reader
from mirror.model import ExitCode, FileRow, Run, RunState
from mirror.store.files import StoreFiles
from mirror.store.objstore import WARC_PREFIX, ObjectStore, StoreError, open_store
from mirror.verify import Verdict, check_archive
from mirror.verify.problem import Problem

__all__ = ["SharedVerdict", "capture_file_problems", "complete_run_problems",
           "object_problems", "twice_problems", "verify_db", "verify_shared"]

#: (file name, captures in it, files.worker, files.state): a file that is not 'uploaded'
#: (worker and state None: the file has no files row)
CaptureFile = tuple[str, int, str | None, str | None]
#: (run id, url, capture id, file name, files.worker) of a URL captured more than once
Twice = tuple[int, str, int, str, str | None]
#: (url, state, lease owner) of a URL the last run still has to fetch
Unfinished = tuple[str, str, str | None]


# -- what only a shared run promises (pure: rows in, problems out) --------------------------
def capture_file_problems(rows: Iterable[CaptureFile]) -> Iterator[Problem]:
    """Captures in files the manifest does not have as uploaded: the store may lack their
    records (the invariant: every capture is in an uploaded file)."""
    for name, n, worker, state in rows:
        captures = "1 capture of the manifest points" if n == 1 else \
            f"{n} captures of the manifest point"
        captures += " into this file"
        if state is None:
            why = "which no worker recorded in the manifest's files"
        elif state == "open":
            why = f"which worker {worker} still has open: it is not in the store"
        elif state == "closed":
            why = f"which worker {worker} closed but never marked uploaded"
        elif state == "lost":
            why = (f"which was declared lost with worker {worker}: its captures should have "
                   "been forgotten with it")
        else:
            why = f"whose state is {state!r} (worker {worker})"
        yield Problem(f"warc/{name}", "file-not-uploaded", f"{captures}, {why}")


def object_problems(objects: dict[str, int], files: Iterable[FileRow],
                    sha256: Callable[[str], str | None]) -> Iterator[Problem]:
    """The store's warc/ objects (key -> size) against the manifest's files: an object
    that is not an uploaded file (stray), an uploaded file with no object, or one whose
    size or SHA-256 differs from what its worker closed. `sha256(name)` gives the
    object's digest (None: it could not be read; the record checks said why)."""
    rows = {f.name: f for f in files}
    for key, size in sorted(objects.items()):
        name = key[len(WARC_PREFIX):]
        row = rows.get(name)
        if row is None or row.state != "uploaded":
            yield Problem(key, "stray-object", _stray(row))
        elif row.size is not None and size != row.size:
            yield Problem(key, "object-size", f"{size:,} bytes in the store; worker "
                          f"{row.worker} closed it at {row.size:,} bytes")
        elif row.sha256 and (digest := sha256(name)) is not None and digest != row.sha256:
            yield Problem(key, "object-sha256", f"the store's bytes have SHA-256 {digest}; "
                          f"worker {row.worker} closed it with {row.sha256}")
    for row in sorted(rows.values(), key=lambda f: f.name):
        if row.state == "uploaded" and WARC_PREFIX + row.name not in objects:
            yield Problem(WARC_PREFIX + row.name, "object-missing", f"the manifest has it "
                          f"uploaded by worker {row.worker}, but the store has no such object")


def _stray(row: FileRow | None) -> str:
    if row is None:
        return ("in the store, but no worker's file in the manifest (put there by something "
                "else, or its files row is gone)")
    if row.state == "lost":
        return (f"in the store, but declared lost with worker {row.worker}: its captures "
                "were forgotten and fetched again, so a reader of the store finds them twice")
    return (f"in the store, but the manifest has it {row.state} (worker {row.worker}): "
            "uploaded, and never marked uploaded")


def twice_problems(rows: Iterable[Twice]) -> Iterator[Problem]:
    """URLs with more than one capture in one run (rows by run, url, capture id): each
    URL is captured exactly once per run, however many workers share it."""
    for (run_id, url), group in groupby(rows, key=lambda r: (r[0], r[1])):
        where = [f"capture {cid} in warc/{name} (worker {worker or 'unknown'})"
                 for _, _, cid, name, worker in group]
        yield Problem(f"manifest: {url}", "captured-twice",
                      f"{len(where)} captures in run {run_id}: {', '.join(where)}")


def complete_run_problems(run: Run | None,
                          unfinished: Iterable[Unfinished]) -> Iterator[Problem]:
    """A run the manifest calls complete has nothing left to fetch: else a worker decided
    the run was over while another still worked on it. (A host lease left behind is not a
    problem: a worker killed after its last URL leaves one, which merely expires.)"""
    if run is None or run.state != RunState.COMPLETE:
        return
    for url, state, owner in unfinished:
        by = f" by {owner}" if owner else ""
        yield Problem(f"manifest: {url}", "complete-run-pending",
                      f"{state}{by} in run {run.id}, which is complete")


# -- the store and the manifest, as check_archive reads them ---------------------------------
class _HashedFiles(StoreFiles):
    """The store's files, each WARC object hashed (SHA-256) the first time check_archive
    streams it whole: the digest a worker recorded when it closed the file is compared
    with the bytes the store holds, at no extra GET (an object's metadata digest would say
    only what the worker sent, not what the store keeps)."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.sha256: dict[str, str] = {}

    def stream(self, name: str) -> IO[bytes]:
        raw = super().stream(name)
        if name in self.sha256:
            return raw
        return cast(IO[bytes], _Hashing(raw, lambda digest: self.sha256.setdefault(name,
                                                                                  digest)))

    def digest(self, name: str) -> str | None:
        """The object's SHA-256: hashed already, or read whole now (an object whose
        records stopped the check early: damaged); None when it cannot be read."""
        if name not in self.sha256:
            try:
                with self.stream(name) as f:
                    while f.read(1 << 20):
                        pass
            except StoreError:
                return None
        return self.sha256.get(name)


class _Hashing(io.RawIOBase):
    """A stream that hashes what is read through it; tells `done` the digest once it
    reaches the end (a reader that stops early leaves no digest)."""

    def __init__(self, raw: Any, done: Callable[[str], object]) -> None:
        super().__init__()
        self.raw, self.done = raw, done
        self.h = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self.raw.tell())

    def readinto(self, b: Any) -> int:
        n: int = self.raw.readinto(b)
        if n:
            self.h.update(memoryview(b)[:n])
        else:
            self.done(self.h.hexdigest())
        return n

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()


# -- the whole ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SharedVerdict:
    verdict: Verdict
    database: str  # the manifest's database, without its password
    store: str
    run: Run | None  # the last run
    workers: int  # workers registered on it

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.DAMAGED if self.verdict.problems else ExitCode.OK

    def summary(self) -> str:
        n = self.workers
        what = "no run yet" if self.run is None else \
            f"shared run {self.run.id}, {self.run.state}, {n} worker{'' if n == 1 else 's'}"
        return f"{self.database} ({what}; files in {self.store}): {self.verdict.summary()}"


def verify_shared(reader: ManifestReader, store: ObjectStore) -> SharedVerdict:
    """The store's files and index against the shared manifest (check_archive, the
    reader a PostgreSQL one), then the shared run's own promises."""
    files = _HashedFiles(store)
    try:
        checked = check_archive(files, reader)
        listed = store.list(WARC_PREFIX)
        run = reader.runs.last()
        problems = [
            *checked.problems,
            *capture_file_problems(reader.audit.unsettled_capture_files()),
            *object_problems(listed, reader.sharedrun.files(), files.digest),
            *twice_problems(reader.audit.captured_twice()),
            *complete_run_problems(run, [] if run is None or run.state != RunState.COMPLETE
                                   else reader.audit.unfinished_urls(run.id)),
        ]
    finally:
        files.close()
    workers = sum(1 for w in reader.sharedrun.workers() if run is not None and w.run_id == run.id)
    return SharedVerdict(Verdict(tuple(problems), checked.files, checked.records),
                         reader.name, store.url, run, workers)


def verify_db(dsn: str, store_url: str) -> SharedVerdict:
    """`mirror verify --db DSN`: the shared run whose manifest `dsn` names (postgresql://...)
    and whose files are in the store at `store_url` (s3://bucket/prefix). ManifestError or
    StoreError when either cannot be read."""
    if not is_database_url(dsn):  # a single machine's manifest has no files to check
        raise ManifestError("--db takes the address of the PostgreSQL database a shared run "
                            "keeps its manifest in: postgresql://...")
    store = open_store(store_url)
    reader = open_reader(dsn)
    try:
        return verify_shared(reader, store)
    finally:
        reader.close()
