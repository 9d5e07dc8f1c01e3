"""A library: a folder of site files, each naming where its archive lives (the site files
are read again whenever they change, so the CLI, an editor and the app can share them)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mirror.config import ConfigError, SiteConfig, load_config

#: the environment variable that names the library when no folder is given
LIBRARY_ENV = "MIRROR_LIBRARY"
#: a site's id in the app's URLs: its file name without .toml
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def default_library() -> Path:
    """$MIRROR_LIBRARY, else ~/mirror."""
    return Path(os.environ.get(LIBRARY_ENV) or Path.home() / "mirror").expanduser()


@dataclass(frozen=True)
class SiteEntry:
    """One site file of the library: its config, or why it cannot be used."""

    id: str  # the file name without .toml
    file: Path
    config: SiteConfig | None
    error: ConfigError | None
    stamp: int = 0  # the file's st_mtime_ns when it was read: which version this entry is

    @property
    def title(self) -> str:
        return self.config.site.name if self.config else self.id


class Library:
    """The site files in one folder (not its subfolders); each is read on every call, so
    an edit made in a text editor shows at once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[Path, tuple[int, SiteEntry]] = {}  # by file, with its mtime

    def files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.glob("*.toml")
                      if p.is_file() and _ID.fullmatch(p.stem))

    def sites(self) -> list[SiteEntry]:
        return [entry for p in self.files() if (entry := self._entry(p)) is not None]

    def get(self, site_id: str) -> SiteEntry | None:
        if not _ID.fullmatch(site_id):
            return None
        return self._entry(self.folder / f"{site_id}.toml")

    def _entry(self, path: Path) -> SiteEntry | None:
        """The file's entry, parsed again only when the file changed."""
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = self._read.get(path)
        if cached is None or cached[0] != stamp:
            cached = self._read[path] = (stamp, load_entry(path, stamp))
        return cached[1]


def load_entry(path: Path, stamp: int = 0) -> SiteEntry:
    try:
        return SiteEntry(path.stem, path, load_config(path), None, stamp)
    except ConfigError as exc:
        return SiteEntry(path.stem, path, None, exc, stamp)
