"""Where an archive's files are: its local folder, or an object store (s3://bucket/prefix).

The readers (replay's CaptureIndex, `mirror verify`, WACZ) ask this for WARC files by
name, a record at (file, offset, length), a whole file as a stream, the index and the
manifest, and read what they get with the same code wherever it came from. In a store a
record is one ranged GET (the index gives its offset and length) and a file is streamed,
never downloaded whole; the manifest is the store's snapshot, downloaded once.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from mirror.archive.damage import Damage, refused, report
from mirror.archive.warcread import ReadError, complete_prefix
from mirror.archive.warcwriter import OPEN_SUFFIX
from mirror.layout import ArchiveLayout
from mirror.store.objstore import (
    INDEX_KEY,
    MANIFEST_KEY,
    WARC_PREFIX,
    ObjectStore,
    StoreMissing,
)

log = logging.getLogger(__name__)

#: a record's head (WARC and HTTP headers) fits in this many compressed bytes: one GET
HEAD_BYTES = 1 << 16


def is_warc_name(name: str) -> bool:
    return name.endswith((".warc.gz", ".warc.gz" + OPEN_SUFFIX)) and not name.startswith(".")


class ArchiveFiles(ABC):
    """An archive's files for reading."""

    label: str  # the folder or the store's address, for messages
    reload_every: float  # seconds between two looks at stamp() for a replay server
    local: Path | None = None  # the archive folder, when the files are on this machine

    @abstractmethod
    def warc_files(self) -> dict[str, int]:
        """Every WARC file (``.open`` ones by that name), in name order: name -> size."""

    def closed(self) -> dict[str, int]:
        return {n: s for n, s in self.warc_files().items() if not n.endswith(OPEN_SUFFIX)}

    @abstractmethod
    def stream(self, name: str) -> IO[bytes]:
        """A whole WARC file, to read from its start (a context manager)."""

    @abstractmethod
    def record_at(self, name: str, offset: int, length: int | None = None, *,
                  head: bool = False) -> IO[bytes]:
        """A file positioned at a record (`length`: its length, when known; `head`: only
        its headers will be read). ReadError when the file cannot be opened."""

    @abstractmethod
    def open_index(self) -> IO[bytes] | None:
        """index.cdxj to read line by line, or None when there is none."""

    @abstractmethod
    def stamp(self) -> tuple[object, ...]:
        """Something that changes when the archive does (a run closes a file, an index)."""

    @abstractmethod
    def manifest(self) -> Path | None:
        """A manifest file to read (a store's: its snapshot, downloaded), or None."""

    def packable_size(self, name: str, size: int) -> int:
        """How much of a file a package (WACZ) takes: all of a closed one."""
        return size

    def close(self) -> None:  # noqa: B027 - most have nothing to let go of
        """Let go of what was fetched (a downloaded snapshot)."""


class LocalFiles(ArchiveFiles):
    """An archive folder on this machine."""

    reload_every = 2.0

    def __init__(self, root: Path, on_damage: Callable[[Damage], None] = report) -> None:
        self.layout = ArchiveLayout(root)
        self.local = root
        self.label = str(root)
        self.on_damage = on_damage
        self.refused: dict[str, str] = {}  # name -> why it is not read

    def path(self, name: str) -> Path:
        return self.layout.warc / os.path.basename(name)

    def warc_files(self) -> dict[str, int]:
        warc = self.layout.warc
        if not warc.is_dir():
            return {}
        out = {}
        for name in sorted(os.listdir(warc)):
            if not is_warc_name(name):
                continue
            if why := refused(warc / name, self.layout.root):
                self._refuse(name, why)
                continue
            try:
                out[name] = (warc / name).stat().st_size
            except FileNotFoundError:  # renamed or deleted meanwhile
                continue
        return out

    def _refuse(self, name: str, why: str) -> None:
        """Report a file not read, once (a replay server lists the files every few seconds)."""
        if name not in self.refused:
            self.refused[name] = why
            self.on_damage(Damage(f"warc/{name}", None, why))

    def stream(self, name: str) -> IO[bytes]:
        if why := refused(self.path(name), self.layout.root):
            raise ReadError(f"warc/{name}: {why}")
        return open(self.path(name), "rb")

    def record_at(self, name: str, offset: int, length: int | None = None, *,
                  head: bool = False) -> IO[bytes]:
        path = self.path(name)
        if why := refused(path, self.local or path.parent):
            raise ReadError(f"warc/{name}: {why}")
        try:
            f = open(path, "rb")  # noqa: SIM115 - the caller closes it
        except OSError as exc:
            raise ReadError(f"{name}@{offset}: {exc.strerror or exc}") from exc
        try:
            f.seek(offset)
        except (OSError, ValueError, OverflowError) as exc:  # a negative or huge offset
            f.close()
            raise ReadError(f"{name}@{offset}: no record at this offset ({exc})") from exc
        return f

    def open_index(self) -> IO[bytes] | None:
        try:
            return open(self.layout.index, "rb")
        except FileNotFoundError:
            return None

    def stamp(self) -> tuple[object, ...]:
        paths = [self.layout.index, *(self.path(n) for n in self.warc_files())]
        return tuple((p.name, 0 if p.name.endswith(OPEN_SUFFIX) else p.stat().st_mtime_ns)
                     for p in paths if p.exists())

    def manifest(self) -> Path | None:
        return self.layout.manifest if self.layout.manifest.exists() else None

    def packable_size(self, name: str, size: int) -> int:
        """A ``.open`` file up to its last complete record."""
        return complete_prefix(self.path(name)) if name.endswith(OPEN_SUFFIX) else size


