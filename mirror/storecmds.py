"""The command line of archives in object storage: `mirror push`, `mirror restore`, and
where `serve`, `export` and `verify` read from (a site file's folder, its store with
`--from-store`, or an s3://bucket/prefix address given instead of the site file)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.archive.workerfolder import shared_worker_note
from mirror.config import SiteConfig, load_config
from mirror.errors import UsageError
from mirror.layout import ArchiveLayout
from mirror.model import ExitCode
from mirror.web.urls import DEFAULT_IGNORE_QUERY

if TYPE_CHECKING:
    from mirror.store.files import ArchiveFiles
    from mirror.store.sync import PushResult

#: what the site-file argument of serve, export and verify also accepts
ADDRESS_HELP = "the site's TOML file, or an archive's s3://bucket/prefix address"
FROM_STORE_HELP = ("read the archive from the site file's [archive] store instead of its "
                   "folder (ranged reads; nothing is downloaded whole)")


class StoreUsageError(UsageError):
    """A user mistake about stores (cli turns it into its UsageError)."""


def is_address(text: str) -> bool:
    return str(text).startswith("s3://")


@dataclass
class Reading:
    """The archive a reading command works on, and what it knows of the site."""

    where: Path | ArchiveFiles  # the archive folder, or its files in a store
    label: str  # for messages
    name: str
    ignore_query: tuple[str, ...]
    start_urls: tuple[str, ...]
    cfg: SiteConfig | None  # None: read from an s3:// address alone

    @property
    def in_store(self) -> bool:
        return not isinstance(self.where, Path)

    def close(self) -> None:
        if not isinstance(self.where, Path):
            self.where.close()


def reading(args: argparse.Namespace) -> Reading:
    """Where serve/export/verify read: `args.config` is a site file (its folder, or with
    --from-store its store) or an s3:// address."""
    given = str(args.config)
    if getattr(args, "db", None):
        return _shared_run(args, given)
    if is_address(given):
        if getattr(args, "from_store", False):
            raise StoreUsageError("--from-store goes with a site file, not an s3:// address")
        files = _store_files(given)
        name = given.rstrip("/").rsplit("/", 1)[-1] or "mirror"
        return Reading(files, files.label, name, DEFAULT_IGNORE_QUERY, (), None)
    cfg = load_config(given)
    site = (cfg.site.name, cfg.scope.ignore_query, cfg.site.start_urls)
    if getattr(args, "from_store", False):
        if not cfg.archive.store:
            raise StoreUsageError(f"--from-store: {cfg.path} sets no [archive] store")
        files = _store_files(cfg.archive.store)
        return Reading(files, files.label, *site, cfg)
    if note := shared_worker_note(cfg.site.output_dir):
        raise StoreUsageError(note)
    return Reading(cfg.site.output_dir, str(cfg.site.output_dir), *site, cfg)


def _shared_run(args: argparse.Namespace, given: str) -> Reading:
    """A run shared by several workers: its store (the site file's, or an s3:// address)
    and a snapshot of its manifest in the database `args.db`."""
    from mirror.store.files import SharedRunFiles
    from mirror.store.objstore import open_store

    cfg = None if is_address(given) else load_config(given)
    url = given if cfg is None else cfg.archive.store
    if not url:
        raise StoreUsageError(
            f"{given}: --db reads a run shared by several workers, whose WARC files are all "
            "in one place only in its store, and this site file sets no [archive] store "
            '(e.g. store = "s3://bucket/prefix")')
    files = SharedRunFiles(open_store(url), args.db)
    if cfg is None:
        name = given.rstrip("/").rsplit("/", 1)[-1] or "mirror"
        return Reading(files, files.label, name, DEFAULT_IGNORE_QUERY, (), None)
    return Reading(files, files.label, cfg.site.name, cfg.scope.ignore_query,
                   cfg.site.start_urls, cfg)


def _store_files(url: str) -> ArchiveFiles:
    from mirror.store.files import StoreFiles
    from mirror.store.objstore import open_store

    return StoreFiles(open_store(url))


def store_url(cfg: SiteConfig, command: str) -> str:
    if not cfg.archive.store:
        raise StoreUsageError(f"{cfg.path}: no [archive] store is set, so there is nothing "
                              f"to {command} (e.g. store = \"s3://bucket/prefix\")")
    return cfg.archive.store


