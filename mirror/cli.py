"""Command line: subcommands, logging and the one place where errors become exit codes."""

from __future__ import annotations

# Start-up cost: `check`, `status` and `runs` load only what is imported here. asyncio,
# rich (mirror.run.progress), warcio (mirror.archive.index) and aiohttp (the crawler) are
# imported inside the commands that use them; tests/test_startup.py keeps it so.
import argparse
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror import __version__, searchcmd
from mirror.archive.lock import ArchiveLock, ArchiveLocked
from mirror.archive.manifest_queries import ManifestError, ManifestReader, Run
from mirror.archive.objstore import StoreError
from mirror.archive.workerfolder import no_manifest, shared_worker_note
from mirror.config import ConfigError, SiteConfig, load_config
from mirror.layout import ArchiveLayout
from mirror.librarycmds import LibraryUsageError
from mirror.model import ExitCode, RunState
from mirror.run.report import (
    RunStatus,
    counts_text,
    render_changes,
    render_status,
)
from mirror.storecmds import StoreUsageError
from mirror.terminal import say

if TYPE_CHECKING:
    from mirror.crawl.sharedrun import SharedRun
    from mirror.schedule.timers import Site

log = logging.getLogger("mirror")


class UsageError(Exception):
    """A user mistake outside the config file (bad path, bad argument)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mirror", description="Archive a website into WARC files and browse it offline."
    )
    p.add_argument("--version", action="version", version=f"mirror {__version__}")
    p.add_argument("--traceback", action="store_true", help="show the full stack on errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cmd(name: str, help_: str, config: bool = True,
            config_help: str = "the site's TOML file") -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        if config:
            sp.add_argument("config", help=config_help)
        return sp

    # serve, export and verify read an archive from its folder or from object storage
    from_store = ("read the archive from the site file's [archive] store instead of its "
                  "folder (ranged reads: nothing is downloaded whole)")
    address = "the site's TOML file, or an archive's s3://bucket/prefix address"

    ui = cmd("ui", "the library app: every site, its runs and reports, in the browser",
             config=False)
    ui.add_argument("library", nargs="?", type=Path,
                    help="a folder of site files (default: $MIRROR_LIBRARY, else ~/mirror)")
    ui.add_argument("--host",
                    help="address to bind (127.0.0.1; another one requires the printed token "
                         "from other machines too; with --lan: instead of the LAN address)")
    ui.add_argument("--lan", action="store_true",
                    help="read-only on the local network, for a phone: bind this machine's "
                         "LAN address, print the address with a token and its QR code; no "
                         "run, stop, verify, export or edit (no browser opened here)")
    ui.add_argument("--port", type=int,
                    help="port to bind (default: the last start's when free, else a free one)")
    ui.add_argument("--no-browser", action="store_true", help="do not open a browser")
    ui.add_argument("--db", metavar="DSN",
                    help="also show the fleet of this PostgreSQL database (its workers, runs "
                         "and queue; default: $MIRROR_DB; needs mirror[fleet])")
    add = cmd("add", "write a new site file for URL into the library", config=False)
    add.add_argument("url", help="the site's start URL, e.g. https://example.com/")
    add.add_argument("--library", metavar="DIR", type=Path,
                     help="the library folder (default: $MIRROR_LIBRARY, else ~/mirror)")
    add.add_argument("--name", metavar="N",
                     help="the site's name: letters, digits, '_' and '-' (default: from the "
                          "URL's host and a port that is not the scheme's, e.g. example-com, "
                          "127-0-0-1-8081)")
    add.add_argument("--overlap", action="store_true",
                     help="add the site even though another site of the library already "
                          "crawls its start URL")
    remove = cmd("remove", "remove a site from the library: its site file and its timer "
                           "(its archive is kept unless --delete-archive)", config=False)
    remove.add_argument("name", help="the site: its file name without .toml, or its name")
    remove.add_argument("--library", metavar="DIR", type=Path,
                        help="the library folder (default: $MIRROR_LIBRARY, else ~/mirror)")
    remove.add_argument("--delete-archive", action="store_true",
                        help="delete its archive folder too, after a confirmation naming "
                             "its size")
    remove.add_argument("--yes", action="store_true",
                        help="with --delete-archive: do not ask (for scripts)")
    cmd("check", "validate a site file and print the effective settings")
    run = cmd("run", "crawl the site (resumes an unfinished run)")
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
    schedule = cmd("schedule", "install, list or remove the OS timers of the sites' [schedule]",
                   config=False)
    schedule.add_argument("action", choices=("apply", "list", "remove", "run-now"),
                          help="apply: one timer per scheduled site (and none for the others); "
                               "list: each site's timer, next and last run; remove: the timers; "
                               "run-now (with --db): queue a run of the site in the fleet now")
    schedule.add_argument("target", nargs="?", type=Path,
                          help="a site file, or a library folder (default: $MIRROR_LIBRARY, "
                               "else ~/mirror); run-now: also a registered site's name")
    schedule.add_argument("--timer", choices=("auto", "systemd", "cron"), default="auto",
                          help="apply: a systemd user timer or a crontab line (auto: systemd "
                               "when a user manager answers, else cron)")
    schedule.add_argument("--db", metavar="DSN",
                          help="register the sites in the fleet of this PostgreSQL database "
                               "instead of OS timers: `mirror worker`s run them (default: "
                               "$MIRROR_DB; needs mirror[fleet])")
    worker = cmd("worker", "run the fleet's site runs on this machine: a worker of the "
                           "PostgreSQL database's queue (needs mirror[fleet])", config=False)
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
    index_ = cmd("index", "rebuild index.cdxj from the WARC files alone")
    index_.add_argument("--search", action="store_true",
                        help="rebuild the full-text index of the pages instead (for archives "
                             "made before it existed)")
    searchcmd.add_arguments(cmd("search", searchcmd.HELP, config=False))
    status = cmd("status", "show the runs, URL counts, WARC files and last error (also during "
                           "a run); without a site file, every site of the library", config=False)
    status.add_argument("config", nargs="?", help="the site's TOML file, or a library folder "
                                                  "(default: the library, $MIRROR_LIBRARY "
                                                  "else ~/mirror)")
    verify = cmd("verify", "check every WARC file, the manifest and the index; exit 65 on any "
                 "problem", config_help=address)
    verify.add_argument("--from-store", action="store_true", help=from_store)
    verify.add_argument("--db", metavar="DSN",
                        help="verify a run shared by several workers (`mirror run --db`): "
                             "its manifest in this database (postgresql://...), its WARC "
                             "files and index in the site file's [archive] store")
    push = cmd("push", "upload to the [archive] store what it lacks: closed WARC files, the "
                       "index, a manifest snapshot")
    push.add_argument("--force", action="store_true",
                      help="replace a snapshot in the store that another archive folder made")
    restore = cmd("restore", "rebuild the site's archive folder from its [archive] store's "
                             "latest snapshot")
    restore.add_argument("--force", action="store_true",
                         help="replace the folder's manifest when it has one (its WARC files "
                              "the snapshot does not name are moved aside)")
    prune = cmd("prune", "drop the runs [retention] does not keep, and free their space")
    prune.add_argument("--dry-run", action="store_true",
                       help="list the runs and files it would drop; change nothing")
    for rule, period in (("last", "the N newest runs"), ("daily", "days"),
                         ("weekly", "ISO weeks"), ("monthly", "months")):
        what = period if rule == "last" else f"the last run of each of the N newest {period}"
        prune.add_argument(f"--keep-{rule}", type=int, metavar="N",
                           help=f"keep {what} (instead of the site file's keep_{rule})")
    explain = cmd("explain", "show the canonical form of a URL and whether it would be crawled")
    explain.add_argument("url", help="the URL to explain")
    explain.add_argument("--depth", type=int, default=1,
                         help="links away from a start URL (default 1)")
    explain.add_argument("--offline", action="store_true",
                         help="never fetch robots.txt; use the archived copy only")
    cmd("runs", "list the runs with what changed in each")
    diff = cmd("diff", "what changed between two runs (default: the last two)")
    diff.add_argument("runs", nargs="*", type=int, metavar="RUN", help="run ids (0, 1 or 2)")
    diff.add_argument("--page", metavar="URL",
                      help="show how this page's text changed between the two runs, word by "
                           "word")
    serve = cmd("serve", "browse the archive offline: a replay server on 127.0.0.1",
                config_help=address)
    serve.add_argument("--from-store", action="store_true", help=from_store)
    serve.add_argument("--host", help="address to bind (127.0.0.1; with --lan: instead of the "
                                      "LAN address)")
    serve.add_argument("--lan", action="store_true",
                       help="serve read-only on the local network, for a phone: bind this "
                            "machine's LAN address, print the address with a token and its QR "
                            "code; only browsers that opened it get in")
    serve.add_argument("--port", type=int, default=8080, help="port to bind (8080; 0: any)")
    export = cmd("export", "write the archive as a folder that opens from file://, or a WACZ",
                 config_help=address)
    export.add_argument("--from-store", action="store_true", help=from_store)
    export.add_argument("--to", metavar="DIR", type=Path, help="folder to write")
    export.add_argument("--at", metavar="TIMESTAMP",
                        help="export the site as it was then (1-14 digits, YYYYmmddHHMMSS)")
    export.add_argument("--wacz", metavar="FILE", type=Path, help="WACZ file to write")
    export.add_argument("--force", action="store_true",
                        help="replace a file at --wacz/--zim that mirror did not write")
    export.add_argument("--zim", metavar="FILE", type=Path,
                        help="ZIM file to write, for Kiwix readers (needs mirror[zim])")
    for name, what in (("title", "its title (default: the main page's, cut at 30 characters)"),
                       ("description", "its description (default: the main page's meta "
                                       "description, cut at 80 characters)"),
                       ("language", "the language of its pages and its search, e.g. en, fra, "
                                    "pt-BR (default: the main page's lang, else English)"),
                       ("publisher", "who made the file (default: mirror)")):
        export.add_argument(f"--{name}", metavar="TEXT", help=f"with --zim: {what}")
    demo = cmd("demo", "serve the bundled demo site on 127.0.0.1 and mirror it into the "
                       "library (demo.toml, archive/demo)", config=False)
    demo.add_argument("dir", nargs="?", type=Path,
                      help="the library folder (default: $MIRROR_LIBRARY, else ~/mirror)")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = COMMANDS[args.command]
    try:
        return handler(args)
    except ConfigError as exc:
        for one in exc.errors:  # every problem of the file, one a line
            say(f"mirror: {one}", file=sys.stderr)
        if len(exc.errors) > 1:
            print(f"mirror: {exc.path}: {len(exc.errors)} errors", file=sys.stderr)
        return ExitCode.USAGE
    except (UsageError, ManifestError, LibraryUsageError) as exc:
        say(f"mirror: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except ArchiveLocked as exc:
        say(f"mirror: {exc}", file=sys.stderr)
        return ExitCode.LOCKED
    except (StoreError, StoreUsageError) as exc:  # an object store: its address, its
        print(f"mirror: {exc}", file=sys.stderr)  # credentials, or it cannot be reached
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("mirror: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `mirror search ... | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return ExitCode.OK
    except Exception as exc:  # noqa: BLE001 - the one place internal errors become exit 1
        if args.traceback:
            traceback.print_exc()
        else:
            say(f"mirror: internal error: {type(exc).__name__}: {exc} "
                  "(run with --traceback for details)", file=sys.stderr)
        return ExitCode.INTERNAL


#: whether this process is the `mirror` command (not a test calling main): see procgc
_OWN_PROCESS = False


def main_entry() -> None:
    global _OWN_PROCESS
    _OWN_PROCESS = True
    sys.exit(main())


# -- commands ------------------------------------------------------------------------------
def cmd_ui(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.app.library import default_library
    from mirror.app.ui import serve_library

    folder = (args.library or default_library()).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: not a folder (a library is a folder of site files)")
    host, lan = _serving(args, "the library and its archives")
    db = _fleet_db(args.db, needed=False)
    try:
        return asyncio.run(serve_library(folder, host=host, port=args.port,
                                         open_browser=not args.no_browser,
                                         say=lambda text: print(text, flush=True), lan=lan,
                                         db=db))
    except OSError as exc:  # the port is taken, the address is not ours
        where = host if args.port is None else f"{host}:{args.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc


def _serving(args: argparse.Namespace,
             what: str) -> tuple[str, Callable[[str, str], str] | None]:
    """The address to bind (--host, else with --lan the LAN address, else 127.0.0.1) and,
    with --lan, what to print once listening (the address with its token, a QR code)."""
    if not args.lan:
        return args.host or "127.0.0.1", None
    from mirror import lan

    try:
        host = lan.lan_host(args.host)
    except lan.LanError as exc:
        raise UsageError(str(exc)) from exc
    return host, lambda base, token: lan.notice(base, token, what, sys.stdout.encoding)


def cmd_check(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    print(f"{cfg.path}: OK")
    for section, values in cfg.effective().items():
        print(f"[{section}]")
        for key, value in values.items():
            print(f"  {key} = {value!r}")
    from mirror.crawl.traprules import rule_lines

    print("\n".join(rule_lines(cfg.scope.traps)))
    print(f"archive: {cfg.site.output_dir}")
    if cfg.schedule.every is not None:
        from datetime import datetime

        from mirror.schedule.listing import next_text

        print(f"next scheduled run: {next_text(cfg.schedule.every, datetime.now())} "
              f"(once `mirror schedule apply {cfg.path}` has installed its timer)")
    return ExitCode.OK


def cmd_run(args: argparse.Namespace) -> int:
    from mirror.run.life import RunOptions, run_site

    cfg = load_config(args.config)
    shared = _shared_run(cfg, args)
    return run_site(cfg, RunOptions(quiet=args.quiet, verbose=args.verbose,
                                    new_run=args.new_run, scheduled=args.scheduled,
                                    shared=shared, settle_gc=_OWN_PROCESS))


def _shared_run(cfg: SiteConfig, args: argparse.Namespace) -> SharedRun | None:
    """`mirror run --db`: how this worker takes part in the shared crawl (usage errors
    named by their option)."""
    lone = [o for o, given in (("--join", args.join), ("--worker-id", args.worker_id),
                               ("--lease-ttl", args.lease_ttl is not None),
                               ("--forget-worker", args.forget_worker)) if given]
    if not args.db:
        if lone:
            raise UsageError(f"{lone[0]} works only with --db postgresql://...")
        return None
    from mirror.archive.sqldb import is_database_url, shown
    from mirror.crawl.hostlease import min_ttl
    from mirror.crawl.sharedrun import SharedRun, check_worker_id, default_worker_id

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


def cmd_status(args: argparse.Namespace) -> int:
    if args.config is None or Path(args.config).is_dir():
        return _library_command("status", args)
    cfg = load_config(args.config)
    layout = ArchiveLayout(cfg.site.output_dir)
    manifest_path, warc_dir = layout.manifest, layout.warc
    manifest = ManifestReader(manifest_path)
    try:
        runs, totals = manifest.runs(), manifest.run_totals()
        statuses = [
            RunStatus(r.id, r.state, r.started_at, r.finished_at, r.exit_code,
                      *totals.get(r.id, (0, 0)))
            for r in runs
        ]
        last = runs[-1].id if runs else 0
        text = render_status(
            str(cfg.site.output_dir), statuses, manifest.url_states(last),
            [(p.name, p.stat().st_size) for p in sorted(warc_dir.glob("*.warc.gz*"))],
            manifest.last_error(last), ArchiveLock.holder(cfg.site.output_dir),
        )
    finally:
        manifest.close()
    say(text)
    return ExitCode.OK


@contextmanager
def _history(args: argparse.Namespace) -> Iterator[tuple[SiteConfig, list[Run], ManifestReader]]:
    """The site, the runs of its archive (not the abandoned ones), and its manifest."""
    cfg = load_config(args.config)
    manifest = ManifestReader(ArchiveLayout(cfg.site.output_dir).manifest)
    try:
        yield cfg, [r for r in manifest.runs() if r.state != RunState.ABANDONED], manifest
    finally:
        manifest.close()


def cmd_runs(args: argparse.Namespace) -> int:
    from mirror.run.runreport import changes_between, health_of

    with _history(args) as (cfg, runs, manifest):
        if not runs:
            print("no runs yet")
        totals, before = manifest.run_totals(), None
        for r in runs:
            counts = {**changes_between(manifest, before, r).counts(),
                      "failed": len(manifest.failed(r.id))}
            before = r.id
            failed = health_of(cfg, r).text()
            say(f"run {r.id:<4} {r.state:<11} {r.started_at} -> {r.finished_at or '...':<20} "
                  f"{totals.get(r.id, (0, 0))[0]:>6} captures  " + counts_text(counts)
                  + (f"  FAILED: {failed}" if failed else ""))
    return ExitCode.OK


def cmd_diff(args: argparse.Namespace) -> int:
    from mirror.run.runreport import changes_between

    with _history(args) as (_, runs, manifest):
        ids = [r.id for r in runs]
        chosen: list[int] = args.runs
        if len(chosen) > 2 or any(i not in ids for i in chosen):
            raise UsageError(f"diff takes up to two run ids among {ids or 'none (no runs yet)'}")
        if len(chosen) < 2:
            newer = chosen[0] if chosen else (ids[-1] if ids else 0)
            older = [i for i in ids if i < newer]
            if not older:
                raise UsageError("diff needs two runs; this archive has "
                                 f"{'only run ' + str(newer) if ids else 'no runs'}")
            chosen = [older[-1], newer]
        a, b = chosen
        if args.page:
            return _page_diff(args, a, b)
        later = runs[ids.index(b)]
        say(render_changes(f"run {a} -> run {b}", changes_between(manifest, a, later)))
    return ExitCode.OK


def _page_diff(args: argparse.Namespace, a: int, b: int) -> int:
    """`mirror diff SITE A B --page URL`: the page's text in its newest capture at or
    before each run, word by word."""
    from mirror.replay.textdiff import diff_stats, word_diff
    from mirror.textview import diff_lines
    from mirror.web.urls import InvalidURL, normalize

    cfg = load_config(args.config)
    try:
        url = normalize(args.page, cfg.scope.ignore_query)
    except InvalidURL as exc:
        raise UsageError(f"--page {args.page!r}: not a URL ({exc.reason})") from exc
    manifest = ManifestReader(ArchiveLayout(cfg.site.output_dir).manifest)
    try:
        history = manifest.page_history(url)
        sides = []
        for run in (a, b):
            cap = next((c for c in reversed(history) if c.run_id <= run), None)
            if cap is None:
                raise UsageError(f"{url}: not captured in run {run} or before "
                                 f"(`mirror search {args.config} WORDS` finds pages)")
            text = manifest.page_text(cap.capture_id)
            if text is None:
                raise UsageError(
                    f"{url}: its capture of {cap.warc_date} has no text to compare (not an "
                    f"HTML page, or archived before the text index: `mirror index --search "
                    f"{args.config}`)")
            sides.append((cap, "\n".join(filter(None, (text.title, text.body)))))
    finally:
        manifest.close()
    (old, old_text), (new, new_text) = sides
    parts = word_diff(old_text, new_text)
    added, removed = diff_stats(parts)
    say(f"{url}\n  run {a}: {old.warc_date[:19]}Z (status {old.status})\n"
          f"  run {b}: {new.warc_date[:19]}Z (status {new.status})\n"
          f"  {added} words added, {removed} removed")
    if added or removed:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(diff_lines(parts, color=color))
    return ExitCode.OK


def cmd_explain(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.crawl.robotslookup import robots_rules
    from mirror.explain import explain
    from mirror.explainarchive import archive_lines

    cfg = load_config(args.config)
    rules, source = asyncio.run(robots_rules(cfg, args.url, offline=args.offline))
    say("\n".join(explain(cfg, args.url, args.depth, rules, source, _learned(cfg))
                  + archive_lines(cfg, args.url)))
    return ExitCode.OK


def _learned(cfg: SiteConfig) -> dict[str, Any] | None:
    """The learned trap patterns the archive's last run stopped (None: no manifest yet)."""
    from mirror.archive.manifest_patterns import stopped_patterns

    path = ArchiveLayout(cfg.site.output_dir).manifest
    if not path.exists():
        return None
    manifest = ManifestReader(path)
    try:
        last = manifest.last_run()
        return stopped_patterns(manifest.sql, last.id) if last else {}
    finally:
        manifest.close()


