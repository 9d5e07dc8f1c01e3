"""Finding a Chromium-family browser and running one: its flags, a temporary profile
(removed at stop), the DevTools port it reports, its process group (stopped as a whole, by
pid, also when the caller is cancelled) and the memory of its process tree (from /proc)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
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
    "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
    "--disable-domain-reliability", "--disable-breakpad", "--metrics-recording-only",
    "--password-store=basic", "--use-mock-keychain",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
)
START_TIMEOUT = 30.0
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
            kill_group(self.pid, signal.SIGKILL)
            shutil.rmtree(self.profile, ignore_errors=True)
        if self.proc.returncode is None:
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
    """The pids whose process group or session is `leader` (from /proc; [] without it)."""
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
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if leader in (int(fields[2]), int(fields[3])):  # pgrp, session
            members.append(int(entry))
    return members


def group_rss_mb(leader: int) -> float | None:
    """The summed resident set of the process group `leader` leads, in MB."""
    if not os.path.isdir("/proc"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in group_members(leader):
        try:
            total += int(Path("/proc", str(pid), "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


async def start_browser(executable: Path, viewport: tuple[int, int]) -> BrowserProcess:
    """Start the browser in its own session on a fresh profile and wait for its DevTools
    port; BrowserError("launch") naming the executable when it does not come up."""
    profile = Path(tempfile.mkdtemp(prefix="mirror-browser-"))
    log_path = profile / "stderr.log"
    try:
        with open(log_path, "wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *browser_argv(executable, profile, viewport), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=log, start_new_session=True)
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
