"""Command line: subcommands, logging and the one place where errors become exit codes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from mirror import __version__, index
from mirror.config import ConfigError, SiteConfig, load_config
from mirror.crawler import Crawler, ExitCode, archive_paths
from mirror.lock import ArchiveLock, ArchiveLocked
from mirror.manifest import Manifest, ManifestError
from mirror.progress import ProgressDisplay
from mirror.report import RunStatus, render_status, render_summary, summary_line

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

    def cmd(name: str, help_: str, config: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        if config:
            sp.add_argument("config", help="the site's TOML file")
        return sp

    cmd("check", "validate a site file and print the effective settings")
    run = cmd("run", "crawl the site (resumes an unfinished run)")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="print only problems and the summary line (for cron)")
    run.add_argument("-v", "--verbose", action="store_true", help="log every fetch")
    cmd("index", "rebuild index.cdxj from the WARC files alone")
    cmd("status", "show the runs, URL counts, WARC files and last error (also during a run)")
    demo = cmd("demo", "serve the bundled demo site on 127.0.0.1 and mirror it", config=False)
    demo.add_argument("dir", nargs="?", default="mirror-demo",
                      help="folder for the demo's site file and archive (default: ./mirror-demo)")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = COMMANDS[args.command]
    try:
        return handler(args)
    except ConfigError as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except (UsageError, ManifestError) as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except ArchiveLocked as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return ExitCode.LOCKED
    except KeyboardInterrupt:
        print("mirror: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place internal errors become exit 1
        if args.traceback:
            traceback.print_exc()
        else:
            print(f"mirror: internal error: {type(exc).__name__}: {exc} "
                  "(run with --traceback for details)", file=sys.stderr)
        return ExitCode.INTERNAL


def main_entry() -> None:
    sys.exit(main())


# -- commands ------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    print(f"{cfg.path}: OK")
    for section, values in cfg.effective().items():
        print(f"[{section}]")
        for key, value in values.items():
            print(f"  {key} = {value!r}")
    print(f"archive: {cfg.site.output_dir}")
    return ExitCode.OK


def cmd_run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    return crawl(cfg, quiet=args.quiet, verbose=args.verbose)


def cmd_status(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    manifest_path, warc_dir, _ = archive_paths(cfg)
    manifest = Manifest(manifest_path, readonly=True)
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
    print(text)
    return ExitCode.OK


def cmd_index(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    _, warc_dir, index_path = archive_paths(cfg)
    if not warc_dir.is_dir():
        raise UsageError(f"{warc_dir}: no WARC folder (has `mirror run {args.config}` run yet?)")
    with ArchiveLock(cfg.site.output_dir):
        n = index.rebuild_from_warcs(warc_dir, index_path)
    print(f"wrote {index_path} ({n} lines from {len(index.warc_files(warc_dir))} WARC files)")
    return ExitCode.OK


def cmd_demo(args: argparse.Namespace) -> int:
    from mirror.sitesrv import start_site_server

    folder = Path(args.dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)

    async def demo() -> int:
        with resources.as_file(resources.files("mirror") / "demo_site") as root:
            runner, base = await start_site_server(Path(root))
            try:
                print(f"demo site served at {base}")
                site = folder / "site.toml"
                site.write_text(
                    "# written by `mirror demo`; the port changes on every demo run\n"
                    f'[site]\nname = "demo"\nstart_urls = ["{base}"]\noutput_dir = "archive"\n'
                    "\n[crawl]\nworkers = 4\n",
                    encoding="utf-8",
                )
                cfg = load_config(site)
                return await crawl_async(cfg, quiet=args.quiet, verbose=False)
            finally:
                await runner.cleanup()

    code = asyncio.run(demo())
    print(f"archive: {folder / 'archive'}")
    return code


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": cmd_check,
    "run": cmd_run,
    "index": cmd_index,
    "status": cmd_status,
    "demo": cmd_demo,
}


# -- running a crawl -----------------------------------------------------------------------
def crawl(cfg: SiteConfig, *, quiet: bool, verbose: bool) -> int:
    return asyncio.run(crawl_async(cfg, quiet=quiet, verbose=verbose))


async def crawl_async(cfg: SiteConfig, *, quiet: bool, verbose: bool) -> int:
    live = sys.stdout.isatty() and not quiet
    display = ProgressDisplay(cfg.site.name) if live else None
    with ArchiveLock(cfg.site.output_dir), \
            _logging(cfg.site.output_dir / "mirror.log", verbose=verbose, display=display):
        crawler = Crawler(cfg, on_progress=display.update if display else None)
        try:
            with _signals(crawler), (display or _nothing()):
                result = await crawler.run()
            data, report_path = crawler.write_report(result)
        finally:
            crawler.close()
    if quiet:
        print(summary_line(data))
    else:
        print(render_summary(data))
        print(f"  report         {report_path}")
    if result.error:
        print(f"mirror: {result.error}; `mirror run` again resumes the run", file=sys.stderr)
    return result.exit_code


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _signals(crawler: Crawler) -> Iterator[None]:
    """First SIGINT/SIGTERM: stop handing out URLs and let in-flight fetches finish.
    A second one abandons them (records are never left half-written)."""
    loop = asyncio.get_running_loop()
    hits = 0

    def on_signal(signum: int) -> None:
        nonlocal hits
        hits += 1
        if hits == 1:
            log.warning("%s: finishing in-flight fetches (at most %gs); send it again to "
                        "abort them", signal.Signals(signum).name, crawler.cfg.crawl.stop_grace)
        crawler.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@contextmanager
def _logging(
    log_file: Path, *, verbose: bool, display: ProgressDisplay | None
) -> Iterator[None]:
    """Everything at INFO to the archive's mirror.log; warnings (or all with -v) to stderr."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    file_handler.setLevel(logging.INFO)
    console = display.log_handler() if display else logging.StreamHandler(sys.stderr)
    if not display:
        console.setFormatter(logging.Formatter("mirror: %(levelname)s: %(message)s"))
    console.setLevel(logging.INFO if verbose else logging.WARNING)
    old_level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.addHandler(console)
    try:
        yield
    finally:
        root.removeHandler(file_handler)
        root.removeHandler(console)
        root.setLevel(old_level)
        file_handler.close()