def _existing_warc_dir(cfg: SiteConfig, args: argparse.Namespace) -> Path:
    warc_dir = ArchiveLayout(cfg.site.output_dir).warc
    if not warc_dir.is_dir():
        raise UsageError(f"{warc_dir}: no WARC folder (has `mirror run {args.config}` run yet?)")
    return warc_dir


def cmd_verify(args: argparse.Namespace) -> int:
    from mirror.storecmds import reading
    from mirror.verify import check_archive, format_problems

    if args.db:
        return _verify_shared(args)
    source = reading(args)
    if source.in_store:  # its files streamed, its manifest the store's snapshot
        return _verify_store(source)
    cfg = load_config(args.config)
    manifest_path = ArchiveLayout(cfg.site.output_dir).manifest
    _existing_warc_dir(cfg, args)
    with ArchiveLock(cfg.site.output_dir):
        _finish_prune(cfg.site.output_dir)
        manifest = ManifestReader(manifest_path) if manifest_path.exists() else None
        try:
            verdict = check_archive(cfg.site.output_dir, manifest)
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
    from mirror.verify import check_archive, format_problems

    try:
        path = source.where.manifest()
        manifest = ManifestReader(path) if path is not None else None
        try:
            verdict = check_archive(source.where, manifest)
        finally:
            if manifest is not None:
                manifest.close()
    finally:
        source.close()
    if verdict.problems:
        say(format_problems(list(verdict.problems)))
    say(f"{source.label}: {verdict.summary()}")
    return ExitCode.DAMAGED if verdict.problems else ExitCode.OK


