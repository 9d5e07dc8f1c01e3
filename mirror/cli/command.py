"""What the command modules build on: a command's declaration (its name, help, arguments
and function, in one place) and the helpers that several groups of commands share (the
user's mistake is mirror.errors.UsageError). Cheap to import: a module declaring commands
imports what its commands run inside their functions, so that `mirror CMD` loads only what
CMD needs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.errors import UsageError

if TYPE_CHECKING:
    from mirror.config import SiteConfig

#: the help of a command's site file argument, unless it says another
SITE_FILE = "the site's TOML file"
#: serve, export and verify read an archive from its folder or from object storage
ADDRESS = "the site's TOML file, or an archive's s3://bucket/prefix address"
FROM_STORE = ("read the archive from the site file's [archive] store instead of its "
              "folder (ranged reads: nothing is downloaded whole)")
#: where the library is when no folder is named
LIBRARY_DEFAULT = "$MIRROR_LIBRARY, else ~/mirror"
#: --library of the commands that take one
LIBRARY = f"the library folder (default: {LIBRARY_DEFAULT})"
#: --db of serve and export: a run shared by several workers
SHARED_DB = ("read a run shared by several workers (`mirror run --db`): its WARC files and "
             "index from the site file's [archive] store (or the s3:// address given), its "
             "manifest a consistent snapshot of this database (postgresql://...)")


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """A command that takes its site file only."""


class Command:
    """`mirror NAME`: its one-line help (also its --help's description), its site file
    argument's help (`config`; None: it takes none), the arguments after it, and the
    function that runs it and returns its exit code. (A plain class: a NamedTuple or a
    dataclass costs every start a millisecond to build.)"""

    __slots__ = ("arguments", "config", "help", "name", "run")

    def __init__(self, name: str, help: str, run: Callable[[argparse.Namespace], int],
                 arguments: Callable[[argparse.ArgumentParser], None] = no_arguments,
                 config: str | None = SITE_FILE) -> None:
        self.name, self.help, self.run = name, help, run
        self.arguments, self.config = arguments, config

    def declare(self, parser: argparse.ArgumentParser) -> None:
        if self.config is not None:
            parser.add_argument("config", help=self.config)
        self.arguments(parser)


#: whether this process is the `mirror` command (not a test calling main): crawl.procgc.
#: Set by main_entry; read as `command.OWN_PROCESS`
OWN_PROCESS = False


def serving(args: argparse.Namespace,
            what: str) -> tuple[str, Callable[[str, str], str] | None]:
    """The address to bind (--host, else with --lan the LAN address, else 127.0.0.1) and,
    with --lan, what to print once listening (the address with its token, a QR code)."""
    if not args.lan:
        return args.host or "127.0.0.1", None
    from mirror import lan

    host = lan.lan_host(args.host)
    return host, lambda base, token: lan.notice(base, token, what, sys.stdout.encoding)


def fleet_db(given: str | None, *, needed: bool) -> str | None:
    """The fleet's database (--db, else $MIRROR_DB), checked that the fleet extra is here;
    None when none is named (UsageError when `needed`)."""
    from mirror.fleet.db import ENV, dsn_from, require_extra

    dsn = dsn_from(given)
    if dsn is None:
        if needed:
            raise UsageError(f"this needs the fleet's database: --db postgresql://... or "
                             f"${ENV}")
        return None
    require_extra()
    return dsn


def existing_warc_dir(cfg: SiteConfig, args: argparse.Namespace) -> Path:
    from mirror.layout import ArchiveLayout

    warc_dir = ArchiveLayout(cfg.site.output_dir).warc
    if not warc_dir.is_dir():
        raise UsageError(f"{warc_dir}: no WARC folder (has `mirror run {args.config}` run yet?)")
    return warc_dir


def finish_prune(output_dir: Path) -> None:
    """Before `mirror verify` or `mirror index` reads the archive: finish (or undo) a prune
    a crash stopped, which the next `mirror run` would do too; told on stderr. A manifest
    that cannot be read is reported as damage (`verify` tells what is wrong with it)."""
    from mirror.archive.damage import Damage, report
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestError
    from mirror.upkeep.prune import PruneError, finish_interrupted_prune

    try:
        done = finish_interrupted_prune(output_dir)
    except ManifestError as exc:
        report(Damage(ArchiveLayout(output_dir).manifest.name, None, f"cannot be read: {exc}"))
        return
    except (OSError, PruneError) as exc:  # read-only: verify tells
        print(f"mirror: cannot finish an interrupted prune: {exc}", file=sys.stderr)
        return
    if done:
        print(f"mirror: {done}", file=sys.stderr)
