"""Where an export file (WACZ, ZIM) goes: never over a file that is not an export of ours
unless forced, never over anything but a regular file, written aside under a fresh name."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from mirror.errors import UsageError


class DestinationError(UsageError):
    """The export file cannot be written there; the message says why and what to do."""


def check_destination(out: Path, *, force: bool, ours: Callable[[Path], bool]) -> None:
    """Refuse `out` when something is there that this export may not replace: anything but
    a regular file (a device, a FIFO, a folder, a symlink), even with `force`; a regular
    file that `ours` does not recognise, unless `force`."""
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise DestinationError(f"{out}: is {_kind(mode)}, not a regular file; an export "
                               "never replaces one (choose another name)")
    if not force and not ours(out):
        raise DestinationError(f"{out}: a file that is not an export of mirror is there; "
                               "choose another name, or --force to replace it")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def aside(out: Path) -> Path:
    """A new, empty file beside `out` to write the export into, then rename over `out`
    (created here, so no symlink planted at a predictable name is followed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    os.close(fd)
    return Path(name)


def is_our_wacz(path: Path) -> bool:
    """A WACZ that mirror wrote: its datapackage.json names mirror as the software."""
    try:
        with zipfile.ZipFile(path) as zf:
            package = json.loads(zf.read("datapackage.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return False
    return isinstance(package, dict) and str(package.get("software", "")).startswith("mirror ")


def is_our_zim(path: Path) -> bool:
    """A ZIM file that mirror wrote: its Scraper metadata names mirror."""
    try:
        from libzim.reader import Archive

        scraper = bytes(Archive(str(path)).get_metadata("Scraper")).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - libzim raises RuntimeError and others on a non-ZIM
        return False
    return scraper.startswith("mirror ")