def cmd_prune(args: argparse.Namespace) -> int:
    from mirror.archive.prune import PruneError, prune_site
    from mirror.archive.retention import RULES, Retention

    cfg = load_config(args.config)
    given = {f"keep_{r}": getattr(args, f"keep_{r}") for r in RULES
             if getattr(args, f"keep_{r}") is not None}
    if any(n < 0 for n in given.values()):
        raise UsageError("--keep-* takes a number of runs >= 0")
    policy = Retention(**{**vars(Retention.of(cfg.retention)), **given})
    try:
        result = prune_site(cfg, dry_run=args.dry_run, retention=policy)
    except PruneError as exc:
        raise UsageError(str(exc)) from exc
    print("\n".join(result.lines()))
    if result.dropped and not args.dry_run:  # [archive] store: its copy follows the prune
        from mirror.storecmds import push_after_prune

        for line in push_after_prune(cfg):
            print(line)
    return ExitCode.OK


def _finish_prune(output_dir: Path) -> None:
    """Before `mirror verify` or `mirror index` reads the archive: finish (or undo) a prune
    a crash stopped, which the next `mirror run` would do too; told on stderr. A manifest
    that cannot be read is reported as damage (`verify` tells what is wrong with it)."""
    from mirror.archive.damage import Damage, report
    from mirror.archive.prune import PruneError, finish_interrupted_prune

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


