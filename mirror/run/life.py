"""The life of a run, as `mirror run` lives it and as the app or the fleet may call it: wait
for its turn (a scheduled run), crawl under the lock (run.runner), apply [retention] and
follow with the store, then the [hooks] its exit code calls for."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.archive.lock import ArchiveLocked
from mirror.config import SiteConfig
from mirror.errors import exit_code_of
from mirror.layout import ArchiveLayout
from mirror.model import SNAPSHOT_CODES, ExitCode
from mirror.run.runner import crawl, logging_to

if TYPE_CHECKING:
    from mirror.crawl.sharedrun import SharedRun

log = logging.getLogger("mirror")


@dataclass(frozen=True)
class RunOptions:
    """How to run: `mirror run`'s options (run.runner.crawl_async says what each does)."""

    quiet: bool = False
    verbose: bool = False
    new_run: bool = False
    #: as a timer starts it: wait for a run still going, [retention] after a snapshot
    scheduled: bool = False
    #: a worker of a run shared through PostgreSQL (`--db`), None: a run of this folder
    shared: SharedRun | None = None
    #: this process is the `mirror` command's own (crawl.procgc), not a test calling it
    settle_gc: bool = False


def run_site(cfg: SiteConfig, options: RunOptions) -> int:
    """Run the site once, its hooks after; its exit code (model.ExitCode). Raises what the
    command line maps to an exit code: ArchiveLocked, ConfigError, ManifestError..."""
    run = functools.partial(crawl, cfg, quiet=options.quiet, verbose=options.verbose,
                            new_run=options.new_run, shared=options.shared,
                            settle_gc=options.settle_gc)
    if not options.scheduled:
        return then_hooks(cfg, run)
    return _scheduled(cfg, run)


def _scheduled(cfg: SiteConfig, run: Callable[..., int]) -> int:
    """A run as its timer starts it: its turn, [retention] after a snapshot, and the start
    and end noted for `mirror schedule list` (schedule.lastrun)."""
    from mirror.run.wait import AlreadyWaiting, scheduled_turn
    from mirror.schedule import lastrun
    from mirror.schedule.listing import last_run

    layout = ArchiveLayout(cfg.site.output_dir)

    def turn() -> int:
        with scheduled_turn(layout.root, say_in_log(layout.log)) as lock:
            code = run(lock=lock)
        if code in SNAPSHOT_CODES and cfg.retention.enabled:  # prune takes the lock itself
            retention(cfg)
        return code

    before, start = last_run(layout.root), lastrun.begin(layout.root)
    code: int = ExitCode.INTERNAL
    skipped: str | None = None
    try:
        code = then_hooks(cfg, turn)
        return code
    except AlreadyWaiting as exc:
        say_in_log(layout.log)(str(exc))
        code, skipped = ExitCode.LOCKED, str(exc)
        return code
    finally:
        after = None if skipped else last_run(layout.root)
        lastrun.end(layout.root, start, code, lastrun.run_of(before, after, start), skipped)


def then_hooks(cfg: SiteConfig, run: Callable[[], int]) -> int:
    """Run, then the [hooks] hook its exit code calls for; a hook never changes it. No
    hook when no run took place (another process holds the archive)."""
    from mirror.run.wait import AlreadyWaiting

    try:
        code = run()
    except (ArchiveLocked, AlreadyWaiting):
        raise
    except Exception as exc:
        hooks(cfg, exit_code_of(exc))  # the code the command line then ends with
        raise
    hooks(cfg, code)
    return code


def hooks(cfg: SiteConfig, code: int) -> None:
    if not (cfg.hooks.after.strip() or cfg.hooks.on_failure.strip()):
        return
    from mirror.run.hooks import Outcome, run_hooks
    from mirror.schedule.listing import last_run

    layout = ArchiveLayout(cfg.site.output_dir)
    last = last_run(layout.root)  # the run this one worked on (or, failing early, the one before)
    report = layout.report(last.id) if last else None
    outcome = Outcome.of(cfg.site.name, cfg.path, layout.root, last.id if last else None, code,
                         report if report and report.exists() else None)
    with logging_to(layout.log, verbose=False, display=None):
        run_hooks(cfg.hooks, outcome, layout.log)


def retention(cfg: SiteConfig) -> None:
    """[retention] after a scheduled run that made a snapshot: prune the runs no keep_*
    rule keeps. Logged; never changes the run's exit code."""
    layout = ArchiveLayout(cfg.site.output_dir)
    with logging_to(layout.log, verbose=False, display=None):
        try:
            from mirror.upkeep.prune import prune_site
        except ImportError as exc:
            log.warning("retention: cannot prune here (%s); every run is kept", exc)
            return
        try:
            pruned = prune_site(cfg, dry_run=False)
        except ArchiveLocked as exc:
            log.warning("retention: not pruned now (%s); the next scheduled run prunes", exc)
            return
        except Exception as exc:  # noqa: BLE001 - the run is done; its exit code stays
            log.error("retention: prune failed: %s: %s", type(exc).__name__, exc)
            return
        log.info("retention: dropped runs %s, freed %s bytes",
                 ", ".join(map(str, pruned.dropped_runs)) or "none", f"{pruned.freed_bytes:,}")
        if pruned.dropped:  # [archive] store: its copy follows the prune
            from mirror.store.sync import push_after_prune

            for line in push_after_prune(cfg.site.output_dir, cfg.archive.store, cfg.path):
                log.info("retention: %s", line)


def say_in_log(log_file: Path) -> Callable[[str], None]:
    """Say it on stderr and in the archive's mirror.log (before the run opens the log)."""
    def say(text: str) -> None:
        with logging_to(log_file, verbose=False, display=None):
            log.warning("%s", text)
    return say
