"""`mirror verify`: every WARC file, the manifest and the index of an archive, in its folder,
its store, or a run shared by several workers."""

from __future__ import annotations

import argparse
from typing import Any

from mirror.cli.command import (
    ADDRESS,
    FROM_STORE,
    Command,
    existing_warc_dir,
    finish_prune,
)
from mirror.errors import UsageError
from mirror.model import ExitCode
from mirror.terminal import say


def verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("--from-store", action="store_true", help=FROM_STORE)
    verify.add_argument("--db", metavar="DSN",
                        help="verify a run shared by several workers (`mirror run --db`): "
                             "its manifest in this database (postgresql://...), its WARC "
                             "files and index in the site file's [archive] store")


def cmd_verify(args: argparse.Namespace) -> int:
    from mirror.archive.lock import ArchiveLock
    from mirror.cli.bar import Bar
    from mirror.config import load_config
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader
    from mirror.storecmds import reading
    from mirror.verify import check_archive, format_problems

    if args.db:
        return _verify_shared(args)
    source = reading(args)
    if source.in_store:  # its files streamed, its manifest the store's snapshot
        return _verify_store(source)
    cfg = load_config(args.config)
    manifest_path = ArchiveLayout(cfg.site.output_dir).manifest
    existing_warc_dir(cfg, args)
    with ArchiveLock(cfg.site.output_dir):
        finish_prune(cfg.site.output_dir)
        manifest = ManifestReader(manifest_path) if manifest_path.exists() else None
        try:
            with Bar("verify") as bar:
                verdict = check_archive(cfg.site.output_dir, manifest, bar)
        finally:
            if manifest is not None:
                manifest.close()
    if verdict.problems:
        say(format_problems(list(verdict.problems)))
    say(verdict.summary())
    return ExitCode.DAMAGED if verdict.problems else ExitCode.OK


def _verify_shared(args: argparse.Namespace) -> int:
    """`verify --db DSN`: a run shared by several workers is checked in its store, the one
    place where all its files are (each worker's folder holds only its own)."""
    from mirror.config import load_config
    from mirror.storecmds import is_address
    from mirror.verify import format_problems
    from mirror.verify.shared import verify_db

    store = str(args.config)
    if not is_address(store):
        cfg = load_config(args.config)
        if not cfg.archive.store:
            raise UsageError(
                f"{cfg.path}: --db verifies a run shared by several workers, whose WARC "
                "files are all in one place only in its store, and this site file sets no "
                '[archive] store (e.g. store = "s3://bucket/prefix")')
        store = cfg.archive.store
    result = verify_db(args.db, store)
    if result.verdict.problems:
        say(format_problems(result.verdict.problems))
    say(result.summary())
    return result.exit_code


def _verify_store(source: Any) -> int:
    from mirror.cli.bar import Bar
    from mirror.manifest.reader import ManifestReader
    from mirror.verify import check_archive, format_problems

    try:
        path = source.where.manifest()
        manifest = ManifestReader(path) if path is not None else None
        try:
            with Bar("verify") as bar:
                verdict = check_archive(source.where, manifest, bar)
        finally:
            if manifest is not None:
                manifest.close()
    finally:
        source.close()
    if verdict.problems:
        say(format_problems(list(verdict.problems)))
    say(f"{source.label}: {verdict.summary()}")
    return ExitCode.DAMAGED if verdict.problems else ExitCode.OK



COMMANDS = (
    Command("verify", "check every WARC file, the manifest and the index; exit 65 on any "
            "problem", cmd_verify, verify_arguments, config=ADDRESS),
)