def cmd_index(args: argparse.Namespace) -> int:
    from mirror.archive import index
    from mirror.archive.damage import tally

    cfg = load_config(args.config)
    layout = ArchiveLayout(cfg.site.output_dir)
    if note := shared_worker_note(layout.root):  # its WARC files are not the whole run's
        raise UsageError(note)
    warc_dir = _existing_warc_dir(cfg, args)
    if args.search:
        return _index_texts(layout, warc_dir)
    with ArchiveLock(cfg.site.output_dir), tally() as damaged:
        _finish_prune(cfg.site.output_dir)  # else the index would name files it drops
        n, files = index.rebuild_from_warcs(warc_dir, layout.index)
    left_out = f"; damaged places left out, above: {damaged.count}" if damaged.count else ""
    print(f"wrote {layout.index} ({n} lines from {files} WARC files{left_out})")
    return ExitCode.DAMAGED if damaged.count else ExitCode.OK


def _index_texts(layout: ArchiveLayout, warc_dir: Path) -> int:
    from mirror.archive.manifest import Manifest
    from mirror.archive.textindex import rebuild_texts

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


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.app.library import default_library
    from mirror.demo import SITE_FILE, DemoError, run_demo
    from mirror.run.runner import crawl_async

    folder = (args.dir or default_library()).expanduser().resolve()
    try:
        code = asyncio.run(run_demo(folder, lambda cfg: crawl_async(
            cfg, quiet=args.quiet, verbose=False, settle_gc=_OWN_PROCESS)))
    except DemoError as exc:
        raise UsageError(str(exc)) from exc
    print(f"archive: {folder / 'archive' / 'demo'}")
    print(f"browse it offline: mirror serve {folder / SITE_FILE}")
    print(f"see it in the library: mirror ui{f' {folder}' if args.dir else ''}")
    return code


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.replay.serve import Site, serve_forever
    from mirror.storecmds import reading

    source = reading(args)  # the site file's folder, or a store (--from-store, s3://...)
    if isinstance(source.where, Path) and not ArchiveLayout(source.where).warc.is_dir():
        raise UsageError(f"{source.where}: no archive (has `mirror run` run yet?)")
    site = Site(source.name, source.ignore_query, source.start_urls)
    host, lan = _serving(args, "the archive")
    try:
        return asyncio.run(serve_forever(source.where, site, host=host, port=args.port,
                                         lan=lan))
    except OSError as exc:  # the port is taken, the address is not ours
        where = host if args.port is None else f"{host}:{args.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    finally:
        source.close()


