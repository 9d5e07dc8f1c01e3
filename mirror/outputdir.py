"""Which folders a site's archive may live in: a new or empty folder, or a mirror archive;
never a system folder, `/` or the home folder itself (a run writes index.cdxj, reports/
and manifest.sqlite3 there and would replace another program's files of those names)."""

from __future__ import annotations

import os
from pathlib import Path

from mirror.layout import ArchiveLayout

#: folders that hold the system: refused, and so is every folder inside them
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                "/proc", "/run", "/sbin", "/sys", "/usr")
#: folders that hold others' folders: refused themselves, a folder inside them is fine
SHARED_ROOTS = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var",
                "/var/lib", "/var/tmp", "/Users", "/Volumes")
#: what mirror writes before a run's manifest exists: a folder holding only these is one
#: whose first run stopped early (ArchiveLayout: lock, log, progress; schedule/lastrun.py's
#: record and schedule/wait.py's folder, both written before the run takes its lock) or one
#: restored from an empty store (store/sync.py's MARKER, the note of the store the
#: record and run/wait.py's folder, both written before the run takes its lock) or one
#: folder belongs to: `mirror restore`, and a fleet worker before each run, write it there)
_EARLY_FILES = frozenset({".lock", "mirror.log", "progress.json", "scheduled.json",
                          ".schedule-wait", ".store.json"})


def system_folder(path: Path, home: Path) -> str | None:
    """Why `path` (absolute, normalised) is no place for an archive, if it is a system
    folder, a folder inside one, a shared root such as /var, or the home folder; pure."""
    text = path.as_posix()
    for tree in SYSTEM_TREES:
        if text == tree or text.startswith(tree + "/"):
            return f"{text} is a system folder" + ("" if text == tree else f" (in {tree})")
    if text in SHARED_ROOTS:
        return f"{text} is a system folder that holds other folders"
    if path == home:
        return f"{text} is your home folder"
    return None


def is_archive(root: Path) -> bool:
    """A mirror archive: its manifest, a shared-crawl worker's mark or its warc/ folder is
    there, or only what a run writes before its manifest (a first run stopped early)."""
    layout = ArchiveLayout(root)
    if layout.manifest.is_file() or layout.worker_mark.is_file() or layout.warc.is_dir():
        return True
    with os.scandir(root) as entries:
        return all(entry.name in _EARLY_FILES for entry in entries)


def output_dir_problem(path: Path, home: Path | None = None) -> str | None:
    """What is wrong with `path` as a site's archive folder, with what to do; None when a
    run may write there (absent, empty, or a mirror archive)."""
    home = Path(os.path.abspath(Path.home() if home is None else home))
    path = Path(os.path.abspath(path))
    advice = "choose a new or empty folder of its own, e.g. 'archive/<site name>' " \
             "beside the site file (the default)"
    if reason := system_folder(path, home):
        return f"{reason}; {advice}"
    try:
        if not path.exists():
            return None
        if not path.is_dir():
            return f"{path} is a file, not a folder; {advice}"
        if is_archive(path):
            return None
        with os.scandir(path) as entries:
            names = sorted(entry.name for entry in entries)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{path} holds other files ({len(names)}: {shown}) and is not a mirror archive "
            f"(no manifest.sqlite3 or warc/): a run would write its index.cdxj, reports/ and "
            f"manifest among them; {advice}")
