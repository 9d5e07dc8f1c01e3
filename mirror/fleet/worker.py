"""`mirror worker`: a Procrastinate worker on this machine that runs the fleet's site runs
(and its ticks) with `concurrency` runs at once, each in its own folder under `data`."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror import __version__
from mirror.fleet import records
from mirror.fleet.connector import again
from mirror.fleet.db import connect
from mirror.fleet.job import Place, run_site
from mirror.fleet.queue import Timing, new_app
from mirror.fleet.registry import this_host
from mirror.fleet.tick import tick
from mirror.manifest.db import shown

if TYPE_CHECKING:
    import procrastinate
    from procrastinate.worker import Worker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerOptions:
    dsn: str
    data: Path
    concurrency: int = 1
    name: str = ""  # default: host:pid
    timing: Timing = Timing()


def fleet_app(options: WorkerOptions) -> procrastinate.App:
    """The App with this worker's tasks bound to its folder and timing."""
    place = Place(options.data, this_host(), options.timing)

    async def run(context: procrastinate.JobContext, site: str, reason: str = "",
                  attempt: int = 1) -> str:
        return await run_site(context, place, site, reason, attempt)

    async def periodic_tick(context: procrastinate.JobContext, timestamp: int) -> Any:
        # a tick cut by a lost connection runs again whole (each half is one transaction,
        # and what one that did commit did is not done twice: connector.py)
        return await again(context.app.connector.outages,  # type: ignore[attr-defined]
                           lambda: tick(context.app, options.timing.stall_after), "the tick")

    return new_app(options.dsn, run=run, tick=periodic_tick, timing=options.timing)


async def serve(options: WorkerOptions, say: Callable[[str], None]) -> int:
    """Run the worker until SIGINT/SIGTERM: then each run it has is stopped as Ctrl-C
    stops a run (in-flight fetches finish, files close) and queued again, to resume from
    what it uploaded on whichever worker takes it."""
    from procrastinate.worker import Worker

    options.data.mkdir(parents=True, exist_ok=True)
    asyncio.get_running_loop().set_exception_handler(_handed_over)
    # the schema in place (Procrastinate's and mirror's), and a clear FleetError now if the
    # database cannot be reached
    await asyncio.to_thread(lambda: connect(options.dsn).close())
    app = fleet_app(options)
    name = options.name or f"{this_host()}:{os.getpid()}"
    async with app.open_async():
        # what App.run_worker_async does, keeping the Worker to learn its id
        worker = Worker(
            app=app, name=name, concurrency=options.concurrency, wait=True,
            # a stopping worker hands its runs back at once (they are stopped gracefully
            # and queued again) rather than waiting for crawls that may take hours
            shutdown_graceful_timeout=0,
            update_heartbeat_interval=options.timing.heartbeat,
            stalled_worker_timeout=options.timing.stall_after,
            fetch_job_polling_interval=options.timing.poll,
            abort_job_polling_interval=options.timing.poll,
            # finished runs are recorded in mirror_fleet_runs; failed jobs stay to be seen
            delete_jobs="successful")
        announced = asyncio.create_task(_announce(app, worker, name, options, say))
        try:
            await worker.run()  # type: ignore[no-untyped-call]
        finally:
            announced.cancel()
    say(f"mirror worker {name}: stopped")
    return 0


async def _announce(app: procrastinate.App, worker: Worker, name: str,
                    options: WorkerOptions, say: Callable[[str], None]) -> None:
    while worker.worker_id is None:
        await asyncio.sleep(0.05)
    await records.announce_worker(app, worker.worker_id, name=name, host=this_host(),
                                  pid=os.getpid(), data_dir=str(options.data),
                                  concurrency=options.concurrency, version=__version__)
    say(f"mirror worker {name}: worker {worker.worker_id} of the fleet at "
        f"{shown(options.dsn, scheme=False)}, {options.concurrency} run(s) at once in "
        f"{options.data}")


def _handed_over(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A job this worker lost (the fleet handed it to another) cannot be finished by it:
    Procrastinate's attempt fails in a task nobody awaits. Say so in one line."""
    task, exc = context.get("future"), context.get("exception")
    if (isinstance(task, asyncio.Task) and task.get_name().startswith("process job ")
            and exc is not None and 'not in "doing"' in str(exc.__cause__ or exc)):
        log.warning("%s: handed over to another worker while it ran; this worker does not "
                    "record its end", task.get_name().removeprefix("process job "))
        return
    loop.default_exception_handler(context)