def cmd_export(args: argparse.Namespace) -> int:
    from mirror.archive.damage import tally
    from mirror.replay.captures import CaptureIndex
    from mirror.replay.destination import DestinationError
    from mirror.storecmds import reading

    _check_export_args(args)
    source = reading(args)  # the site file's folder, or a store (--from-store, s3://...)
    try:
        with tally() as damaged:
            archive = CaptureIndex.load(source.where, source.ignore_query)
            code = _export(args, source, archive)
    except DestinationError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        source.close()
    if damaged.count:  # written, without what could not be read
        print(f"mirror: damaged places left out, above: {damaged.count}", file=sys.stderr)
        return ExitCode.DAMAGED
    return code


def _export(args: argparse.Namespace, source: Any, archive: Any) -> int:
    from mirror.replay.export import ExportError, export_folder
    from mirror.replay.wacz import write_wacz

    if not archive.captures:
        raise UsageError(f"{source.label}: no captures to export")
    if args.to:
        try:
            done = export_folder(archive, args.to, args.at)
        except ExportError as exc:
            raise UsageError(str(exc)) from exc
        print(f"exported {done.files} files ({done.pages} pages, {done.redirects} redirects) "
              f"in {done.seconds:.1f}s: open {args.to / 'index.html'}")
    if args.wacz:
        packed = write_wacz(archive, args.wacz, title=source.name,
                            start_urls=source.start_urls, force=args.force)
        print(f"wrote {packed.path} ({packed.warc_files} WARC files, {packed.captures} "
              f"captures, {packed.pages} pages, {packed.bytes:,} bytes)")
    if args.zim:
        from mirror.replay.zim import ZimError, summary, write_zim

        try:
            written = write_zim(archive, args.zim, site_name=source.name,
                                start_urls=source.start_urls, at=args.at, title=args.title,
                                description=args.description, language=args.language,
                                publisher=args.publisher, force=args.force)
        except ZimError as exc:
            raise UsageError(str(exc)) from exc
        print(f"{summary(written)} in {written.seconds:.1f}s")
    return ExitCode.OK


