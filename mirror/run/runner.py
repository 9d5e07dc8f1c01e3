"""The runner: one crawl of a site under its archive's lock, with signals answered, live
progress (progress.json and the terminal's display), logging to mirror.log, and the run's
report and summary at its end."""

from __future__ import annotations

# asyncio, rich (run.progress) and aiohttp (the crawler) are imported inside the functions
# that use them: a process that does not crawl loads none of them.
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.archive.lock import ArchiveLock
from mirror.config import ConfigError, SiteConfig
from mirror.layout import ArchiveLayout
from mirror.model import ExitCode, RunState
from mirror.run.logfile import RunLogFile
from mirror.run.report import nofollow_warning, render_summary, summary_line
from mirror.terminal import printable_lines, say

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from mirror.crawl.crawler import Crawler, RunResult
    from mirror.crawl.sharedrun import SharedRun
    from mirror.run.progress import ProgressDisplay

log = logging.getLogger("mirror")


def crawl(cfg: SiteConfig, *, quiet: bool, verbose: bool, new_run: bool = False,
          lock: ArchiveLock | None = None, shared: SharedRun | None = None,
          settle_gc: bool = False) -> int:
    import asyncio

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(crawl_async(cfg, quiet=quiet, verbose=verbose, new_run=new_run,
                                      lock=lock, shared=shared, settle_gc=settle_gc))


def loop_factory() -> Callable[[], AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (the `fast` extra) and MIRROR_UVLOOP is
    not 0, else None (asyncio's own)."""
    if os.environ.get("MIRROR_UVLOOP", "1") == "0":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], AbstractEventLoop] = uvloop.new_event_loop  # untyped without it
    return factory


async def crawl_async(cfg: SiteConfig, *, quiet: bool, verbose: bool,
                      new_run: bool = False, lock: ArchiveLock | None = None,
                      shared: SharedRun | None = None, settle_gc: bool = False) -> int:
    """Crawl under the archive's lock: `lock` when the caller holds it already (a scheduled
    run that waited for it), else taken here (ArchiveLocked when another process has it).
    `settle_gc`: this process is the `mirror` command's own, not a test calling it (procgc)."""
    from mirror.crawl.crawler import Crawler  # here: it loads aiohttp, which `check` needs not
    from mirror.crawl.localrun import LocalRun
    from mirror.crawl.stopsignals import RunSignals
    from mirror.outputdir import output_dir_problem
    from mirror.run.runreport import write_missing_report, write_report

    if problem := output_dir_problem(cfg.site.output_dir):  # it may have changed since load
        raise ConfigError(cfg.path, "site.output_dir", f"[site] output_dir: {problem}")
    if settle_gc:
        from mirror.crawl import procgc
        procgc.settle()  # the imports a crawl runs on are done
    terminal = sys.stdout.isatty()
    display = None
    if terminal and not quiet:
        from mirror.run.progress import ProgressDisplay  # rich: only for a display

        display = ProgressDisplay(cfg.site.name, str(cfg.path))
    layout = ArchiveLayout(cfg.site.output_dir)
    held = nullcontext() if lock is not None else ArchiveLock(layout.root)
    # signals are answered from here on, in every phase: start-up, crawl, index, report
    with held, logging_to(layout.log, verbose=verbose, display=display), RunSignals() as sigs:
        try:
            crawler = Crawler(cfg, shared if shared is not None else LocalRun(new_run=new_run))
            sigs.attach(crawler)
            try:
                if shared is None:
                    write_missing_report(cfg, crawler.manifest)
                with display or nullcontext():
                    async with _ticker(crawler, layout.progress, display):
                        result = await crawler.run()
                if result.run_id == 0:  # --join, and no unfinished run
                    return _joined_nothing(result)
                data, report_path = write_report(cfg, crawler.manifest, result.run_id,
                                                 result.browser_loads)
                if result.uploads is not None:  # [archive] store: what the run uploaded
                    from mirror.storecmds import add_to_report

                    add_to_report(report_path, result.uploads)
            except Exception as exc:
                _raise_if_disk_full(exc, layout.root, crawler.fatal)
                raise
            finally:
                crawler.close()
        finally:  # ours, or left by a run killed -9: no run works once the lock is released
            layout.progress.unlink(missing_ok=True)
    if quiet:
        say(summary_line(data))
        if warning := nofollow_warning(data.meta_robots):  # a one-page archive, explained
            say(f"  NOTE: {warning}")
    elif terminal:
        from mirror.run.progress import print_summary

        print_summary(data, report_path)
    else:
        say(render_summary(data))
        say(f"  report         {report_path}")
    if result.uploads is not None:  # [archive] store: said after the summary
        print("\n".join(result.uploads.lines()),
              file=sys.stdout if result.uploads.complete else sys.stderr)
        if not result.uploads.complete:
            say(result.uploads.pending_line(cfg.path), file=sys.stderr)
    if result.files is not None and result.files.lines():  # a shared run's uploads
        print("\n".join(result.files.lines()),
              file=sys.stdout if result.files.complete else sys.stderr)
        if not result.files.complete:
            say(result.files.pending_line(cfg.path), file=sys.stderr)
    if shared is not None and not result.error:
        print(f"worker {shared.owner}: " + _worker_end(shared.completed, result.state))
    if result.exit_code == ExitCode.DISK_FULL:  # it says how to resume
        say(f"mirror: {result.error}", file=sys.stderr)
    elif result.error:
        say(f"mirror: {result.error}; `mirror run` again resumes the run", file=sys.stderr)
    return result.exit_code


