"""Removing a site from the library: its site file, its OS timer, and (only when asked) its
archive folder; never while a run holds the archive's lock. For the app and `mirror remove`.

A site's timer goes with its file: left behind it would start `mirror run` on a file that
is gone at every due time, each run failing with no one to see it (and `mirror schedule
apply` would drop it anyway, as it drops every timer whose site file is gone)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mirror.app.library import Library, SiteEntry
from mirror.archive.fsutil import disk_usage
from mirror.archive.lock import ArchiveLock, ArchiveLocked
from mirror.errors import UsageError
from mirror.layout import ArchiveLayout
from mirror.run.report import human_bytes


class RemovalError(UsageError):
    """The site cannot be removed (now); str says why and what to do."""


@dataclass(frozen=True)
class Removal:
    """What removing a site would touch, read before asking the user."""

    entry: SiteEntry
    archive: Path | None  # None: the site file cannot be read, so its archive is unknown
    size: int  # bytes on disk under the archive folder (0 when there is none)
    keep_only: str | None  # why the archive folder must not be deleted with the site

    @property
    def size_text(self) -> str:
        return human_bytes(self.size)


def find_site(library: Library, name: str) -> SiteEntry:
    """The site whose file name (without .toml) or [site] name is `name`, ignoring case."""
    entries, folded = library.sites(), name.casefold()
    found = (next((e for e in entries if e.id == name), None)
             or next((e for e in entries if e.id.casefold() == folded), None)
             or next((e for e in entries if e.title.casefold() == folded), None))
    if found is not None:
        return found
    known = ", ".join(e.id for e in entries) or "none"
    raise RemovalError(f"{library.folder}: no site {name!r} in the library (its sites: "
                       f"{known})")


def plan(library: Library, entry: SiteEntry, home: Path | None = None) -> Removal:
    if entry.config is None:
        return Removal(entry, None, 0, "the site file cannot be read, so its archive folder "
                                       "is unknown")
    root = entry.config.site.output_dir
    others = [(e.id, e.config.site.output_dir) for e in library.sites()
              if e.config is not None and e.file != entry.file]
    why = keep_reason(root, entry.file, others, home or Path.home())
    if why is None and root.exists() and not _looks_like_archive(root):
        why = f"{root} does not look like an archive (no manifest, no warc folder)"
    # a folder that is not the site's own is never walked (it may be the home folder)
    return Removal(entry, root, disk_usage(root) if why is None else 0, why)


def keep_reason(root: Path, site_file: Path, others: list[tuple[str, Path]],
                home: Path) -> str | None:
    """Why the archive folder `root` must not be deleted with its site: it is the home
    folder or a root, holds the site files, or is (in) another site's archive. Pure."""
    root, site_file, home = _abs(root), _abs(site_file), _abs(home)
    if root in (home, Path(root.anchor)) or root in home.parents:
        return f"{root} is not an archive folder of its own"
    if root in site_file.parents:
        return f"{root} holds the library's site files"
    for other, folder in others:
        folder = _abs(folder)
        if folder == root or root in folder.parents or folder in root.parents:
            return f"{root} is shared with the site {other!r} (its archive: {folder})"
    return None


def _abs(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _looks_like_archive(root: Path) -> bool:
    layout = ArchiveLayout(root)
    return root.is_dir() and (layout.manifest.exists() or layout.warc.is_dir()
                              or not any(root.iterdir()))


def remove(removal: Removal, *, delete_archive: bool,
           env: Mapping[str, str] | None = None) -> list[str]:
    """Remove the site (see the module's docstring); what was done, as lines for the user.
    RemovalError, with nothing removed, while a run holds the archive's lock or when the
    archive cannot be deleted."""
    entry, root = removal.entry, removal.archive
    if delete_archive and removal.keep_only:
        raise RemovalError(f"the archive is not deleted: {removal.keep_only}")
    if root is not None and (holder := ArchiveLock.holder(root)) is not None:
        raise RemovalError(f"{entry.title}: a mirror process (pid {holder}) is using its "
                           "archive; stop it (or wait for it to end), then remove the site")
    if root is None or not root.exists():
        return _remove_file(entry, env) + ([f"it had no archive yet ({root})"]
                                           if root is not None else [])
    if removal.keep_only:  # not the site's own folder: neither locked nor deleted here
        return [*_remove_file(entry, env), f"kept {root}: {removal.keep_only}"]
    try:
        with ArchiveLock(root):
            lines = _remove_file(entry, env)
            if not delete_archive:
                return [*lines, f"kept its archive {root} ({removal.size_text} on disk); "
                                f"`rm -r {root}` deletes it"]
            shutil.rmtree(root)
    except ArchiveLocked as exc:
        raise RemovalError(f"{entry.title}: {exc}") from None
    return [*lines, f"deleted its archive {root} ({removal.size_text})"]


def _remove_file(entry: SiteEntry, env: Mapping[str, str] | None) -> list[str]:
    lines = _remove_timer(entry, os.environ if env is None else env)
    try:
        entry.file.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise RemovalError(f"{entry.file}: cannot delete: {exc.strerror or exc}") from exc
    return [f"removed {entry.title} from the library: deleted {entry.file}", *lines]


def _remove_timer(entry: SiteEntry, env: Mapping[str, str]) -> list[str]:
    from mirror.schedule import timers

    site_file = _abs(entry.file)
    try:
        have = timers.Installed.read(env)
    except OSError:
        return []
    if not have.describe(site_file):
        return []
    site = timers.Site(site_file, entry.title, None, "the site was removed from the library")
    changes = timers.converge([site], timers.SYSTEMD, have, lambda every: "")
    if changes.problems:
        raise RemovalError(f"{entry.title}: its timer could not be removed, so the site is "
                           f"kept: {'; '.join(changes.problems)}")
    return changes.lines
