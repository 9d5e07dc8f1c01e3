"""`mirror run`: the site's run (mirror.run.life), and the options of a worker of a run
shared through PostgreSQL, checked here."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mirror.cli import command as commands
from mirror.cli.command import Command
from mirror.errors import UsageError

if TYPE_CHECKING:
    from mirror.config import SiteConfig
    from mirror.crawl.sharedrun import SharedRun


def run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("-q", "--quiet", action="store_true",
                     help="print only problems and the summary line (for cron)")
    run.add_argument("-v", "--verbose", action="store_true", help="log every fetch")
    run.add_argument("--new-run", action="store_true",
                     help="start a new snapshot even if the last run did not finish")
    run.add_argument("--scheduled", action="store_true",
                     help="as a timer starts it: wait for a run still going (one waiter at "
                          "most), and apply [retention] after a run that made a snapshot")
    run.add_argument("--db", metavar="DSN",
                     help="share the run with other workers through this PostgreSQL "
                          "database (postgresql://...; needs mirror[fleet]): each worker "
                          "has its own copy of the site file and its own folder")
    run.add_argument("--join", action="store_true",
                     help="with --db: only join an unfinished run (do nothing if there is "
                          "none; how a supervisor restarts a worker)")
    run.add_argument("--worker-id", metavar="ID",
                     help="with --db: this worker's id, unique in the fleet and the same "
                          "after a restart (default: host name and a digest of the folder)")
    run.add_argument("--lease-ttl", type=float, metavar="S",
                     help="with --db: seconds a host lease lasts, i.e. how long a dead "
                          "worker's hosts wait before another takes them over (default: "
                          "[crawl] timeout + 32)")
    run.add_argument("--forget-worker", action="append", default=[], metavar="ID",
                     help="with --db: a worker gone for good with its disk; its WARC files "
                          "not uploaded are declared lost and their URLs fetched again "
                          "(repeatable)")


def cmd_run(args: argparse.Namespace) -> int:
    from mirror.config import load_config
    from mirror.run.life import RunOptions, run_site

    cfg = load_config(args.config)
    shared = shared_run(cfg, args)
    return run_site(cfg, RunOptions(quiet=args.quiet, verbose=args.verbose,
                                    new_run=args.new_run, scheduled=args.scheduled,
                                    shared=shared, settle_gc=commands.OWN_PROCESS))


def shared_run(cfg: SiteConfig, args: argparse.Namespace) -> SharedRun | None:
    """`mirror run --db`: how this worker takes part in the shared run (usage errors
    named by their option)."""
    lone = [o for o, given in (("--join", args.join), ("--worker-id", args.worker_id),
                               ("--lease-ttl", args.lease_ttl is not None),
                               ("--forget-worker", args.forget_worker)) if given]
    if not args.db:
        if lone:
            raise UsageError(f"{lone[0]} works only with --db postgresql://...")
        return None
    from mirror.crawl.sharedfrontier import min_ttl
    from mirror.crawl.sharedrun import SharedRun, check_worker_id, default_worker_id
    from mirror.manifest.db import is_database_url, shown

    if not is_database_url(args.db):
        raise UsageError(f"--db {shown(args.db)!r}: expected a PostgreSQL URL such as "
                         "postgresql://user@host/dbname")
    for option, given in (("--scheduled", args.scheduled), ("--new-run", args.new_run)):
        if given:
            raise UsageError(f"{option} does not go with --db (a shared run is started by "
                             "its first worker and ends when nothing is left to fetch)")
    owner = args.worker_id or default_worker_id(cfg.site.output_dir)
    for name in (owner, *args.forget_worker):
        if (why := check_worker_id(name)) is not None:
            raise UsageError(why)
    if args.lease_ttl is not None and args.lease_ttl < min_ttl(cfg.crawl.timeout):
        raise UsageError(f"--lease-ttl {args.lease_ttl:g}: expected at least "
                         f"{min_ttl(cfg.crawl.timeout):g} seconds ([crawl] timeout "
                         f"{cfg.crawl.timeout:g} + 3: a request must end under its lease)")
    return SharedRun(args.db, owner, args.join, args.lease_ttl, tuple(args.forget_worker))


COMMANDS = (
    Command("run", "crawl the site (resumes an unfinished run)", cmd_run, run_arguments),
)
