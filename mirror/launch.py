"""The command line that starts mirror again as a child process: the app's runs, the OS
timers' ExecStart and crontab lines, the fleet's runs, the parse helpers.

This Python, by its absolute path, with -P: `python -m` puts the current folder first on
sys.path, and a folder named `mirror` there (the default library is ~/mirror; cron,
systemd user units and the app start in $HOME) would shadow the installed package. -P
(Python 3.11) leaves the current folder out, so the child runs the package this Python has
installed, editable or not, whatever the folder and the environment (cron gives no
VIRTUAL_ENV and PATH=/usr/bin:/bin; a venv's python finds its packages without either)."""

from __future__ import annotations

import sys


def module_argv(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """The argv that runs `python -m module args` with the installed package."""
    return [python, "-P", "-m", module, *args]


def mirror_argv(*args: str, python: str = sys.executable) -> list[str]:
    """The argv of `mirror args` run by this Python's installed mirror."""
    return module_argv("mirror", *args, python=python)
