"""The jobs the app runs in a thread: export (any format of mirror.replay.exporters) and verify,
as the CLI does them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mirror.archive.lock import ArchiveLock, ArchiveLocked
from mirror.config import SiteConfig
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestReader
from mirror.replay.exporters import Exporter, Settings

Progress = Callable[[int, int], None]


def export_work(cfg: SiteConfig, exporter: Exporter, to: Path,
                values: dict[str, Any]) -> Callable[[Progress], str]:
    def work(progress: Progress) -> str:
        from mirror.replay.captures import CaptureIndex

        archive = CaptureIndex.load(cfg.site.output_dir, cfg.scope.ignore_query)
        if not archive.captures:
            raise ValueError(f"{cfg.site.output_dir}: no captures to export")
        settings = Settings(cfg.site.name, cfg.site.start_urls, values)
        return exporter.write(archive, to, settings, progress).summary()
    return work


def verify_work(cfg: SiteConfig) -> Callable[[Progress], str]:
    def work(progress: Progress) -> str:
        from mirror.verify import check_archive, format_problems

        layout = ArchiveLayout(cfg.site.output_dir)
        if not layout.warc.is_dir():
            raise ValueError(f"{layout.root}: no archive yet")
        try:
            with ArchiveLock(layout.root):
                manifest = ManifestReader(layout.manifest) if layout.manifest.exists() else None
                try:
                    verdict = check_archive(layout.root, manifest, progress)
                finally:
                    if manifest is not None:
                        manifest.close()
        except ArchiveLocked as exc:
            raise ValueError(f"not now: {exc}") from None
        if verdict.problems:  # the job fails, with what is wrong
            problems = format_problems(list(verdict.problems)[:20])
            raise ValueError(f"{verdict.summary()}\n{problems}")
        return verdict.summary()
    return work
