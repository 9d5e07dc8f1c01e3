"""Tests for mirror.app.rawfile: the app's editor of a whole site file checks the text with
the loader, keeps it as typed, and refuses a stale page or a new site name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.app.rawfile import StaleText, checked_text, digest
from mirror.config import ConfigError, ConfigErrors

SITE = Path("site.toml")
FILE = '# mine\n[site]\nname = "ex"\nstart_urls = ["https://example.com/"]\n[crawl]\nworker = 3\n'


def check(typed: str, current: str = FILE) -> str:
    return checked_text(typed, current, SITE, digest(current))


def test_the_text_is_kept_as_typed() -> None:
    typed = FILE.replace("worker = 3", "workers = 3   # was a typo\n\n\n# end")
    assert check(typed) == typed


def test_a_browsers_crlf_becomes_the_files_own_line_end() -> None:
    typed = FILE.replace("worker =", "workers =")
    assert check(typed.replace("\n", "\r\n")) == typed
    crlf = FILE.replace("\n", "\r\n")
    assert check(typed.replace("\n", "\r\n"), crlf) == typed.replace("\n", "\r\n")


def test_every_problem_of_the_text_is_listed() -> None:
    with pytest.raises(ConfigErrors) as info:
        check(FILE.replace("[crawl]", "[crawl]\ndelay = -1\ntimeout = 'x'"))
    assert [e.detail for e in info.value.errors] == [
        "[crawl] worker: unknown key; did you mean 'workers'?",
        "[crawl] delay: expected a number from 0 to 3600, found -1 (an integer)",
        "[crawl] timeout: expected a number > 0 and <= 3600, found 'x' (a string)"]
    with pytest.raises(ConfigError, match="line 7, column 11: invalid TOML: Invalid value"):
        check(FILE + "workers = \n")


def test_a_new_site_name_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        check(FILE.replace('"ex"', '"other"').replace("worker =", "workers ="))
    assert info.value.key == "site.name"
    assert info.value.detail == ("[site] name: stays 'ex' here; it names the archive's files; "
                                 "a new name is a new site: add it with Add a site")


def test_a_file_changed_since_the_page_showed_it_is_not_overwritten() -> None:
    typed = FILE.replace("worker =", "workers =")
    with pytest.raises(StaleText, match="changed on disk"):
        checked_text(typed, FILE + "# added in an editor\n", SITE, digest(FILE))
