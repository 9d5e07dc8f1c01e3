"""The ZIM for Kiwix readers (mirror.replay.zim), as an export format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mirror.replay.exporters import (
    AT,
    FORCE,
    Exporter,
    ExportFailed,
    Option,
    Progress,
    Result,
    Settings,
)

if TYPE_CHECKING:
    from mirror.replay.captures import CaptureIndex

#: what a reader's library shows of the file; each defaults to what the main page says
META = (
    Option("title", "its title (default: the main page's, cut at 30 characters)", "Title"),
    Option("description", "its description (default: the main page's meta description, cut "
                          "at 80 characters)", "Description"),
    Option("language", "the language of its pages and its search, e.g. en, fra, pt-BR "
                       "(default: the main page's lang, else English)", "Language"),
    Option("publisher", "who made the file (default: mirror)", "Publisher"),
)


class Zim(Exporter):
    name, shown, flag = "zim", "ZIM", "zim"
    help = "ZIM file to write, for Kiwix readers (needs mirror[zim])"
    label = "ZIM for Kiwix readers"
    suffix = ".zim"
    options = (AT, FORCE, *META)

    def write(self, archive: CaptureIndex, dest: Path, settings: Settings,
              progress: Progress | None = None) -> Result:
        from mirror.replay.destination import DestinationError
        from mirror.replay.zim import ZimError, write_zim

        meta = {option.name: settings.get(option.name) for option in META}
        try:
            return write_zim(archive, dest, site_name=settings.site,
                             start_urls=settings.start_urls, at=settings.get("at"),
                             on_progress=progress, force=bool(settings.get("force")), **meta)
        except (ZimError, DestinationError) as exc:
            raise ExportFailed(str(exc)) from exc


EXPORTER = Zim()
