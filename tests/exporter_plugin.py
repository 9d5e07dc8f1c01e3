"""A format that is not mirror's, in one module: a text file of the archive's URLs. Started
as `python tests/exporter_plugin.py ARGS...`, it is `mirror ARGS...` with this format
registered, which is all a plug-in does; tests/test_app_export.py checks that the command
line and the app then offer it (flag, option, form, job) with no other change."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror.replay.exporters import Exporter, Option, Progress, Settings, register


@dataclass(frozen=True)
class Listed:
    path: Path
    urls: int

    def summary(self) -> str:
        return f"listed {self.urls} URLs in {self.path}"


class UrlList(Exporter):
    name, shown, flag = "urls", "URL list", "urls"
    help = "text file to write, one archived URL a line"
    label = "A list of the archived URLs"
    suffix = ".txt"
    options = (Option("containing", "only the URLs containing this text", "Containing"),)

    def write(self, archive: Any, dest: Path, settings: Settings,
              progress: Progress | None = None) -> Listed:
        part = settings.get("containing") or ""
        urls = sorted(c.url for c in archive.latest() if part in c.url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(f"{url}\n" for url in urls), encoding="utf-8")
        if progress is not None:
            progress(len(urls), len(urls))
        return Listed(dest, len(urls))


if __name__ == "__main__":
    register(UrlList())
    from mirror.cli.main import main_entry

    main_entry()
