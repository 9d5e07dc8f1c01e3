"""Finding a Chromium-family browser: the configured one, else the usual command names on
PATH, else the usual install places. Apart from launch.py so that `mirror check` can say
which browser a run will use without loading asyncio or the HTTP stack."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mirror.browser.api import BrowserNotFound

#: the command names tried on PATH, in order
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome",
         "microsoft-edge", "brave-browser")
#: the usual install places, tried after PATH
PLACES = (
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge",
    "/Applications/Brave Browser.app/Contents/MacOS/Brave Browser",
    r"C:\Program Files\Google\Chrome\Application\chrome.exe",
    r"C:\Program Files (x86)\Google\Chrome\Application\chrome.exe",
    r"C:\Program Files (x86)\Microsoft\Edge\Application\msedge.exe",
    r"C:\Program Files\Microsoft\Edge\Application\msedge.exe",
    r"C:\Program Files\BraveSoftware\Brave-Browser\Application\brave.exe",
    "/snap/bin/chromium",
    "/usr/lib/chromium/chromium",
)
def find_browser(configured: str | None = None) -> Path | None:
    """The browser to run: `configured` (a path or a command name; BrowserNotFound naming it
    when it is neither), else the first of NAMES on PATH, else the first of PLACES; None when
    there is none."""
    if configured:
        found = shutil.which(configured)
        if found is None and os.path.isfile(configured) and os.access(configured, os.X_OK):
            found = configured
        if found is None:
            raise BrowserNotFound(configured)
        return Path(found)
    for name in NAMES:
        if found := shutil.which(name):
            return Path(found)
    return next((Path(p) for p in PLACES if os.path.isfile(p) and os.access(p, os.X_OK)), None)
