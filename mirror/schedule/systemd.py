"""systemd user timers: a .service that runs the site and a .timer with its OnCalendar=,
written to ~/.config/systemd/user and loaded with `systemctl --user` when a user manager
runs. The unit texts are pure functions; the rest touches files and systemctl."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mirror.model import SNAPSHOT_CODES, ExitCode
from mirror.schedule.spec import Schedule

#: the first line of every unit written here: whose it is (the site file's absolute path)
TAG = "# mirror-schedule: "
#: seconds one systemctl call may take
SYSTEMCTL_TIMEOUT = 30.0


def escape(text: str) -> str:
    """A string escaped as `systemd-escape` does (not --path): "/" becomes "-", ASCII
    letters, digits, ":", "_" and "." stay (a leading "." does not), every other byte is
    written \\xNN."""
    out = []
    for index, byte in enumerate(text.encode()):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif (char.isascii() and (char.isalnum() or char in ":_.")
              and not (index == 0 and char == ".")):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def unit_name(site: str) -> str:
    """The units' name without suffix: mirror-<site>, escaped (a '-' becomes \\x2d)."""
    return f"mirror-{escape(site)}"


def exec_quote(arg: str) -> str:
    """One word of ExecStart=: double-quoted, with systemd's specifiers (%) and variable
    expansion ($) made literal."""
    if any(c in arg for c in "\n\r\0"):
        raise ValueError(f"{arg!r}: a line break or NUL cannot be written into a unit")
    quoted = arg.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + quoted.replace("%", "%%").replace("$", "$$") + '"'


def _tag(site_file: Path) -> str:
    if any(c in str(site_file) for c in "\n\r\0"):
        raise ValueError(f"{site_file!r}: a line break or NUL cannot be written into a unit")
    return (f"{TAG}{site_file}\n"
            "# written by `mirror schedule apply`: edit [schedule] in the site file and apply "
            "again\n")


def service_text(site: str, site_file: Path, argv: Sequence[str]) -> str:
    # exit 3 (some URLs failed) and 4 (a limit) made a snapshot: not a failed unit
    snapshot = " ".join(str(int(c)) for c in sorted(SNAPSHOT_CODES - {ExitCode.OK}))
    return (f"{_tag(site_file)}[Unit]\nDescription=mirror: scheduled run of {site}\n\n"
            "[Service]\nType=oneshot\n"
            f"ExecStart={' '.join(exec_quote(a) for a in argv)}\n"
            f"SuccessExitStatus={snapshot}\n")


def timer_text(site: str, site_file: Path, schedule: Schedule) -> str:
    calendar = "".join(f"OnCalendar={c}\n" for c in schedule.on_calendar())
    # Persistent: a run missed while the machine was off runs once at the next boot
    return (f"{_tag(site_file)}[Unit]\nDescription=mirror: schedule of {site} "
            f"({schedule.text})\n\n[Timer]\n{calendar}Persistent=true\n\n"
            "[Install]\nWantedBy=timers.target\n")


# --- on disk ---------------------------------------------------------------------------------


def unit_dir(env: Mapping[str, str]) -> Path:
    """$XDG_CONFIG_HOME/systemd/user, by default ~/.config/systemd/user."""
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


@dataclass(frozen=True)
class Units:
    name: str  # without suffix
    service: str
    timer: str


def installed(folder: Path) -> dict[Path, Units]:
    """Our timers in the unit folder, by the site file their tag names."""
    found: dict[Path, Units] = {}
    for timer in sorted(folder.glob("mirror-*.timer")):
        service = timer.with_suffix(".service")
        try:
            timer_text_ = timer.read_text(encoding="utf-8")
            service_text_ = service.read_text(encoding="utf-8") if service.exists() else ""
        except (OSError, UnicodeDecodeError):
            continue
        first = timer_text_.partition("\n")[0]
        if first.startswith(TAG):
            found[Path(first.removeprefix(TAG))] = Units(timer.stem, service_text_, timer_text_)
    return found


def write(folder: Path, units: Units) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, text in ((".service", units.service), (".timer", units.timer)):
        path = folder / f"{units.name}{suffix}"
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)  # systemd never reads half a unit


def delete(folder: Path, name: str) -> None:
    for suffix in (".timer", ".service"):
        (folder / f"{name}{suffix}").unlink(missing_ok=True)


# --- systemctl --user ---------------------------------------------------------------------


def user_manager(env: Mapping[str, str]) -> bool:
    """A systemd user manager runs this user's session and answers: the runtime folder has
    systemd's, systemctl exists, and `systemctl --user show-environment` succeeds."""
    runtime = env.get("XDG_RUNTIME_DIR")
    if not runtime or not (Path(runtime) / "systemd").is_dir() or not shutil.which("systemctl"):
        return False
    return systemctl(["show-environment"], env) is None


def systemctl(args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Run `systemctl --user ARGS`; None when it succeeded, else what went wrong."""
    argv = ["systemctl", "--user", *args]
    try:
        proc = subprocess.run(argv, env=dict(env), capture_output=True, text=True,
                              timeout=SYSTEMCTL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return f"`{shlex.join(argv)}` did not answer within {SYSTEMCTL_TIMEOUT:g}s"
    except OSError as exc:
        return f"`{shlex.join(argv)}`: {exc}"
    if proc.returncode != 0:
        return f"`{shlex.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}"
    return None
