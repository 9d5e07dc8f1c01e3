"""The WACZ for ReplayWeb.page (mirror.replay.wacz), as an export format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mirror.replay.exporters import FORCE, Exporter, ExportFailed, Progress, Result, Settings

if TYPE_CHECKING:
    from mirror.replay.captures import CaptureIndex


class Wacz(Exporter):
    name, shown, flag = "wacz", "WACZ", "wacz"
    help = "WACZ file to write"
    label = "WACZ for ReplayWeb.page"
    suffix = ".wacz"
    options = (FORCE,)
    declines = {"at": "a WACZ holds every run"}

    def write(self, archive: CaptureIndex, dest: Path, settings: Settings,
              progress: Progress | None = None) -> Result:
        from mirror.replay.destination import DestinationError
        from mirror.replay.wacz import write_wacz

        try:
            return write_wacz(archive, dest, title=settings.site, start_urls=settings.start_urls,
                              on_progress=progress, force=bool(settings.get("force")))
        except DestinationError as exc:
            raise ExportFailed(str(exc)) from exc


EXPORTER = Wacz()
