"""A site file's whole text as the app's file editor saves it: the user's text as typed
(comments, spacing, order), checked first by the loader `mirror check` uses."""

from __future__ import annotations

import hashlib
from pathlib import Path

from mirror.app.sitefile import declared_name, problems
from mirror.config import ConfigError, config_error
from mirror.errors import MirrorError


class StaleText(MirrorError):
    """The file changed on disk after the editor showed it; str(exc) says what to do."""


def digest(text: str) -> str:
    """What the editor page remembers of the text it showed, to tell a later change."""
    return hashlib.sha256(text.encode()).hexdigest()


def checked_text(typed: str, current: str, path: Path, seen: str) -> str:
    """The editor's text as the file will hold it, with the file's own line ends (a browser
    sends CRLF). StaleText when the file is no longer the text the editor showed (`seen`,
    its digest); ConfigError listing every problem of the text, or a new [site] name (it
    names the archive's files: a new name is a new site)."""
    text = typed.replace("\r\n", "\n")
    if "\r\n" in current:
        text = text.replace("\n", "\r\n")
    if seen != digest(current):
        raise StaleText("the file changed on disk after this page showed it; the text below "
                        "is yours, not the file's: Save again to put it in the file's place, "
                        "or open the page again to start from the new file")
    errors = problems(text, path)
    old, new = declared_name(current), declared_name(text)
    if old and new and new != old:
        errors.append(ConfigError(
            path, "site.name", f"[site] name: stays {old!r} here; it names the archive's files",
            "a new name is a new site: add it with Add a site"))
    if errors:
        raise config_error(errors)
    return text
