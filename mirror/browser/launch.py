"""Finding a Chromium-family browser and running one: its flags, a temporary profile
(removed at stop), the DevTools port it reports, its process group (stopped as a whole, by
pid, also when the caller is cancelled) and the memory of its process tree (from /proc)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mirror.browser.api import BrowserError

#: headless, no background traffic of its own (updates, sync, safe browsing lists: refused many
#: at a time here), and any request that escaped interception sent to a dead proxy
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-default-browser-check", "--disable-dev-shm-usage", "--hide-scrollbars",
    "--mute-audio", "--disable-extensions", "--disable-default-apps",
    "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider,"
    "BackForwardCache",
    "--disable-domain-reliability", "--disable-breakpad", "--metrics-recording-only",
    "--password-store=basic", "--use-mock-keychain",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
)
START_TIMEOUT = 30.0
#: a temporary folder longer than this is not used for the profile (see short_temp_dir)
MAX_TEMP_PATH = 40
PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_GRACE = 2.0


def browser_argv(executable: Path, profile: Path, viewport: tuple[int, int]) -> list[str]:
    """The command line of a headless browser on its own profile."""
    return [str(executable), *FLAGS, f"--user-data-dir={profile}",
            f"--window-size={viewport[0]},{viewport[1]}", "about:blank"]


@dataclass
class BrowserProcess:
    """A running browser: its leader's pid (also its process group and session id), its
    profile folder and the DevTools WebSocket address."""

    proc: asyncio.subprocess.Process
    profile: Path
    ws_url: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the whole group and remove the profile, without waiting."""
        kill_group(self.pid, signal.SIGKILL)
        shutil.rmtree(self.profile, ignore_errors=True)

    def rss_mb(self) -> float | None:
        """The resident memory of the browser's processes together, in MB (None without
        /proc)."""
        return group_rss_mb(self.pid)

    async def stop(self) -> None:
        """Stop the whole process group (SIGTERM, then SIGKILL after STOP_GRACE) and remove the
        profile. Cancelled while waiting, it kills at once: the group never outlives it."""
        try:
            if self.proc.returncode is None:
                kill_group(self.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(self.proc.wait(), STOP_GRACE)
                except TimeoutError:
                    pass
        finally:
            self.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), STOP_GRACE)


def kill_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group `pid` leads, and to any process of its session that
    left the group."""
    for target in {pid, *group_members(pid)}:
        try:
            if target == pid:
                os.killpg(pid, sig)
            else:
                os.kill(target, sig)
        except (ProcessLookupError, PermissionError):
            pass


def group_members(leader: int) -> list[int]:
    """The living pids whose process group or session is `leader` (from /proc; [] without
    it); zombies, already dead, are left out."""
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp session ...
        if fields[0] != "Z" and leader in (int(fields[2]), int(fields[3])):
            members.append(int(entry))
    return members


def group_rss_mb(leader: int) -> float | None:
    """The resident memory of the process group `leader` leads, in MB: the sum of each
    process's anonymous resident memory (RssAnon in /proc/PID/status: heaps, DOM, caches).
    Summing whole RSS would count the shared binary once per process (a browser of 8
    processes: 850-1010 MB summed RSS for 210-260 MB RssAnon and 213-264 MB PSS)."""
    if not os.path.isdir("/proc"):
        return None
    total_kb = 0
    for pid in group_members(leader):
        try:
            status = Path("/proc", str(pid), "status").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines()
                          if line.startswith("RssAnon:")), 0)
    return total_kb / 1024


def short_temp_dir() -> str | None:
    """Where the profile goes: the temporary folder, unless its path is long (Chromium puts a
    Unix socket below its TMPDIR, and such a path is at most 107 bytes: a longer one aborts
    it at start), then /tmp."""
    base = tempfile.gettempdir()
    return "/tmp" if len(base) > MAX_TEMP_PATH and os.path.isdir("/tmp") else None


def dies_with_parent() -> Callable[[], None] | None:
    """On Linux, what the child runs before exec so that the kernel SIGKILLs the browser when
    mirror dies (kill -9 included; PR_SET_PDEATHSIG): its own processes then end with it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    parent = os.getpid()

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # mirror died before the signal was armed
            os._exit(1)

    return arm


async def start_browser(executable: Path, viewport: tuple[int, int]) -> BrowserProcess:
    """Start the browser in its own session on a fresh profile and wait for its DevTools
    port; BrowserError("launch") naming the executable when it does not come up."""
    profile = Path(tempfile.mkdtemp(prefix="mirror-browser-", dir=short_temp_dir()))
    log_path = profile / "stderr.log"
    try:
        with open(log_path, "wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *browser_argv(executable, profile, viewport), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=log, start_new_session=True,
                env={**os.environ, "TMPDIR": str(profile)}, preexec_fn=dies_with_parent())
    except OSError as exc:
        shutil.rmtree(profile, ignore_errors=True)
        raise BrowserError("launch", f"cannot start the browser {executable}: {exc}") from exc
    process = BrowserProcess(proc, profile, "")
    try:
        process.ws_url = await _devtools_url(process, executable, log_path)
    except BaseException:
        await asyncio.shield(process.stop())
        raise
    return process


async def _devtools_url(process: BrowserProcess, executable: Path, log_path: Path) -> str:
    port_file = process.profile / "DevToolsActivePort"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while loop.time() < deadline:
        if process.proc.returncode is not None:
            raise BrowserError("launch", f"the browser {executable} exited with code "
                               f"{process.proc.returncode} at start: {_tail(log_path)}")
        try:
            lines = port_file.read_text().split()
        except OSError:
            lines = []
        if len(lines) == 2:
            return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        await asyncio.sleep(0.05)
    raise BrowserError("launch", f"the browser {executable} did not open its DevTools port "
                                 f"within {START_TIMEOUT:g} s: {_tail(log_path)}")


def _tail(path: Path, size: int = 400) -> str:
    try:
        data = path.read_bytes()[-size:]
    except OSError:
        return "(no output)"
    return data.decode("utf-8", "replace").strip().replace("\n", " | ") or "(no output)"