class StoreFiles(ArchiveFiles):
    """An archive in an object store: WARC files under warc/, index.cdxj, and the
    manifest's snapshot (manifest.sqlite3). It holds closed files only."""

    reload_every = 30.0

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.label = store.url
        self._tmp: Path | None = None
        self._downloads = 0
        self._snapshot: tuple[Path, object] | None = None  # downloaded copy, its (size, ETag)

    def warc_files(self) -> dict[str, int]:
        listed = self.store.list(WARC_PREFIX)
        names = {key[len(WARC_PREFIX):]: size for key, size in listed.items()}
        return {n: names[n] for n in sorted(names) if "/" not in n and is_warc_name(n)}

    def stream(self, name: str) -> IO[bytes]:
        return cast(IO[bytes], self.store.open_stream(WARC_PREFIX + os.path.basename(name)))

    def record_at(self, name: str, offset: int, length: int | None = None, *,
                  head: bool = False) -> IO[bytes]:
        """One ranged GET for a record of known length (the index's), HEAD_BYTES for its
        head; more as it is read. Without a length the reader goes on to the object's end."""
        key = WARC_PREFIX + os.path.basename(name)
        chunk = HEAD_BYTES if head or not length else length
        return cast(IO[bytes], self.store.open_range(key, offset, length or (1 << 62), chunk))

    def open_index(self) -> IO[bytes] | None:
        try:
            return io.BufferedReader(cast(Any, self.store.open_stream(INDEX_KEY)), 1 << 20)
        except StoreMissing:
            return None

    def stamp(self) -> tuple[object, ...]:
        listed = self.store.list_meta()
        return tuple(sorted((k, s) for k, s in listed.items()
                            if k in (INDEX_KEY, MANIFEST_KEY) or k.startswith(WARC_PREFIX)))

    def manifest(self) -> Path | None:
        """The store's snapshot, downloaded into a temporary folder (again when the store
        holds a new one); None when the store has none."""
        there = self.store.stat(MANIFEST_KEY)
        if there is None:
            return None
        return self._fresh(there, lambda path: self.store.download(MANIFEST_KEY, path))

    def _fresh(self, stamp: object, make: Callable[[Path], None]) -> Path:
        """The snapshot for `stamp`: the one held when it is the same, else a new file that
        `make` writes, which replaces the old one."""
        if self._snapshot is not None and self._snapshot[1] == stamp:
            return self._snapshot[0]
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="mirror-snapshot-"))
        old = self._snapshot[0] if self._snapshot else None
        self._downloads += 1
        path = self._tmp / f"manifest-{self._downloads}.sqlite3"
        make(path)
        self._snapshot = (path, stamp)
        if old is not None:  # a reader that has it open keeps it until it closes
            old.unlink(missing_ok=True)
        return path

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp, self._snapshot = None, None


class SharedRunFiles(StoreFiles):
    """A run shared by several workers (`mirror run --db`): its WARC files and index in its
    store, its manifest a SQLite snapshot of the database, made in one consistent read
    (manifest.pgsnapshot), again when the store changes."""

    def __init__(self, store: ObjectStore, dsn: str) -> None:
        super().__init__(store)
        self.dsn = dsn

    def manifest(self) -> Path | None:
        from mirror.manifest.pgsnapshot import snapshot_to_sqlite

        return self._fresh(self.stamp(), lambda path: snapshot_to_sqlite(self.dsn, path))


def archive_files(where: Path | ArchiveFiles) -> ArchiveFiles:
    return where if isinstance(where, ArchiveFiles) else LocalFiles(where)
