"""Crontab entries, where no systemd user manager runs: one line per site, tagged with the
site file's absolute path so that `mirror schedule` finds it again. The line texts and the
edits of a crontab's text are pure; reading and installing go through the `crontab`
command ($MIRROR_CRONTAB, split like a shell line, names another, e.g. "crontab -u backup")."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from mirror.errors import UsageError
from mirror.schedule.spec import Schedule

#: the comment that ends each of our lines (the shell that cron starts ignores it)
TAG = "# mirror-schedule: "
CRONTAB_ENV = "MIRROR_CRONTAB"
#: seconds one crontab call may take
CRONTAB_TIMEOUT = 30.0


class CrontabError(UsageError):
    """The crontab cannot be read or installed; str says why."""


def _cron_text(text: str) -> str:
    """Text for a crontab command field: cron turns an unescaped % into a line break."""
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"{text!r}: a line break or NUL cannot be written into a crontab")
    return text.replace("%", "\\%")


def line(schedule: Schedule, site_file: Path, argv: Sequence[str]) -> str:
    """The crontab line that runs argv on the schedule, tagged with the site file."""
    return (f"{schedule.cron} {_cron_text(shlex.join(argv))} "
            f"{TAG}{_cron_text(str(site_file))}")


def entries(crontab: str) -> dict[Path, str]:
    """Our lines in a crontab's text, by the site file each is tagged with."""
    found: dict[Path, str] = {}
    for text in crontab.splitlines():
        site = _site_of(text)
        if site is not None:
            found.setdefault(site, text)
    return found


def _site_of(text: str) -> Path | None:
    if text.lstrip().startswith("#") or TAG not in text:
        return None
    return Path(text.rpartition(TAG)[2].replace("\\%", "%"))


def with_line(crontab: str, site_file: Path, new: str | None) -> str:
    """The crontab with the site's line replaced by `new` (in place), added at the end, or
    removed (new=None); every other line is kept as it was."""
    out: list[str] = []
    for text in crontab.splitlines():
        if _site_of(text) == site_file:
            if new is not None:
                out.append(new)
                new = None  # a second line for the same site goes
            continue
        out.append(text)
    if new is not None:
        out.append(new)
    return "".join(f"{text}\n" for text in out)  # cron needs the last line ended


# --- the crontab command ------------------------------------------------------------------


def command(env: Mapping[str, str]) -> list[str] | None:
    """The crontab command to use, or None when there is none."""
    given = env.get(CRONTAB_ENV)
    if given:
        return shlex.split(given)
    return ["crontab"] if shutil.which("crontab", path=env.get("PATH")) else None


def read(cmd: Sequence[str], env: Mapping[str, str]) -> str:
    """The user's crontab ('' when there is none yet)."""
    proc = _call([*cmd, "-l"], env, None)
    if proc.returncode != 0:
        if re.search(r"no crontab for", proc.stderr):
            return ""
        raise CrontabError(f"`{shlex.join([*cmd, '-l'])}` failed: {proc.stderr.strip()}")
    return proc.stdout


def install(cmd: Sequence[str], text: str, env: Mapping[str, str]) -> None:
    """Install `text` as the user's crontab (crontab checks every line first)."""
    proc = _call([*cmd, "-"], env, text)
    if proc.returncode != 0:
        raise CrontabError(f"`{shlex.join([*cmd, '-'])}` refused the crontab: "
                           f"{(proc.stderr or proc.stdout).strip()}")


def _call(argv: list[str], env: Mapping[str, str],
          stdin: str | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, input=stdin, env=dict(env), capture_output=True,
                              text=True, timeout=CRONTAB_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise CrontabError(f"`{shlex.join(argv)}` did not answer within "
                           f"{CRONTAB_TIMEOUT:g}s") from None
    except OSError as exc:
        raise CrontabError(f"`{shlex.join(argv)}`: {exc}") from None