def _store_command(name: str, args: argparse.Namespace) -> int:
    """`mirror push` and `mirror restore` (mirror.storecmds)."""
    from mirror import storecmds

    command: Callable[[argparse.Namespace], int] = getattr(storecmds, f"cmd_{name}")
    return command(args)


def _library_command(name: str, args: argparse.Namespace) -> int:
    """`mirror add`, `remove`, and `status` of the whole library (mirror.librarycmds)."""
    from mirror import librarycmds

    command: Callable[[argparse.Namespace], int] = getattr(librarycmds, f"cmd_{name}")
    return command(args)


def _check_export_args(args: argparse.Namespace) -> None:
    if not (args.to or args.wacz or args.zim):
        raise UsageError("export needs --to DIR, --wacz FILE or --zim FILE "
                         "(--at TIMESTAMP with --to or --zim)")
    if args.at and not (args.to or args.zim):
        raise UsageError("--at goes with --to DIR or --zim FILE (a WACZ holds every run)")
    if args.at and not (args.at.isdigit() and len(args.at) <= 14):
        raise UsageError(f"--at {args.at!r}: expected 1 to 14 digits (YYYYmmddHHMMSS)")
    given = [n for n in ("title", "description", "language", "publisher") if getattr(args, n)]
    if given and not args.zim:
        raise UsageError(f"--{given[0]} goes with --zim FILE")


