"""The [browser] section of a site file (issue 35): which pages are loaded in a browser, and
how. A top-level module beside config.py (which holds it as `SiteConfig.browser`); it loads
nothing of mirror.browser until `settings()` is called."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror.configrules import (
    Context,
    Invalid,
    boolean,
    choice,
    integer,
    key,
    mismatch,
    number,
)

if TYPE_CHECKING:
    from mirror.browser.api import BrowserSettings

HOUR = 3600  # the ceiling of page_timeout, in seconds
#: what [browser] mode may be: auto (a page the HTTP crawl flags as built by scripts is loaded
#: in the browser too, when one is found), always (every HTML page), off (never)
MODES = ("auto", "always", "off")


def browser_program(value: Any, ctx: Context) -> str | None:
    """A Chromium-family browser: "" (the first found of the usual names), a command name on
    PATH, or a path to the program (relative to the site file's folder)."""
    if not isinstance(value, str) or "\0" in value:
        raise mismatch("a browser's program path or command name, such as 'chromium' or "
                       "'/usr/bin/google-chrome' (\"\" for the first one found)", value)
    text = value.strip()
    if not text:
        return None
    if os.sep in text or "/" in text or (os.altsep and os.altsep in text):
        path = Path(os.path.abspath(ctx.base / Path(text).expanduser()))
        if not path.is_file() or not os.access(path, os.X_OK):
            raise Invalid(f"no browser program at {path} (not a file, or not executable)")
        return str(path)
    if shutil.which(text) is None:
        raise Invalid(f"no command {text!r} on PATH; give the browser's full path, or \"\" "
                      "for the first one found")
    return text


def show_executable(value: str | None, redact: bool) -> str:
    return value or ""


@dataclass(frozen=True)
class BrowserSection:
    """[browser]: pages built by scripts, loaded in a Chromium-family browser that mirror
    drives (mirror never downloads one; README "Pages built by scripts")."""

    mode: str = key(choice(*MODES), "auto")
    # a path or command name; None: the first found of the usual names and install places
    executable: str | None = key(browser_program, None, show=show_executable)
    tabs: int = key(integer(1, 32), 2)  # pages loaded at once
    # seconds a page may take to load and settle; then it is stored as fetched over HTTP
    page_timeout: float = key(number(0, HOUR, inclusive=False), 30.0)
    # at most this many viewport heights of autoscroll, for lazy and infinite content (0: none)
    scroll: int = key(integer(0, 1000), 10)
    screenshot: bool = key(boolean(), False)  # a PNG of each rendered page, stored beside it
    restart_pages: int = key(integer(1, 1_000_000), 100)  # browser restarted after this many
    # the browser restarted when its processes together use more memory than this (MB)
    max_rss_mb: int = key(integer(64, 1_000_000), 1024)

    def settings(self, executable: Path, user_agent: str | None) -> BrowserSettings:
        """The pool's settings for the browser found at `executable`."""
        from mirror.browser.api import BrowserSettings

        return BrowserSettings(executable=executable, tabs=self.tabs,
                               page_timeout=self.page_timeout, scroll=self.scroll,
                               screenshot=self.screenshot, restart_pages=self.restart_pages,
                               max_rss_mb=self.max_rss_mb, user_agent=user_agent)


#: the command that installs a Chromium-family browser, by system (platform.system()) or by
#: Linux distribution family (os-release ID / ID_LIKE)
INSTALL = {
    "debian": "sudo apt install chromium",
    "ubuntu": "sudo apt install chromium",
    "fedora": "sudo dnf install chromium",
    "rhel": "sudo dnf install chromium",
    "Darwin": "brew install --cask chromium (or install Google Chrome)",
    "Windows": "winget install Google.Chrome (or Hibbiki.Chromium)",
}
#: a Linux system of another family: the two commands the README gives
OTHER_LINUX = "sudo apt install chromium, or sudo dnf install chromium"


def install_command(system: str, distro: tuple[str, ...] = ()) -> str:
    """How to install a browser here: `system` as platform.system() gives it, `distro` the
    os-release ID then ID_LIKE words of a Linux system ("ubuntu", "debian")."""
    if system != "Linux":
        return INSTALL.get(system, OTHER_LINUX)
    return next((INSTALL[name] for name in distro if name in INSTALL), OTHER_LINUX)


def enable_advice(system: str, distro: tuple[str, ...] = ()) -> str:
    """The words that say how to have pages built by scripts loaded in a browser."""
    return (f"install a Chromium-family browser ({install_command(system, distro)}) or set "
            "[browser] executable to one already installed; mirror never downloads one")


def this_system() -> tuple[str, tuple[str, ...]]:
    """platform.system() and, on Linux, the os-release ID and ID_LIKE words."""
    import platform

    system = platform.system()
    if system != "Linux":
        return system, ()
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return system, ()
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    words = " ".join(values.get(name, "").strip().strip('"') for name in ("ID", "ID_LIKE"))
    return system, tuple(words.lower().split())
