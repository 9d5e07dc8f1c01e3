"""`mirror status` (also during a run), `mirror runs` and `mirror diff`: an archive's runs,
what changed in each, and between two."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.cli.command import LIBRARY_DEFAULT, Command
from mirror.errors import UsageError
from mirror.model import ExitCode
from mirror.terminal import say

if TYPE_CHECKING:
    from mirror.config import SiteConfig
    from mirror.manifest.reader import ManifestReader, Run


def status_arguments(status: argparse.ArgumentParser) -> None:
    status.add_argument("config", nargs="?", help="the site's TOML file, or a library folder "
                                                  f"(default: the library, {LIBRARY_DEFAULT})")


def cmd_status(args: argparse.Namespace) -> int:
    if args.config is None or Path(args.config).is_dir():
        from mirror.cli.library import cmd_status as library_status

        return library_status(args)
    from mirror.archive.lock import ArchiveLock
    from mirror.config import load_config
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader
    from mirror.run.report import RunStatus, render_status

    cfg = load_config(args.config)
    layout = ArchiveLayout(cfg.site.output_dir)
    manifest_path, warc_dir = layout.manifest, layout.warc
    manifest = ManifestReader(manifest_path)
    try:
        runs, totals = manifest.runs.all(), manifest.runs.totals()
        statuses = [
            RunStatus(r.id, r.state, r.started_at, r.finished_at, r.exit_code,
                      *totals.get(r.id, (0, 0)))
            for r in runs
        ]
        last = runs[-1].id if runs else 0
        text = render_status(
            str(cfg.site.output_dir), statuses, manifest.counts.url_states(last),
            [(p.name, p.stat().st_size) for p in sorted(warc_dir.glob("*.warc.gz*"))],
            manifest.counts.last_error(last), ArchiveLock.holder(cfg.site.output_dir),
        )
    finally:
        manifest.close()
    say(text)
    return ExitCode.OK


@contextmanager
def _history(args: argparse.Namespace) -> Iterator[tuple[SiteConfig, list[Run], ManifestReader]]:
    """The site, the runs of its archive (not the abandoned ones), and its manifest."""
    from mirror.config import load_config
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader
    from mirror.model import RunState

    cfg = load_config(args.config)
    manifest = ManifestReader(ArchiveLayout(cfg.site.output_dir).manifest)
    try:
        yield cfg, [r for r in manifest.runs.all() if r.state != RunState.ABANDONED], manifest
    finally:
        manifest.close()


def cmd_runs(args: argparse.Namespace) -> int:
    from mirror.run.report import counts_text
    from mirror.run.runreport import changes_between, health_of

    with _history(args) as (cfg, runs, manifest):
        if not runs:
            print("no runs yet")
        totals, before = manifest.runs.totals(), None
        for r in runs:
            counts = {**changes_between(manifest, before, r).counts(),
                      "failed": len(manifest.counts.failed(r.id))}
            before = r.id
            failed = health_of(cfg, r).text()
            say(f"run {r.id:<4} {r.state:<11} {r.started_at} -> {r.finished_at or '...':<20} "
                  f"{totals.get(r.id, (0, 0))[0]:>6} captures  " + counts_text(counts)
                  + (f"  FAILED: {failed}" if failed else ""))
    return ExitCode.OK


def diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("runs", nargs="*", type=int, metavar="RUN", help="run ids (0, 1 or 2)")
    diff.add_argument("--page", metavar="URL",
                      help="show how this page's text changed between the two runs, word by "
                           "word")


def cmd_diff(args: argparse.Namespace) -> int:
    from mirror.run.report import render_changes
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
    from mirror.config import load_config
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader
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
        history = manifest.texts.page_history(url)
        sides = []
        for run in (a, b):
            cap = next((c for c in reversed(history) if c.run_id <= run), None)
            if cap is None:
                raise UsageError(f"{url}: not captured in run {run} or before "
                                 f"(`mirror search {args.config} WORDS` finds pages)")
            text = manifest.texts.page_text(cap.capture_id)
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



COMMANDS = (
    Command("status", "show the runs, URL counts, WARC files and last error (also during "
                      "a run); without a site file, every site of the library", cmd_status,
            status_arguments, config=None),
    Command("runs", "list the runs with what changed in each", cmd_runs),
    Command("diff", "what changed between two runs (default: the last two)", cmd_diff,
            diff_arguments),
)