# -- push and restore ------------------------------------------------------------------------
def cmd_push(args: argparse.Namespace) -> int:
    """Upload what the store lacks: closed WARC files, the index, a manifest snapshot."""
    from mirror.archive.damage import tally
    from mirror.archive.lock import ArchiveLock
    from mirror.crawl.pendingmark import after_push, before_push
    from mirror.store.objstore import open_store
    from mirror.store.sync import push

    cfg = load_config(args.config)
    url = store_url(cfg, "push to")
    root = cfg.site.output_dir
    if getattr(args, "db", None) or (
            shared_worker_note(root) and not ArchiveLayout(root).manifest.exists()):
        return _push_worker(args, root, url)
    if not ArchiveLayout(root).manifest.exists():
        raise StoreUsageError(f"{root}: no archive to push (has `mirror run {args.config}` "
                              "run yet?)")
    layout = ArchiveLayout(root)
    with ArchiveLock(root), tally() as damaged:  # a symlink out of the archive, a bad index line
        cleared = before_push(layout.manifest)  # the last run's "uploads pending"
        result = push(root, open_store(url), force=args.force)
        after_push(layout.manifest, layout.report(cleared[0]) if cleared else layout.root,
                   cleared, result.complete)
    print("\n".join(result.lines()))
    if not result.complete:  # refused: the user acts; else the store was not reachable
        return ExitCode.USAGE if result.lasting else ExitCode.UPLOAD_PENDING
    return ExitCode.DAMAGED if damaged.count else ExitCode.OK


def _push_worker(args: argparse.Namespace, root: Path, url: str) -> int:
    """`mirror push SITE --db DSN` of a worker's folder (mirror.crawl.workerpush)."""
    from mirror.archive.lock import ArchiveLock
    from mirror.archive.workerfolder import worker_of
    from mirror.crawl.workerpush import push_worker_folder
    from mirror.manifest.db import is_database_url, shown

    worker = worker_of(root)
    if worker is None:
        raise StoreUsageError(f"--db: {root} is not the folder of a worker of a shared run "
                              f"(no {ArchiveLayout(root).worker_mark.name})")
    if not args.db:
        raise StoreUsageError(f"{root} is the folder of worker {worker} of a shared run: "
                              f"give the run's database, `mirror push {args.config} --db "
                              "postgresql://...`")
    if not is_database_url(args.db):
        raise StoreUsageError(f"--db {shown(args.db)!r}: expected a PostgreSQL URL such as "
                              "postgresql://user@host/dbname")
    with ArchiveLock(root):
        result = push_worker_folder(root, args.db, url, worker)
    print("\n".join(result.lines()))
    if not result.complete:
        print(result.pending_line(args.config), file=sys.stderr)
        return ExitCode.UPLOAD_PENDING
    return ExitCode.OK


def cmd_restore(args: argparse.Namespace) -> int:
    """Rebuild the site's archive folder from its store's latest snapshot."""
    from mirror.archive.lock import ArchiveLock
    from mirror.store.objstore import open_store
    from mirror.store.sync import restore

    cfg = load_config(args.config)
    url = store_url(cfg, "restore from")
    root = cfg.site.output_dir
    if ArchiveLayout(root).manifest.exists() and not args.force:
        raise StoreUsageError(
            f"{root} holds an archive already; `mirror restore` rebuilds a lost one. Move "
            "the folder aside, or give --force to replace its manifest with the store's "
            "snapshot (its WARC files the snapshot does not name are moved aside)")
    root.mkdir(parents=True, exist_ok=True)
    with ArchiveLock(root):
        result = restore(root, open_store(url))
    print("\n".join(result.lines()))
    if not result.restored:
        return ExitCode.USAGE
    print(f"next: mirror run {args.config}   (an incremental run from the restored archive)")
    return ExitCode.OK


def add_to_report(path: Path, result: PushResult | None) -> None:
    """The run's last push, as the "store" entry of its report (reports/<run>.json)."""
    if result is None:
        return
    from mirror.archive.fsutil import atomic_write_text

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    data["store"] = result.as_dict()
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
