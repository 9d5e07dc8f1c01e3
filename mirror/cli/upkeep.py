"""Between runs: `mirror prune` ([retention], or --keep-* given) and `mirror index` (the CDXJ
index from the WARC files, or the pages' full-text index)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.cli.command import Command, existing_warc_dir, finish_prune
from mirror.errors import UsageError
from mirror.model import ExitCode

if TYPE_CHECKING:
    from mirror.layout import ArchiveLayout


def prune_arguments(prune: argparse.ArgumentParser) -> None:
    prune.add_argument("--dry-run", action="store_true",
                       help="list the runs and files it would drop; change nothing")
    for rule, period in (("last", "the N newest runs"), ("daily", "days"),
                         ("weekly", "ISO weeks"), ("monthly", "months")):
        what = period if rule == "last" else f"the last run of each of the N newest {period}"
        prune.add_argument(f"--keep-{rule}", type=int, metavar="N",
                           help=f"keep {what} (instead of the site file's keep_{rule})")


def cmd_prune(args: argparse.Namespace) -> int:
    from mirror.config import load_config
    from mirror.upkeep.prune import prune_site
    from mirror.upkeep.retention import RULES, Retention

    cfg = load_config(args.config)
    given = {f"keep_{r}": getattr(args, f"keep_{r}") for r in RULES
             if getattr(args, f"keep_{r}") is not None}
    if any(n < 0 for n in given.values()):
        raise UsageError("--keep-* takes a number of runs >= 0")
    policy = Retention(**{**vars(Retention.of(cfg.retention)), **given})
    result = prune_site(cfg, dry_run=args.dry_run, retention=policy)
    print("\n".join(result.lines()))
    if result.dropped and not args.dry_run:  # [archive] store: its copy follows the prune
        from mirror.store.sync import push_after_prune

        for line in push_after_prune(cfg.site.output_dir, cfg.archive.store, cfg.path):
            print(line)
    return ExitCode.OK


def index_arguments(index: argparse.ArgumentParser) -> None:
    index.add_argument("--search", action="store_true",
                       help="rebuild the full-text index of the pages instead (for archives "
                            "made before it existed)")


def cmd_index(args: argparse.Namespace) -> int:
    from mirror.archive import index
    from mirror.archive.damage import tally
    from mirror.archive.lock import ArchiveLock
    from mirror.archive.workerfolder import shared_worker_note
    from mirror.config import load_config
    from mirror.layout import ArchiveLayout

    cfg = load_config(args.config)
    layout = ArchiveLayout(cfg.site.output_dir)
    if note := shared_worker_note(layout.root):  # its WARC files are not the whole run's
        raise UsageError(note)
    warc_dir = existing_warc_dir(cfg, args)
    if args.search:
        return _index_texts(layout, warc_dir)
    with ArchiveLock(cfg.site.output_dir), tally() as damaged:
        finish_prune(cfg.site.output_dir)  # else the index would name files it drops
        n, files = index.rebuild_from_warcs(warc_dir, layout.index)
    left_out = f"; damaged places left out, above: {damaged.count}" if damaged.count else ""
    print(f"wrote {layout.index} ({n} lines from {files} WARC files{left_out})")
    return ExitCode.DAMAGED if damaged.count else ExitCode.OK


def _index_texts(layout: ArchiveLayout, warc_dir: Path) -> int:
    from mirror.archive.lock import ArchiveLock
    from mirror.archive.workerfolder import no_manifest
    from mirror.manifest.writer import Manifest
    from mirror.upkeep.textindex import rebuild_texts

    if not layout.manifest.exists():
        raise UsageError(no_manifest(layout.manifest))
    started = time.monotonic()
    with ArchiveLock(layout.root):
        manifest = Manifest(layout.manifest)
        try:
            done = rebuild_texts(manifest, warc_dir)
        finally:
            manifest.close()
    unreadable = f"; {done.unreadable} unreadable (see above)" if done.unreadable else ""
    print(f"indexed the text of {done.pages} page captures in "
          f"{time.monotonic() - started:.1f}s{unreadable}")
    return ExitCode.OK



COMMANDS = (
    Command("index", "rebuild index.cdxj from the WARC files alone", cmd_index,
            index_arguments),
    Command("prune", "drop the runs [retention] does not keep, and free their space",
            cmd_prune, prune_arguments),
)
