"""One site run on a worker (the body of the run task): the site file written from its
registered text into the worker's folder, the archive restored from its store to the last
checkpoint, `mirror run --scheduled` as a child process, and the child fenced by the job:
while it runs, the worker checks that the job is still its own, and kills the child when
it is not (or when the database has not answered for `fence_after` seconds), before the
fleet may hand the site to another worker."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror.archive.lock import ArchiveLock, ArchiveLocked
from mirror.errors import MirrorError
from mirror.fleet import child, records
from mirror.fleet.queue import Timing, defer_run
from mirror.layout import ArchiveLayout
from mirror.model import SNAPSHOT_CODES, ExitCode, exit_meaning
from mirror.run.progressfile import read_progress

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger(__name__)

#: seconds a stopping run gets to finish its in-flight fetches and close its files, past
#: its own [crawl] stop_grace, before it is killed
STOP_MARGIN = 30.0
#: seconds a job waits for the archive's lock held by another process of this machine
LOCK_WAIT = 60.0


class RunFailed(MirrorError):
    """The site's run ended without a snapshot; str says how (the job fails with it)."""


class RunLost(MirrorError):
    """The job is no longer this worker's (the fleet handed it over): the child was killed."""


class RunUnfenced(RunLost):
    """The database did not answer for `fence_after` seconds: the child was killed (another
    worker may take the job); the job is still this worker's, and the run is queued again
    once the database answers."""


@dataclass(frozen=True)
class Place:
    """Where and how this worker runs sites."""

    data: Path  # --data: one folder per site under sites/
    host: str
    timing: Timing

    def folder(self, site: str) -> Path:
        return self.data / "sites" / site


def write_site_file(folder: Path, text: str) -> Path:
    """The registered site file, with its archive in `folder`/archive whatever the file
    said: on a worker the archive's home is the store, this folder its working copy."""
    import tomlkit

    doc = tomlkit.parse(text)
    site = doc.get("site")
    if site is None:
        site = tomlkit.table()
        doc["site"] = site
    site["output_dir"] = "archive"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "site.toml"
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)
    return path


def restore_archive(archive: Path, store_url: str) -> dict[str, Any]:
    """Bring the working copy to the store's last checkpoint (storesync.restore: the
    snapshot becomes the manifest, the files it names are downloaded unless here, others
    moved aside), under the archive's lock: a run of this site on this machine, from
    another process, would hold it. What was restored, for the run's record."""
    from mirror.store.objstore import open_store
    from mirror.store.sync import restore

    archive.mkdir(parents=True, exist_ok=True)
    with _archive_lock(archive):
        done = restore(archive, open_store(store_url))
    return {"checkpoint": done.restored, "captures": done.captures,
            "downloaded": len(done.downloaded), "kept": len(done.kept),
            "rolled_back": done.rolled_back, "aside": str(done.aside or "")}


