"""What `mirror ui` keeps between two starts for a library: its access token and its ports.

Kept in the user's state folder ($XDG_STATE_HOME/mirror/ui, by default
~/.local/state/mirror/ui), one file per library named after a hash of its path, mode 0600
in a 0700 folder. Not in the library: a library is a folder of site files that may be
shared, synced or kept in git, or sit on a file system that ignores modes; the token is
the user's own. Removing the file gives the next start a new token (old addresses and
cookies then stop working)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mirror.webapp import new_token

log = logging.getLogger(__name__)

#: what new_token() makes (and nothing shorter): a file's token is used only if it matches
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,128}")
#: the files this version writes; before 2, the app was at 127.0.0.1 and its cookie, the
#: token itself, went to every port of the machine: a token from then is replaced
VERSION = 2


@dataclass
class UiState:
    """The token and the last ports of one library's app: its own, and its replay servers'
    by site id (so that their addresses too stay the same from one start to the next)."""

    token: str = field(default_factory=new_token)
    port: int | None = None
    replay_ports: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        return {"version": VERSION, "token": self.token, "port": self.port,
                "replay_ports": self.replay_ports}


def parse_state(text: str) -> UiState | None:
    """The state a file holds, or None when it is not one (then a new token is made)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not _TOKEN.fullmatch(str(data.get("token", ""))):
        return None
    replays = data.get("replay_ports")
    token = data["token"] if data.get("version") == VERSION else new_token()
    return UiState(token, _port(data.get("port")),
                   {str(k): p for k, v in (replays if isinstance(replays, dict) else {}).items()
                    if (p := _port(v)) is not None})


def _port(value: object) -> int | None:
    return value if isinstance(value, int) and 0 < value < 65536 else None


def state_home(env: Mapping[str, str] = os.environ) -> Path:
    """$XDG_STATE_HOME/mirror/ui, by default ~/.local/state/mirror/ui."""
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local"
                                             / "state")
    return Path(base) / "mirror" / "ui"


def state_file(library: Path, home: Path | None = None) -> Path:
    digest = hashlib.sha256(str(library.resolve()).encode()).hexdigest()[:20]
    return (home or state_home()) / f"{digest}.json"


class StateFile:
    """The state file of one library: read once at start, written when a port changes."""

    def __init__(self, path: Path, library: Path) -> None:
        self.path, self.library = path, library
        self.state = self._read()

    def _read(self) -> UiState:
        try:
            info = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return UiState()
        except OSError as exc:
            log.warning("cannot read %s (%s): a new access token", self.path, exc)
            return UiState()
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO) or info.st_uid != os.getuid():
            log.warning("%s could be read by others: a new access token", self.path)
            return UiState()
        state = parse_state(text)
        if state is None:
            log.warning("%s is not a state file of mirror ui: a new access token", self.path)
        return state or UiState()

    def save(self) -> None:
        """Written whole to a new file made 0600, then renamed over the old one."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        body = {**self.state.as_json(), "library": str(self.library)}
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # in case it was left there with other modes
            os.write(fd, (json.dumps(body, indent=1) + "\n").encode())
        finally:
            os.close(fd)
        os.replace(temp, self.path)

    def try_save(self) -> None:
        """Save; a state folder that cannot be written costs only the next start's address."""
        try:
            self.save()
        except OSError as exc:
            log.warning("cannot write %s (%s): the next start gets a new address", self.path,
                        exc)
