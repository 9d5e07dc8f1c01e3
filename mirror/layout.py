"""The archive folder of a site: where each of its files lives (one place says it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ArchiveLayout:
    """<root>/manifest.sqlite3, warc/, index.cdxj, reports/<run>.json, mirror.log, .lock,
    progress.json (only while a `mirror run` holds the lock: its live numbers), worker.json
    (a worker's folder of a shared run: archive/workerfolder.py). Three more are named by
    the modules that own them: scheduled.json (the last scheduled start,
    schedule/lastrun.py), .schedule-wait/ (the lock a scheduled run waits on, run/wait.py),
    .store.json (the store the folder was pushed to or restored from, store/sync.py)."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.sqlite3"

    @property
    def warc(self) -> Path:
        return self.root / "warc"

    @property
    def index(self) -> Path:
        return self.root / "index.cdxj"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    def report(self, run_id: int) -> Path:
        return self.reports / f"{run_id}.json"

    @property
    def log(self) -> Path:
        return self.root / "mirror.log"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def progress(self) -> Path:
        return self.root / "progress.json"

    @property
    def worker_mark(self) -> Path:
        return self.root / "worker.json"