@contextmanager
def _archive_lock(archive: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the archive's lock, waiting up to `wait` seconds for a process of this machine
    that still holds it (what a stopped run left behind finishing)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            lock = ArchiveLock(archive).__enter__()
            break
        except ArchiveLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def ensure_stored(archive: Path, store_url: str) -> tuple[bool, dict[str, Any]]:
    """After a run that made a snapshot: is it in the store? The run's own last push says
    so in its report; when it does not (the store could not be reached, or the run was not
    waited for), the worker pushes once more. A job succeeds only when its archive is safe
    in the store, since that is the only copy another worker will see. ([retention]: the
    run pushes again itself after it pruned.)"""
    import json

    from mirror.schedule.listing import last_run
    from mirror.store.objstore import open_store
    from mirror.store.sync import push

    layout = ArchiveLayout(archive)
    last = last_run(archive)
    try:
        said = json.loads(layout.report(last.id).read_text(encoding="utf-8"))["store"] \
            if last is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        said = None
    if isinstance(said, dict) and said.get("complete"):
        return True, said
    with _archive_lock(archive):
        result = push(archive, open_store(store_url))
    for line in result.lines():
        log.info("%s", line)
    return result.complete, result.as_dict()


def outcome(code: int) -> tuple[str, str]:
    """A run's exit code as (state, words)."""
    if code < 0:
        return "failed", f"killed by signal {-code}"
    words = exit_meaning(code) or f"exit {code}"
    if code in SNAPSHOT_CODES:
        return "complete", words
    if code == ExitCode.INTERRUPTED:
        return "interrupted", f"{words} (resumable)"
    return "failed", words


async def run_site(context: procrastinate.JobContext, place: Place, site: str,
                   reason: str = "", attempt: int = 1) -> str:
    """The run task: what happened, in one line (the job's result)."""
    app, job = context.app, context.job
    assert job.id is not None
    registration = await records.site(app, site)
    if registration is None:
        log.warning("%s: not registered in the fleet (any more): nothing to run", site)
        return "not registered"
    folder = place.folder(site)
    site_file = await asyncio.to_thread(write_site_file, folder, registration.toml)
    archive = folder / "archive"
    run = await records.start_run(app, site=site, job_id=job.id, attempt=attempt,
                                  reason=reason, worker_id=job.worker_id, host=place.host,
                                  pid=os.getpid())
    proc: asyncio.subprocess.Process | None = None
    try:
        restored = await asyncio.to_thread(restore_archive, archive, registration.store)
        await records.update_run(app, run, restored=restored)
        proc = await child.start(child.run_argv(site_file), cwd=folder,
                                 log_file=folder / "run.log")
        await records.update_run(app, run, state="running", pid=proc.pid)
        log.info("%s: run started (job %d, attempt %d, %s; restored %s captures)", site,
                 job.id, attempt, reason or "no reason given", restored["captures"])
        code = await _supervise(app, proc, job.id, job.worker_id, place.timing, run, archive)
        state, words = outcome(code)
        said = child.tail(folder / "run.log")
        if state == "complete":
            stored, pushed = await asyncio.to_thread(ensure_stored, archive,
                                                     registration.store)
            await records.update_run(app, run, checkpoint=pushed, checkpoint_at=_now())
            if not stored:
                state, words = "failed", (f"the run's archive is not all in its store "
                                          f"{registration.store}: "
                                          f"{pushed.get('error') or pushed}")
                said = f"{said}\n{words}".strip()
    except asyncio.CancelledError:
        await _stopped(context, place, run, site, proc, attempt, registration.store)
        raise
    except RunLost as exc:
        await records.finish_run(app, run, "lost", proc.returncode if proc else None, str(exc))
        if isinstance(exc, RunUnfenced):  # the database is back (finish_run got through)
            await _queue_again(app, site, f"resumed (the fleet database was unreachable "
                                          f"from {place.host})", attempt)
        raise
    except Exception as exc:
        await records.finish_run(app, run, "failed", proc.returncode if proc else None,
                                 f"{type(exc).__name__}: {exc}")
        raise
    await records.finish_run(app, run, state, code, said or words)
    if state != "complete":
        log.warning("%s: run failed: %s (exit %d)", site, words, code)
        raise RunFailed(f"{site}: {words} (exit {code})")
    log.info("%s: %s (exit %d)", site, words, code)
    return f"{site}: {words}"


def _now() -> Any:
    import datetime as dt

    return dt.datetime.now(dt.UTC)


async def _supervise(app: procrastinate.App, proc: asyncio.subprocess.Process, job_id: int,
                     worker_id: int | None, timing: Timing, run: int, archive: Path) -> int:
    """Wait for the child, checking every heartbeat that the job is still this worker's;
    its exit code, or RunLost (the child killed) when it is not."""
    waiter = asyncio.ensure_future(proc.wait())
    confirmed = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({waiter}, timeout=timing.heartbeat)
            if done:
                child.kill(proc)  # a helper it left behind
                return waiter.result()
            try:
                owner = await asyncio.wait_for(records.job_owner(app, job_id),
                                               timing.heartbeat)
            except Exception as exc:  # noqa: BLE001 - the database did not answer
                if time.monotonic() - confirmed > timing.fence_after:
                    await _kill(proc, waiter)
                    raise RunUnfenced(f"the fleet database did not answer for "
                                  f"{timing.fence_after:g} s ({type(exc).__name__}): the run "
                                  "was stopped, another worker may take it over") from exc
                continue
            confirmed = time.monotonic()
            if owner != ("doing", worker_id):
                await _kill(proc, waiter)
                raise RunLost(f"job {job_id} is no longer this worker's ({owner}): the run "
                              "was stopped")
            await _note_progress(app, run, archive)
    finally:
        if not waiter.done():
            waiter.cancel()


async def _kill(proc: asyncio.subprocess.Process, waiter: asyncio.Future[int]) -> None:
    child.kill(proc)
    await asyncio.shield(waiter)


async def _note_progress(app: procrastinate.App, run: int, archive: Path) -> None:
    live = read_progress(ArchiveLayout(archive).progress)
    if live is not None:
        await records.update_run(app, run, progress=dataclasses.asdict(live))


async def _stopped(context: procrastinate.JobContext, place: Place, run: int, site: str,
                   proc: asyncio.subprocess.Process | None, attempt: int,
                   store_url: str) -> None:
    """The job was cancelled: the worker stops (the run goes back to the queue, to resume
    from what it uploaded) or someone aborted the job (it stays stopped). A run stopped
    gracefully closed its files: they and a snapshot are pushed, so that the next attempt
    fetches nothing again."""
    from procrastinate.job_context import AbortReason

    code = await child.stop(proc, _grace(place, site)) if proc is not None else None
    shutdown = context.abort_reason() == AbortReason.SHUTDOWN
    note = "the worker stopped" if shutdown else "aborted"
    if code == ExitCode.INTERRUPTED:
        try:
            _, pushed = await asyncio.to_thread(ensure_stored, place.folder(site) / "archive",
                                                store_url)
            await records.update_run(context.app, run, checkpoint=pushed,
                                     checkpoint_at=_now())
        except Exception as exc:  # noqa: BLE001 - the last checkpoint stays the one to resume
            log.warning("%s: could not push the stopped run: %s", site, exc)
    await records.finish_run(context.app, run, "interrupted", code, note)
    if shutdown:
        await _queue_again(context.app, site, f"resumed ({note} on {place.host})", attempt)


async def _queue_again(app: procrastinate.App, site: str, reason: str, attempt: int) -> None:
    """Queue the site's run again (it resumes from its last checkpoint once this job has
    ended and freed the site's lock); a run already waiting resumes it instead."""
    from procrastinate.exceptions import AlreadyEnqueued

    try:
        job = await defer_run(app, site, reason, attempt=attempt + 1)
        log.warning("%s: %s; queued again (job %d)", site, reason, job)
    except AlreadyEnqueued:
        log.warning("%s: %s; the run already waiting resumes it", site, reason)


def _grace(place: Place, site: str) -> float:
    from mirror.config import ConfigError, load_config

    try:
        return load_config(place.folder(site) / "site.toml").crawl.stop_grace + STOP_MARGIN
    except ConfigError:
        return STOP_MARGIN