def cmd_schedule(args: argparse.Namespace) -> int:
    from datetime import datetime

    from mirror.schedule import listing, timers

    env, remove = os.environ, args.action == "remove"
    db = _fleet_db(args.db, needed=args.action == "run-now")
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
    try:
        kind = timers.backend(args.timer, env) if not remove else timers.SYSTEMD
        changes = timers.converge([site for site, _ in sites], kind, have,
                                  lambda every: listing.next_text(every, datetime.now()))
    except timers.TimerError as exc:
        raise UsageError(str(exc)) from exc
    print("\n".join(changes.lines) or "no site files and no timers of mirror here")
    for problem in changes.problems:
        print(f"mirror: {problem}", file=sys.stderr)
    return ExitCode.USAGE if broken or changes.problems else ExitCode.OK


def _fleet_db(given: str | None, *, needed: bool) -> str | None:
    """The fleet's database (--db, else $MIRROR_DB), checked that the fleet extra is here;
    None when none is named (UsageError when `needed`)."""
    from mirror.fleet.db import ENV, FleetError, dsn_from, require_extra

    dsn = dsn_from(given)
    if dsn is None:
        if needed:
            raise UsageError(f"this needs the fleet's database: --db postgresql://... or "
                             f"${ENV}")
        return None
    try:
        require_extra()
    except FleetError as exc:
        raise UsageError(str(exc)) from exc
    return dsn


