"""A run's report: its numbers gathered from the manifest, written to reports/<run>.json."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from mirror.archive.fsutil import atomic_write_text
from mirror.config import SiteConfig
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestReader
from mirror.model import PARSE_BUDGET, UNFINISHED, UNREACHABLE, ExitCode, Run, RunState
from mirror.run.browsernotes import BrowserFacts, split_notes
from mirror.run.changes import Changes, compare_walks
from mirror.run.health import Health, health, numbers_of, start_problem
from mirror.run.report import RunData, build_report


def report_path(cfg: SiteConfig, run_id: int) -> Path:
    return ArchiveLayout(cfg.site.output_dir).report(run_id)


#: URLs of each kind of change a report lists (all are counted): a million-page site's first
#: run made an 82 MB report of its new URLs, which the app read for its home screen
REPORT_URLS = 1000


def changes(manifest: ManifestReader, run_id: int) -> Changes:
    """This run against the run before it (everything is new in the first run)."""
    runs = manifest.runs.all()
    earlier = [r.id for r in runs if r.id < run_id and r.state != RunState.ABANDONED]
    this = next(r for r in runs if r.id == run_id)
    return changes_between(manifest, earlier[-1] if earlier else None, this, REPORT_URLS)


def changes_between(manifest: ManifestReader, before: int | None, run: Run,
                    keep: int | None = None) -> Changes:
    """`run` against the run `before` (None: nothing before it). Only a complete run says a
    URL it has not captured is gone; one interrupted or stopped at a limit has not reached
    it yet (pending), nor the URLs still in its frontier (pending too), and a URL that
    failed in `run` is a failure, not gone."""
    complete = run.state == RunState.COMPLETE
    return compare_walks(manifest.runs.walk(before) if before is not None else (),
                         manifest.runs.walk(run.id), complete=complete,
                         failed={url for url, _ in manifest.counts.failed(run.id)},
                         queued=() if complete else manifest.urls.queued(run.id), keep=keep)


def browser_facts(cfg: SiteConfig, manifest: ManifestReader, run_id: int,
                  failed: list[tuple[str, str]], loads: int | None) -> BrowserFacts:
    """[browser] as the run used it: the mode, whether a browser is found for it (and if
    not, how to install one on this system), the pages rendered, the renders failed."""
    from mirror.browser.find import find_browser
    from mirror.browserconfig import enable_advice, this_system
    from mirror.errors import MirrorError

    mode = cfg.browser.mode
    try:
        found = mode != "off" and find_browser(cfg.browser.executable) is not None
    except MirrorError:  # the configured one is gone since the site file was read
        found = False
    install = enable_advice(*this_system()) if mode != "off" and not found else ""
    return BrowserFacts(mode, found, manifest.renders.count(run_id), loads, failed, install)


def gather(cfg: SiteConfig, manifest: ManifestReader, run_id: int,
           browser_loads: int | None = None) -> RunData:
    """Everything the report says, from the manifest alone (so that a later process can
    write the report of a run whose process died writing it); `browser_loads`: the page
    loads of the run's process, which only it knows."""
    from mirror.archive import index  # warcio: not for `mirror runs`, which takes changes

    m, run = manifest, run_id
    stats = m.counts.capture_stats(run)
    info = next(r for r in m.runs.all() if r.id == run)
    seconds, sessions = m.runs.time(run)
    if not sessions:  # a run recorded before sessions were: its start and end
        seconds = _seconds_between(info.started_at, info.finished_at)
    notes = m.counts.needs_browser(run)  # a page's one note: why it needs a browser, or its budget
    needing, failed = split_notes([n for n in notes if not n[1].startswith(PARSE_BUDGET)],
                                  m.renders.urls(run))
    return RunData(
        site=cfg.site.name,
        run_id=run,
        state=info.state,
        exit_code=info.exit_code if info.exit_code is not None else ExitCode.INTERRUPTED,
        resumed=sessions > 1,
        started_at=info.started_at,
        finished_at=info.finished_at or "",
        duration=seconds,
        captures=m.counts.captures(run),
        url_states=m.counts.url_states(run),
        status_classes=stats["status"],  # type: ignore[arg-type]
        content_types=stats["mime"],  # type: ignore[arg-type]
        payload_bytes=stats["payload_bytes"],  # type: ignore[arg-type]
        warc_bytes=stats["warc_bytes"],  # type: ignore[arg-type]
        skipped=m.counts.skip_counts(run),
        top_errors=m.counts.error_counts(run),
        failed=m.counts.failed(run),
        broken_links=m.counts.broken_links(run),
        broken_links_total=m.counts.broken_links_total(run),
        sitemap_only_pages=m.counts.sitemap_only_pages(run),
        unreachable_hosts=m.counts.unreachable_hosts(run, f"{UNREACHABLE}: "),
        needs_browser=needing,
        browser=browser_facts(cfg, m, run, failed, browser_loads),
        parse_budget=[n for n in notes if n[1].startswith(PARSE_BUDGET)],
        changes=changes(m, run),
        skipped_urls=m.urls.skipped(run),
        pages_stored=m.counts.pages_stored(run),
        start_urls=[(u, start_problem(s, st, r)) for u, s, st, r in m.urls.starts(run)],
        meta_robots=replace(m.robots.counts(run), enabled=cfg.scope.meta_robots),
        learned_patterns=m.patterns.learned_report(run),
        warc_files=[p.name for p in index.warc_files(ArchiveLayout(cfg.site.output_dir).warc)],
        archive=str(cfg.site.output_dir),
    )


def health_of(cfg: SiteConfig, run: Run) -> Health:
    """The verdict (run.health) of a run's written report; none without a report."""
    try:
        data = json.loads(report_path(cfg, run.id).read_bytes())
    except (OSError, ValueError):
        return Health()
    return health(numbers_of(data, run.state not in UNFINISHED)) if isinstance(data, dict) \
        else Health()


def write_report(cfg: SiteConfig, manifest: ManifestReader, run_id: int,
                 browser_loads: int | None = None) -> tuple[RunData, Path]:
    data = gather(cfg, manifest, run_id, browser_loads)
    path = report_path(cfg, run_id)
    atomic_write_text(path, json.dumps(build_report(data), indent=2) + "\n")
    return data, path


def write_missing_report(cfg: SiteConfig, manifest: ManifestReader) -> None:
    """The last run finished, but its process died writing its report: write it now."""
    last = manifest.runs.last()
    if last is not None and last.state not in UNFINISHED \
            and not report_path(cfg, last.id).exists():
        write_report(cfg, manifest, last.id)


def _seconds_between(start: str, end: str | None) -> float:
    """Seconds from one run time (YYYY-mm-ddTHH:MM:SSZ) to another (0 when one is missing)."""
    if not end:
        return 0.0
    start_at, end_at = (datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ") for t in (start, end))
    return max((end_at - start_at).total_seconds(), 0.0)
