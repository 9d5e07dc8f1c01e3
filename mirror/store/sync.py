"""An archive folder and its copy in an object store: push (checkpoint) and restore.

push uploads what the store lacks, in an order that keeps the store's copy readable at
every moment: closed WARC files first (conditional puts, never an `.open` file), then
index.cdxj (only once every file it names is there), then a snapshot of the manifest.
The snapshot is taken with SQLite's backup API (never the live file) and, before it is
uploaded, the captures it holds in files the store lacks (the file a run is writing, one
whose upload failed) are rolled back in the copy, as recovery rolls back the captures of
a file cut short: their URLs are pending again. So the store's snapshot never claims a
capture whose WARC file is not in the store, and a run restored from it fetches those
URLs again instead of storing them twice. Last, a push that uploaded a snapshot may delete
the store's WARC files that this folder no longer has and the snapshot does not name (a
prune's old files, or files a worker uploaded after its last checkpoint before it died).

restore brings a folder to the store's snapshot: the snapshot becomes the manifest, the
files it names are downloaded unless the folder has them, files the snapshot does not
name are moved aside, and the index is rebuilt from the manifest.

A folder remembers which store it pushed to or was restored from (.store.json): a push
refuses to overwrite a store's snapshot that another folder made (a new archive in the
same place, a lost folder crawled afresh), which would lose that archive's history.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirror.archive import index
from mirror.archive.damage import Damage, report
from mirror.archive.fsutil import atomic_write_text, fsync_dir
from mirror.archive.lock import ArchiveLock
from mirror.archive.warcwriter import FILE_RE, OPEN_SUFFIX
from mirror.layout import ArchiveLayout
from mirror.manifest.writer import Manifest
from mirror.store.objstore import (
    INDEX_KEY,
    MANIFEST_KEY,
    WARC_PREFIX,
    FileRefused,
    ObjectStore,
    StoreError,
    StoreRefused,
    open_store,
    path_of,
)
from mirror.store.snapshot import copy_manifest

log = logging.getLogger(__name__)

#: the folder's note of the store it belongs to
MARKER = ".store.json"
#: where a push takes its snapshot (removed after; a crash may leave one)
SNAPSHOT_DIR_PREFIX = ".snapshot-"


@dataclass
class PushResult:
    """What a push did. `error` says why it stopped early (the store cannot be reached,
    or holds another folder's archive); files not uploaded are in `failed`."""

    store: str
    uploaded: list[str] = field(default_factory=list)  # WARC files put now
    present: list[str] = field(default_factory=list)  # already there, the same bytes
    failed: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    index: bool = False  # index.cdxj uploaded
    snapshot: bool = False  # the manifest's snapshot uploaded
    rolled_back: list[str] = field(default_factory=list)  # files the snapshot leaves out
    deleted: list[str] = field(default_factory=list)  # WARC objects deleted from the store
    error: str | None = None
    reason: str | None = None  # the error's reason, without the object's address
    lasting: bool = False  # the store refused (no bucket, credentials): a retry won't help

    @property
    def complete(self) -> bool:
        """Every closed file is in the store, and so are the index and the snapshot."""
        return self.error is None and not self.failed

    def lines(self) -> list[str]:
        """What `mirror push` prints, and a run's summary adds."""
        out = [f"store {self.store}: {len(self.uploaded)} WARC files uploaded, "
               f"{len(self.present)} already there"
               + (", index" if self.index else "") + (", manifest snapshot" if self.snapshot
                                                      else "")
               + (f"; {len(self.deleted)} files deleted" if self.deleted else "")]
        if self.error:
            out.append(f"  not uploaded: {self.error}")
        for name, why in self.failed[:20]:
            out.append(f"  not uploaded: {name} ({why})")
        if len(self.failed) > 20:
            out.append(f"  ... and {len(self.failed) - 20} more not uploaded")
        return out

    @property
    def pending(self) -> list[str]:
        """What is not in the store yet: the WARC files, and the index and snapshot once
        a push stopped before them."""
        rest = [name for name, _ in self.failed]
        return rest + ([] if self.snapshot else [INDEX_KEY, MANIFEST_KEY])

    def pending_line(self, site_file: object) -> str:
        """What a run that ends with uploads pending says (and how to finish them)."""
        names = self.pending
        why = self.reason or self.error or (self.failed[0][1] if self.failed else "")
        return (f"{len(names)} files not uploaded to {self.store}: {why}; "
                f"`mirror push {site_file}` uploads them")

    def stopped(self, exc: StoreError | OSError) -> None:
        """The push stopped on `exc`."""
        self.error = str(exc)
        self.reason = (getattr(exc, "reason", None) or getattr(exc, "strerror", None)
                       or str(exc))
        self.lasting = isinstance(exc, StoreRefused)

    def as_dict(self) -> dict[str, object]:
        return {"store": self.store, "uploaded": self.uploaded, "present": len(self.present),
                "pending": [] if self.complete else self.pending,
                "failed": [{"file": n, "error": e} for n, e in self.failed],
                "index": self.index, "snapshot": self.snapshot, "deleted": self.deleted,
                "error": self.error, "complete": self.complete}


@dataclass
class RestoreResult:
    store: str
    restored: bool = False  # False: the store holds no snapshot (nothing was changed)
    downloaded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the folder had them already
    aside: Path | None = None  # where files the snapshot does not name were moved
    rolled_back: list[str] = field(default_factory=list)  # named, but not in the store
    captures: int = 0

    def lines(self) -> list[str]:
        if not self.restored:
            return [f"{self.store} holds no manifest snapshot: nothing to restore"]
        out = [f"restored {self.captures} captures from {self.store}: "
               f"{len(self.downloaded)} WARC files downloaded, {len(self.kept)} already here"]
        if self.rolled_back:
            out.append(f"  {len(self.rolled_back)} files the snapshot names are not in the "
                       "store; their captures will be fetched again: "
                       + ", ".join(self.rolled_back[:5]))
        if self.aside:
            out.append(f"  files the snapshot does not name were moved to {self.aside}")
        return out


# -- push ------------------------------------------------------------------------------------
def push(root: Path, store: ObjectStore, *, index_too: bool = True,
         delete_unnamed: bool = True, force: bool = False) -> PushResult:
    """Upload what the store lacks of the archive at `root` (see the module's docstring).
    Raises nothing for the store's failures: they are in the result. `force` replaces a
    snapshot another folder made. The caller holds the archive's lock, or is the run."""
    layout, result = ArchiveLayout(root), PushResult(store.url)
    _remove_stale_snapshots(root)
    try:
        _check_owner(root, store, force)
        listed = _store_warcs(store)
    except StoreError as exc:
        result.stopped(exc)
        return result
    local = {p.name: p for p in index.warc_files(layout.warc)}
    for name, path in local.items():
        if result.error is not None:
            result.failed.append((name, "not tried: the push stopped"))
        elif listed.get(name) != path.stat().st_size:
            _upload(store, path, name, result)
        else:
            result.present.append(name)
    if result.error is not None:
        return result
    in_store = {*listed, *result.uploaded, *result.present}
    try:
        if index_too:
            result.index = _push_index(layout, store, in_store)
        named = _push_snapshot(layout, store, in_store, result)
        _write_marker(root, store)
        if delete_unnamed and named is not None:
            _delete_unnamed(store, set(listed) - set(local) - named, {*local, *named}, result)
    except (StoreError, OSError) as exc:
        result.stopped(exc)
    return result


def _upload(store: ObjectStore, path: Path, name: str, result: PushResult) -> None:
    try:
        done = store.upload(path, WARC_PREFIX + name)
    except FileRefused as exc:  # this file only (a conflict): the others may go on
        result.failed.append((name, exc.reason))
        result.lasting = True
        log.warning("%s", exc)
        return
    except (StoreError, OSError) as exc:  # the store (or the file): stop here
        result.failed.append((name, getattr(exc, "reason", None) or str(exc)))
        result.stopped(exc)
        log.warning("upload stopped: %s", exc)
        return
    (result.uploaded if done else result.present).append(name)
    if done:
        log.info("uploaded %s to %s", name, store.url)


def _store_warcs(store: ObjectStore) -> dict[str, int]:
    return {k[len(WARC_PREFIX):]: size for k, size in store.list(WARC_PREFIX).items()
            if "/" not in k[len(WARC_PREFIX):]}


def _push_index(layout: ArchiveLayout, store: ObjectStore, in_store: set[str]) -> bool:
    """index.cdxj, when every file it names is in the store (else a reader of the store
    would find lines it cannot read); whether it was uploaded."""
    if not layout.index.exists():
        return False
    with open(layout.index, "rb") as f:
        names = {name for n, line in enumerate(f, 1) if (name := _named_file(n, line))}
    if not names <= in_store:
        log.warning("index.cdxj not uploaded: it names %d files the store lacks",
                    len(names - in_store))
        return False
    store.put_file(layout.index, INDEX_KEY)
    return True


def _named_file(n: int, line: bytes) -> str | None:
    """The WARC file index line `n` names; a damaged line is reported (None)."""
    if not line.strip():
        return None
    try:
        name = json.loads(line.split(b" ", 2)[2])["filename"]
        if isinstance(name, str):
            return name
    except (IndexError, KeyError, TypeError, ValueError):
        pass
    report(Damage(INDEX_KEY, None, f"line {n}: not a CDXJ line naming its WARC file"))
    return None


def _push_snapshot(layout: ArchiveLayout, store: ObjectStore, in_store: set[str],
                   result: PushResult) -> set[str] | None:
    """Snapshot the manifest, roll back what the store lacks, upload it; the files it
    names (None when there is no local manifest to snapshot)."""
    if not layout.manifest.exists():
        return None
    with tempfile.TemporaryDirectory(prefix=SNAPSHOT_DIR_PREFIX, dir=layout.root) as tmp:
        copy = ArchiveLayout(Path(tmp)).manifest  # the snapshot, in a folder of its own
        copy_manifest(layout.manifest, copy)
        named, result.rolled_back = roll_back_missing(copy, in_store)
        store.put_file(copy, MANIFEST_KEY)
    result.snapshot = True
    return named


def roll_back_missing(path: Path, present: set[str]) -> tuple[set[str], list[str]]:
    """In the manifest file at `path` (a copy, never the live one): forget the captures
    in files not in `present`, their URLs pending again (Manifest.captures.rollback_past, as
    recovery does for a file cut short). (the files it names after, those rolled back)"""
    manifest = Manifest(path)
    try:
        names = set(manifest.captures.committed_ends())
        missing = sorted(names - present)
        last = manifest.runs.last()
        for name in missing:
            assert last is not None  # a capture belongs to a run
            manifest.captures.rollback_past(last.id, name, 0)
    finally:
        manifest.close()
    for suffix in ("-wal", "-shm"):
        if path.with_name(path.name + suffix).exists():
            raise OSError(f"{path}: a {suffix} file remained beside the snapshot")
    return names - set(missing), missing


def _delete_unnamed(store: ObjectStore, candidates: set[str], ours: set[str],
                    result: PushResult) -> None:
    """Delete WARC objects this folder does not have and its snapshot does not name, of
    this archive only (a file name that begins with the site's name, as its files do)."""
    stems = {m["name"] for n in ours if (m := FILE_RE.match(n))}
    for name in sorted(candidates):
        m = FILE_RE.match(name)
        if m and m["name"] in stems and not name.endswith(OPEN_SUFFIX):
            store.delete(WARC_PREFIX + name)
            result.deleted.append(name)
            log.info("deleted %s from %s (not in the archive any more)", name, store.url)


def _remove_stale_snapshots(root: Path) -> None:
    for path in root.glob(SNAPSHOT_DIR_PREFIX + "*") if root.is_dir() else ():
        shutil.rmtree(path, ignore_errors=True)


def push_after_prune(root: Path, store: str | None, site_file: Path | str) -> list[str]:
    """After `mirror prune` of the archive at `root` with a store (its s3:// address; None:
    none): upload the rewritten files and the new snapshot, delete the old files from the
    store. Lines to tell; a failure is told, not raised (the next run or `mirror push
    <site_file>` catches up)."""
    if not store:
        return []
    try:
        with ArchiveLock(root):
            result = push(root, open_store(store))
    except StoreError as exc:
        return [f"store not updated: {exc}; `mirror push {site_file}` updates it"]
    lines = result.lines()
    if not result.complete:
        lines.append(f"`mirror push {site_file}` finishes it")
    return lines


# -- which folder owns the store's snapshot ---------------------------------------------------
def _check_owner(root: Path, store: ObjectStore, force: bool) -> None:
    if force or _marker(root) == store.url or store.size(MANIFEST_KEY) is None:
        return
    raise StoreRefused(store.url, "holds the snapshot of an archive this folder did not push "
                     "or restore; `mirror restore` brings that archive here, `mirror push "
                     "--force` replaces it with this one")


def _marker(root: Path) -> str | None:
    try:
        return str(json.loads((root / MARKER).read_text(encoding="utf-8"))["store"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_marker(root: Path, store: ObjectStore) -> None:
    if _marker(root) != store.url:
        atomic_write_text(root / MARKER, json.dumps({"store": store.url}) + "\n")


# -- restore ---------------------------------------------------------------------------------
def restore(root: Path, store: ObjectStore) -> RestoreResult:
    """Bring the archive folder at `root` to the store's snapshot (see the module's
    docstring). A store without a snapshot changes nothing. The caller holds the
    archive's lock. StoreError when the store cannot be read."""
    layout, result = ArchiveLayout(root), RestoreResult(store.url)
    store.check()  # a missing bucket is not an empty store
    root.mkdir(parents=True, exist_ok=True)
    if store.size(MANIFEST_KEY) is None:
        _write_marker(root, store)  # an empty store: this folder's pushes may fill it
        return result
    layout.warc.mkdir(parents=True, exist_ok=True)
    for stale in layout.warc.glob(".*.download.tmp"):
        stale.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=SNAPSHOT_DIR_PREFIX, dir=root) as tmp:
        copy = ArchiveLayout(Path(tmp)).manifest  # the snapshot, in a folder of its own
        store.download(MANIFEST_KEY, copy)
        listed = _store_warcs(store)
        named, result.rolled_back = roll_back_missing(copy, set(listed))
        _fetch_files(layout, store, named, listed, result)
        _replace_manifest(layout, copy)
    _rebuild_index(layout, result)
    _write_marker(root, store)
    result.restored = True
    for line in result.lines():
        log.info("%s", line)
    return result


def _fetch_files(layout: ArchiveLayout, store: ObjectStore, named: set[str],
                 listed: dict[str, int], result: RestoreResult) -> None:
    """The named files the folder lacks, downloaded; the files it has that the snapshot
    does not name (or with another size), moved aside."""
    here = {n: (layout.warc / n).stat().st_size for n in os.listdir(layout.warc)
            if n.endswith((".warc.gz", ".warc.gz" + OPEN_SUFFIX)) and not n.startswith(".")}
    for name in sorted(here):
        if name not in named or here[name] != listed.get(name):
            result.aside = result.aside or layout.root / time.strftime(
                "restore-aside-%Y%m%d%H%M%S")
            result.aside.mkdir(parents=True, exist_ok=True)
            os.replace(layout.warc / name, result.aside / name)
            log.warning("moved %s aside to %s: the store's snapshot does not have it",
                        name, result.aside)
    for name in sorted(named):
        if here.get(name) == listed[name]:
            result.kept.append(name)
        else:
            key = WARC_PREFIX + name
            store.download(key, path_of(layout, key))
            result.downloaded.append(name)
    fsync_dir(layout.warc)


def _replace_manifest(layout: ArchiveLayout, copy: Path) -> None:
    """The snapshot becomes the manifest; the old one's WAL must not be applied to it."""
    for suffix in ("-wal", "-shm"):
        layout.manifest.with_name(layout.manifest.name + suffix).unlink(missing_ok=True)
    os.replace(copy, layout.manifest)
    fsync_dir(layout.root)


def _rebuild_index(layout: ArchiveLayout, result: RestoreResult) -> None:
    manifest = Manifest(layout.manifest)
    try:
        result.captures = index.write_index(
            layout.index, (index.capture_line(row) for row in manifest.captures.all()))
    finally:
        manifest.close()
