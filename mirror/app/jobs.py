"""What the app starts: `mirror run` processes that outlive it, and export/verify jobs."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mirror.archive.lock import ArchiveLock
from mirror.errors import MirrorError
from mirror.launch import mirror_argv
from mirror.model import ENDED_WELL

log = logging.getLogger(__name__)

#: seconds a launched run may take to hold its lock before the app stops saying "starting"
START_WINDOW = 30.0


class ActionError(MirrorError):
    """An action the app refuses, with the reason shown to the user."""


@dataclass
class Launch:
    """A `mirror run` process started by this app."""

    pid: int
    started: float
    output: Path
    exit_code: int | None = None
    held: bool = False  # seen holding the archive's lock: past its start


class Launcher:
    """Starts runs as ordinary `mirror run` processes in their own session, so that closing
    the app (or its terminal) kills none of them; the archive lock, not this object, says
    whether a run is going. Their output goes to <state>/<site>.out."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.launches: dict[str, Launch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def starting(self, site_id: str, holder: str | None) -> bool:
        """Launched by us, alive, and not seen holding its lock yet (`holder`: the lock's
        holder now). A run that has released its lock and is exiting is not starting."""
        launch = self.launches.get(site_id)
        if launch is None or launch.exit_code is not None or launch.held:
            return False
        if holder == str(launch.pid):
            launch.held = True
            return False
        return time.monotonic() - launch.started < START_WINDOW

    async def start_run(self, site_id: str, site_file: Path, archive: Path, *,
                        new_run: bool = False) -> Launch:
        await self._settle(site_id, archive)
        holder = ArchiveLock.holder(archive)
        if holder is not None:
            raise ActionError(f"a process (pid {holder}) is already using this archive; "
                              "one run at a time")
        if self.starting(site_id, holder):
            raise ActionError("a run of this site is starting")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        output = self.state_dir / f"{site_id}.out"
        argv = mirror_argv("run", "--quiet", str(site_file), *(["--new-run"] if new_run else []))
        with open(output, "ab") as out:
            out.write(f"\n$ mirror run{' --new-run' if new_run else ''} {site_file}\n".encode())
            out.flush()
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)
        launch = self.launches[site_id] = Launch(proc.pid, time.monotonic(), output)
        task = asyncio.create_task(self._reap(proc, launch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return launch

    async def _settle(self, site_id: str, archive: Path, within: float = 3.0) -> None:
        """Our last launch of the site is alive with the lock free: it is either starting
        or exiting after its run. Wait (a little) until it holds the lock or has exited."""
        launch = self.launches.get(site_id)
        deadline = time.monotonic() + within
        while (launch is not None and launch.exit_code is None and not launch.held
               and time.monotonic() < deadline):
            if ArchiveLock.holder(archive) == str(launch.pid):
                launch.held = True
                break
            await asyncio.sleep(0.05)

    async def _reap(self, proc: asyncio.subprocess.Process, launch: Launch) -> None:
        launch.exit_code = await proc.wait()

    def last_output(self, site_id: str, lines: int = 5) -> str:
        """The end of the last launch's output, when it ended badly (else '')."""
        launch = self.launches.get(site_id)
        if launch is None or launch.exit_code is None or launch.exit_code in ENDED_WELL:
            return ""
        try:
            text = launch.output.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    @staticmethod
    def stop(archive: Path) -> int:
        """Stop the run holding the archive as Ctrl-C would (it finishes in-flight fetches
        and exits 130, resumable); returns its pid."""
        holder = ArchiveLock.holder(archive)
        if holder is None or not holder.isdigit():
            raise ActionError("no run is going on")
        try:
            os.kill(int(holder), signal.SIGINT)
        except ProcessLookupError:
            raise ActionError("the run has just ended") from None
        except PermissionError:
            raise ActionError(f"pid {holder} belongs to another user") from None
        return int(holder)

    async def close(self) -> None:
        """Stop watching (the processes go on)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class Job:
    """An export or a verify, run in a thread of the app."""

    id: int
    site: str
    kind: str  # "export folder" | "export WACZ" | "export ZIM" (and other formats) | "verify"
    done: int = 0
    total: int = 0
    state: str = "running"  # running | done | failed
    message: str = ""
    started: float = field(default_factory=time.time)


Work = Callable[[Callable[[int, int], None]], str]


class Jobs:
    """Jobs by site; each reports progress through a callback and ends with a message."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self.version = 0  # bumped on every change, for the live page

    def of(self, site_id: str) -> list[Job]:
        return [j for j in self.jobs.values() if j.site == site_id]

    def busy(self, site_id: str) -> bool:
        return any(j.state == "running" for j in self.of(site_id))

    def verifying(self, site_id: str, holder: str | None) -> bool:
        """The archive's lock (`holder`) is held by this app's own verify of the site."""
        return holder == str(os.getpid()) and any(
            j.state == "running" and j.kind == "verify" for j in self.of(site_id))

    def start(self, site_id: str, kind: str, work: Work) -> Job:
        if self.busy(site_id):
            raise ActionError("another export or verify of this site is going on")
        job = Job(next(self._ids), site_id, kind)
        self.jobs[job.id] = job
        task = asyncio.create_task(self._run(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: Job, work: Work) -> None:
        def progress(done: int, total: int) -> None:
            job.done, job.total = done, total
            self.version += 1

        try:
            job.message = await asyncio.to_thread(work, progress)
            job.state = "done"
        except Exception as exc:  # noqa: BLE001 - shown to the user, never lost
            log.warning("%s of %s failed: %s", job.kind, job.site, exc)
            job.state, job.message = "failed", str(exc) or type(exc).__name__
        self.version += 1

    async def close(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
