"""`mirror schedule` (the OS timers of the sites' [schedule], or their registration in the
fleet) and `mirror worker` (a worker of the fleet's queue)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.cli.command import LIBRARY_DEFAULT, Command, fleet_db
from mirror.errors import UsageError
from mirror.model import ExitCode

if TYPE_CHECKING:
    from mirror.config import ConfigError
    from mirror.schedule.timers import Site


def schedule_arguments(schedule: argparse.ArgumentParser) -> None:
    schedule.add_argument("action", choices=("apply", "list", "remove", "run-now"),
                          help="apply: one timer per scheduled site (and none for the others); "
                               "list: each site's timer, next and last run; remove: the timers; "
                               "run-now (with --db): queue a run of the site in the fleet now")
    schedule.add_argument("target", nargs="?", type=Path,
                          help=f"a site file, or a library folder (default: {LIBRARY_DEFAULT}); "
                               "run-now: also a registered site's name")
    schedule.add_argument("--timer", choices=("auto", "systemd", "cron"), default="auto",
                          help="apply: a systemd user timer or a crontab line (auto: systemd "
                               "when a user manager answers, else cron)")
    schedule.add_argument("--db", metavar="DSN",
                          help="register the sites in the fleet of this PostgreSQL database "
                               "instead of OS timers: `mirror worker`s run them (default: "
                               "$MIRROR_DB; needs mirror[fleet])")


def cmd_schedule(args: argparse.Namespace) -> int:
    from datetime import datetime

    from mirror.schedule import listing, timers

    env, remove = os.environ, args.action == "remove"
    db = fleet_db(args.db, needed=args.action == "run-now")
    if db is not None:
        return _schedule_fleet(args, db)
    sites, broken, in_scope = _schedule_sites(args.target, remove=remove)
    have = timers.Installed.read(env)
    listed = {site.file for site, _ in sites}
    for path in sorted({*have.units, *have.cron_lines()}):  # timers whose file is gone, ...
        if in_scope(path) and path not in listed and (args.action != "apply" or
                                                      not path.exists()):
            sites += _schedule_sites(path, remove=remove or not path.exists())[0]
    for exc in broken:
        print(f"mirror: {exc}\n  (its timer, if it has one, is left as it is)", file=sys.stderr)
    if args.action == "list":
        now, one = datetime.now(), args.target is not None and args.target.is_file()
        print(listing.render([listing.row(site, archive, have, now) for site, archive in sites
                              if site.schedule or have.describe(site.file) or one]))
        return ExitCode.USAGE if broken else ExitCode.OK
    kind = timers.backend(args.timer, env) if not remove else timers.SYSTEMD
    changes = timers.converge([site for site, _ in sites], kind, have,
                              lambda every: listing.next_text(every, datetime.now()))
    print("\n".join(changes.lines) or "no site files and no timers of mirror here")
    for problem in changes.problems:
        print(f"mirror: {problem}", file=sys.stderr)
    return ExitCode.USAGE if broken or changes.problems else ExitCode.OK


def _schedule_fleet(args: argparse.Namespace, db: str) -> int:
    """`mirror schedule ACTION --db DSN`: the sites registered in the fleet, not OS timers;
    the same site files and messages as for timers (fleet/commands.py)."""
    from mirror.fleet.commands import schedule

    names: list[str] = []
    target = args.target
    sites: list[tuple[Site, Path | None]]
    broken: list[ConfigError]
    in_scope: Callable[[Path], bool]
    if args.action == "run-now" and target is None:
        raise UsageError("run-now needs a site file, a library folder or a registered "
                         "site's name")
    if args.action == "run-now" and target is not None and not target.exists():
        names, target = [str(target)], None  # a registered site's name
        sites, broken, in_scope = [], [], (lambda p: False)
    else:
        sites, broken, in_scope = _schedule_sites(target, remove=args.action == "remove")
    for exc in broken:
        print(f"mirror: {exc}\n  (its registration, if it has one, is left as it is)",
              file=sys.stderr)
    done = schedule(args.action, db, sites, in_scope, names=names)
    if done.lines:
        print("\n".join(done.lines))
    for problem in done.problems:
        print(f"mirror: {problem}", file=sys.stderr)
    if broken or (done.problems and not done.code):
        return ExitCode.USAGE
    return done.code


def worker_arguments(worker: argparse.ArgumentParser) -> None:
    worker.add_argument("--db", metavar="DSN",
                        help="the fleet's database, postgresql://... (default: $MIRROR_DB)")
    worker.add_argument("--data", metavar="DIR", type=Path, required=True,
                        help="this machine's working folder: a copy of each site's archive "
                             "while it runs (the archive itself lives in its store)")
    worker.add_argument("--concurrency", type=int, default=1, metavar="N",
                        help="site runs at once on this machine (default 1)")
    worker.add_argument("--name", help="this worker's name on the fleet page (default: "
                                       "host:pid)")
    worker.add_argument("--stall-after", type=float, default=30.0, metavar="S",
                        help="seconds without a heartbeat after which a worker's runs are "
                             "handed to another (default 30; the same on every worker)")
    worker.add_argument("--tick", type=int, default=60, metavar="S",
                        help="seconds between two looks at the schedules and at stalled runs "
                             "(default 60)")
    worker.add_argument("--poll", type=float, default=5.0, metavar="S",
                        help="seconds between two looks at the queue when PostgreSQL sent "
                             "no notification (default 5)")
    worker.add_argument("-v", "--verbose", action="store_true",
                        help="log every job Procrastinate starts and ends (ticks too)")


def cmd_worker(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from mirror.fleet.queue import Timing
    from mirror.fleet.worker import WorkerOptions, serve

    db = fleet_db(args.db, needed=True)
    assert db is not None
    timing = Timing(stall_after=args.stall_after, tick=args.tick, poll=args.poll)
    timing.check()
    if args.concurrency < 1:
        raise UsageError("--concurrency must be 1 or more")
    options = WorkerOptions(db, args.data.expanduser().resolve(), args.concurrency,
                            args.name or "", timing)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # mirror's own lines say what each run does
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
    return asyncio.run(serve(options, lambda text: print(text, flush=True)))


def _schedule_sites(target: Path | None, *, remove: bool) -> tuple[
        list[tuple[Site, Path | None]], list[ConfigError], Callable[[Path], bool]]:
    """The site files `mirror schedule` acts on (a file, or a library's), each with its
    archive folder; the files that cannot be read; which timers belong to the target.
    With `remove` every file counts as unscheduled, readable or not."""
    from mirror.app.library import Library, default_library
    from mirror.config import ConfigError, load_config
    from mirror.schedule.timers import Site

    where = Path(os.path.abspath((target or default_library()).expanduser()))
    if where.is_dir():
        files = Library(where).files()
        in_scope: Callable[[Path], bool] = (
            (lambda p: p.parent == where) if target else (lambda p: True))
    elif where.is_file() or remove:
        files, in_scope = [where], (lambda p: p == where)  # gone: its timer is removed
    elif target:
        raise UsageError(f"{where}: no such site file or library folder")
    else:
        files, in_scope = [], (lambda p: True)
    sites: list[tuple[Site, Path | None]] = []
    broken = []
    for path in files:
        try:
            cfg = load_config(path)
        except ConfigError as exc:
            if remove:
                gone = "" if path.exists() else "its site file is gone"
                sites.append((Site(path, path.stem, None, gone), None))
            else:
                broken.append(exc)
            continue
        if remove:
            sites.append((Site(cfg.path, cfg.site.name, None, ""), cfg.site.output_dir))
        else:
            sites.append((Site(cfg.path, cfg.site.name, cfg.schedule.every),
                          cfg.site.output_dir))
    return sites, broken, in_scope



COMMANDS = (
    Command("schedule", "install, list or remove the OS timers of the sites' [schedule]",
            cmd_schedule, schedule_arguments, config=None),
    Command("worker", "run the fleet's site runs on this machine: a worker of the "
                      "PostgreSQL database's queue (needs mirror[fleet])", cmd_worker,
            worker_arguments, config=None),
)