def _schedule_fleet(args: argparse.Namespace, db: str) -> int:
    """`mirror schedule ACTION --db DSN`: the sites registered in the fleet, not OS timers;
    the same site files and messages as for timers (fleet/commands.py)."""
    from mirror.fleet.commands import schedule
    from mirror.fleet.db import FleetError

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
    try:
        done = schedule(args.action, db, sites, in_scope, names=names)
    except FleetError as exc:
        raise UsageError(str(exc)) from exc
    if done.lines:
        print("\n".join(done.lines))
    for problem in done.problems:
        print(f"mirror: {problem}", file=sys.stderr)
    if broken or (done.problems and not done.code):
        return ExitCode.USAGE
    return done.code


def cmd_worker(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.fleet.db import FleetError
    from mirror.fleet.queue import Timing
    from mirror.fleet.worker import WorkerOptions, serve

    db = _fleet_db(args.db, needed=True)
    assert db is not None
    timing = Timing(stall_after=args.stall_after, tick=args.tick, poll=args.poll)
    try:
        timing.check()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if args.concurrency < 1:
        raise UsageError("--concurrency must be 1 or more")
    options = WorkerOptions(db, args.data.expanduser().resolve(), args.concurrency,
                            args.name or "", timing)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # mirror's own lines say what each run does
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
    try:
        return asyncio.run(serve(options, lambda text: print(text, flush=True)))
    except FleetError as exc:
        raise UsageError(str(exc)) from exc


def _schedule_sites(target: Path | None, *, remove: bool) -> tuple[
        list[tuple[Site, Path | None]], list[ConfigError], Callable[[Path], bool]]:
    """The site files `mirror schedule` acts on (a file, or a library's), each with its
    archive folder; the files that cannot be read; which timers belong to the target.
    With `remove` every file counts as unscheduled, readable or not."""
    from mirror.app.library import Library, default_library
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "ui": cmd_ui,
    "add": lambda args: _library_command("add", args),
    "remove": lambda args: _library_command("remove", args),
    "check": cmd_check,
    "run": cmd_run,
    "index": cmd_index,
    "search": searchcmd.cmd_search,
    "status": cmd_status,
    "verify": cmd_verify,
    "prune": cmd_prune,
    "explain": cmd_explain,
    "runs": cmd_runs,
    "diff": cmd_diff,
    "demo": cmd_demo,
    "serve": cmd_serve,
    "export": cmd_export,
    "schedule": cmd_schedule,
    "push": lambda args: _store_command("push", args),
    "restore": lambda args: _store_command("restore", args),
    "worker": cmd_worker,
}
