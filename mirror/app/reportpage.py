"""A run's report as the app shows it: the JSON report, or the manifest for a run under way."""

from __future__ import annotations

from typing import Any

from mirror.app.status import Reports
from mirror.config import SiteConfig
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.model import UNFINISHED, RunState
from mirror.replay.pages import run_timestamp
from mirror.run.health import health, numbers_of
from mirror.run.report import build_report
from mirror.run.runreport import gather

#: URLs listed per section before "and N more"
SHOWN = 500


def stamp(iso: str | None) -> str:
    """A run time as a replay timestamp; the newest capture when it has none."""
    return run_timestamp(iso) or "99991231235959"


def report_context(cfg: SiteConfig, run_id: int, reports: Reports) -> dict[str, Any] | None:
    """What report.html needs, or None when the archive has no such run."""
    layout = ArchiveLayout(cfg.site.output_dir)
    try:
        manifest = ManifestReader(layout.manifest)
    except ManifestError:
        return None
    try:
        runs = [r for r in manifest.runs.all() if r.state != RunState.ABANDONED or r.id == run_id]
        run = next((r for r in runs if r.id == run_id), None)
        if run is None:
            return None
        report = reports.load(layout.report(run_id))
        live = not report
        if live:  # no report yet (the run is going on, or died): the manifest says it all
            report = build_report(gather(cfg, manifest, run_id))
    finally:
        manifest.close()
    earlier = [r for r in runs if r.id < run_id]
    changes = report.get("changes", {})
    lists = {kind: changes.get(kind, []) for kind in ("new", "changed", "gone")} \
        if isinstance(changes, dict) else {}
    return {
        "run": run, "report": report, "live": live, "shown": SHOWN, "lists": lists,
        "failure": health(numbers_of(report, run.state not in UNFINISHED)).text(),
        "ts": stamp(run.finished_at or run.started_at),
        "before_ts": stamp(earlier[-1].finished_at) if earlier else "",
        # the run this one's changes are measured against (runreport.changes), for compare
        "before_run": earlier[-1].id if earlier else None,
    }