def _raise_if_disk_full(exc: Exception, root: Path, fatal: str | None) -> None:
    """A full disk met after the crawl (index, report, the manifest's last commit) or
    while it stopped for one: DiskFull (exit 6), saying the first full-disk error."""
    from mirror.archive.diskspace import DISK_FULL_SAYS, DiskFull, is_disk_full, where_full

    if isinstance(exc, DiskFull) or not is_disk_full(exc):
        return
    said = fatal if fatal is not None and fatal.startswith(DISK_FULL_SAYS) else None
    raise DiskFull(where_full(exc, root), said) from exc


def _worker_end(completed: bool, state: str) -> str:
    """What a worker of a shared run says when it stops."""
    if not completed:
        return "done; the other workers finish the run"
    if state == RunState.LIMIT:
        return "the run stopped at [scope] max_pages (its other pages wait for the next run)"
    return "the run is complete"


def _joined_nothing(result: RunResult) -> int:
    print("mirror: no unfinished run to join (--join); nothing fetched")
    if result.files is not None and result.files.lines():
        print("\n".join(result.files.lines()))
    return ExitCode.OK


#: seconds between two looks at the run's numbers (progress.json and the display)
TICK = 0.5


@asynccontextmanager
async def _ticker(crawler: Crawler, path: Path,
                  display: ProgressDisplay | None) -> AsyncIterator[None]:
    """While the run works, every TICK seconds (the first at once): its numbers to
    progress.json, which the app reads (cron and terminal runs alike), and to the display."""
    import asyncio

    task = asyncio.create_task(_tick(crawler, path, display), name="progress")
    try:
        yield
    finally:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this task is being cancelled too, not only the ticker


async def _tick(crawler: Crawler, path: Path, display: ProgressDisplay | None) -> None:
    import asyncio

    from mirror.crawl.growth import GrowthWindow
    from mirror.run.progressfile import LiveProgress, RateWindow, write_progress

    pid, started, window, warned = os.getpid(), time.time(), RateWindow(), False
    growth = GrowthWindow()
    while True:
        p = crawler.progress()
        if p is not None:
            now = time.monotonic()
            live = LiveProgress.of(p, pid=pid, started=started, updated=time.time(),
                                   rate=window.add(now, p.done),
                                   growth=growth.add(now, p.queued),
                                   top=crawler.new_urls.dominant())
            if display is not None:
                display.update(live)
            try:
                write_progress(path, live)
            except OSError as exc:  # the crawl goes on without it (a full disk stops it)
                if not warned:
                    log.warning("cannot write %s: %s", path, exc)
                warned = True
        await asyncio.sleep(TICK)


class PrintableFormatter(logging.Formatter):
    """Log lines with printable_lines applied: a logged URL or reason commands nothing."""

    def format(self, record: logging.LogRecord) -> str:
        return printable_lines(super().format(record))


@contextmanager
def logging_to(
    log_file: Path, *, verbose: bool, display: ProgressDisplay | None
) -> Iterator[None]:
    """Everything at INFO to the archive's mirror.log; warnings (or all with -v) to stderr."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    file_handler = RunLogFile(log_file)  # a full disk: told once, in one line
    file_handler.setFormatter(PrintableFormatter("%(asctime)s %(levelname)s %(name)s: "
                                                 "%(message)s"))
    file_handler.setLevel(logging.INFO)
    console = display.log_handler() if display else logging.StreamHandler(sys.stderr)
    console.setFormatter(PrintableFormatter("%(message)s" if display
                                            else "mirror: %(levelname)s: %(message)s"))
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
