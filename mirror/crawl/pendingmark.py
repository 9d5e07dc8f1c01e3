"""A run's "uploads pending" in its manifest: the run records the crawl's exit code (0, 3
or 4) before its last push; when that push leaves files out of the store the run's code
becomes UPLOAD_PENDING (5), so `mirror status`, `mirror list` and the app say "uploads
pending" rather than "complete"; the push that finishes the uploads (`mirror push`) gives
the run its crawl's code back, which the crawl's state and its failed URLs tell."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mirror.archive.fsutil import atomic_write_text
from mirror.manifest.writer import Manifest
from mirror.model import ExitCode, RunState, UrlState

log = logging.getLogger(__name__)

#: the crawl's codes a run's pending uploads stand in for
CRAWL_CODES = frozenset({ExitCode.OK, ExitCode.FAILED_URLS, ExitCode.LIMIT})


def crawl_code(state: str, failed_urls: int) -> ExitCode:
    """The code a finished run's crawl ended with (Crawler._outcome), from what it left."""
    if state == RunState.LIMIT:
        return ExitCode.LIMIT
    return ExitCode.FAILED_URLS if failed_urls else ExitCode.OK


def mark_pending(manifest: Manifest, run_id: int) -> bool:
    """Run `run_id` ended with uploads pending: its code becomes UPLOAD_PENDING when it
    was finished with a crawl's code (whether it was)."""
    run = next((r for r in manifest.runs.all() if r.id == run_id), None)
    if run is None or run.finished_at is None or run.exit_code not in CRAWL_CODES:
        return False
    manifest.runs.set_exit_code(run_id, ExitCode.UPLOAD_PENDING)
    return True


def clear_pending(manifest: Manifest) -> int | None:
    """The last run's uploads are (about to be) done: its crawl's code back; the run's id,
    or None when its code was not UPLOAD_PENDING."""
    run = manifest.runs.last()
    if run is None or run.exit_code != ExitCode.UPLOAD_PENDING:
        return None
    failed = manifest.counts.url_states(run.id).get(UrlState.FAILED, 0)
    manifest.runs.set_exit_code(run.id, crawl_code(run.state, failed))
    return run.id


def report_code(path: Path, code: int) -> None:
    """reports/<run>.json says the run's code `code` (the app's report page reads it)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if data.get("exit_code") != code:
        data["exit_code"] = code
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def before_push(manifest_path: Path) -> tuple[int, int] | None:
    """`mirror push` of a local archive, before its snapshot: the last run's crawl code
    back if it was UPLOAD_PENDING (so the store's snapshot says it); (run id, that code)."""
    manifest = Manifest(manifest_path)
    try:
        run_id = clear_pending(manifest)
        last = manifest.runs.last()
    finally:
        manifest.close()
    if run_id is None or last is None or last.exit_code is None:
        return None
    return run_id, last.exit_code


def after_push(manifest_path: Path, report: Path, cleared: tuple[int, int] | None,
               complete: bool) -> None:
    """After the push: the run's code UPLOAD_PENDING again when it did not finish the
    uploads; else its report says the crawl's code too."""
    if cleared is None:
        return
    run_id, code = cleared
    if complete:
        report_code(report, code)
        log.info("run %d: uploads done, exit code %d", run_id, code)
        return
    manifest = Manifest(manifest_path)
    try:
        mark_pending(manifest, run_id)
    finally:
        manifest.close()
