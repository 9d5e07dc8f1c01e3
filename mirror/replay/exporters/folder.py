"""The folder that opens from file:// (mirror.replay.export), as an export format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mirror.replay.exporters import AT, Exporter, ExportFailed, Progress, Result, Settings

if TYPE_CHECKING:
    from mirror.replay.captures import CaptureIndex


class Folder(Exporter):
    name = shown = "folder"
    flag, metavar = "to", "DIR"
    help = "folder to write"
    label = "Folder that opens from file://"
    options = (AT,)

    def write(self, archive: CaptureIndex, dest: Path, settings: Settings,
              progress: Progress | None = None) -> Result:
        from mirror.replay.export import ExportError, export_folder

        try:
            return export_folder(archive, dest, settings.get("at"), on_progress=progress)
        except ExportError as exc:
            raise ExportFailed(str(exc)) from exc


EXPORTER = Folder()
