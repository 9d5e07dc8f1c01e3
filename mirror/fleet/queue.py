"""The fleet's Procrastinate App: its connector, its two tasks (a site's run; the tick), the
timing the workers share, and deferring a run with the site's two locks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mirror.errors import UsageError

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger(__name__)

#: the tasks' names in procrastinate_jobs (stable: jobs already queued refer to them)
RUN_TASK = "mirror.fleet.run_site"
TICK_TASK = "mirror.fleet.tick"
#: the tick's queueing lock: at most one tick waits, whatever the number of workers
TICK_LOCK = "mirror:tick"


def site_lock(name: str) -> str:
    """A site's lock and queueing lock: never two runs of it, at most one waiting."""
    return f"site:{name}"


class TimingError(UsageError, ValueError):
    """--stall-after, --tick or --poll out of range (also a ValueError: cli catches one)."""


@dataclass(frozen=True)
class Timing:
    """How fast the fleet notices things; every worker of a fleet should use the same."""

    #: seconds without a heartbeat after which a worker's runs are handed to another
    stall_after: float = 30.0
    #: seconds between two ticks (due runs deferred, stalled runs handed over)
    tick: int = 60
    #: seconds between two looks for jobs when no notification came (Procrastinate's
    #: LISTEN/NOTIFY announces each new job; this is the fallback)
    poll: float = 5.0

    @property
    def heartbeat(self) -> float:
        """Seconds between a worker's heartbeats: three fit in `stall_after`."""
        return self.stall_after / 3

    @property
    def fence_after(self) -> float:
        """Seconds a run goes on while its worker cannot confirm it still owns the job:
        less than `stall_after`, so that it has stopped before another worker may take
        it."""
        return self.stall_after / 2

    def cron(self) -> str:
        """The tick as Procrastinate's cron (a 6th field for seconds)."""
        if self.tick < 60:
            return f"*/{self.tick} * * * * *"
        minutes = self.tick // 60
        return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"

    def check(self) -> None:
        if self.stall_after < 1:
            raise TimingError("--stall-after must be at least 1 second")
        if not (1 <= self.tick < 60 or (self.tick % 60 == 0 and 60 <= self.tick <= 3540)):
            raise TimingError("--tick must be 1-59 seconds or whole minutes up to 59 "
                             "(60, 120, ... 3540)")
        if self.poll <= 0:
            raise TimingError("--poll must be more than 0 seconds")


RunTask = Callable[..., Awaitable[Any]]
TickTask = Callable[..., Awaitable[Any]]


def new_app(dsn: str, *, run: RunTask | None = None, tick: TickTask | None = None,
            timing: Timing = Timing()) -> procrastinate.App:
    """The App on `dsn`. A worker gives `run` and `tick` (with their context); a command
    that only defers or reads gives neither (jobs are deferred by task name)."""
    import procrastinate

    from mirror.fleet.connector import new_connector

    # the pool's own wait for a connection (30 s by default) is one try of the connector's
    # reconnection loop: shorter, so that the give-up time is kept to within seconds
    app = procrastinate.App(connector=new_connector(
        conninfo=dsn, kwargs={"connect_timeout": 10}, min_size=1, max_size=8, timeout=10))
    if run is not None:
        app.task(name=RUN_TASK, pass_context=True)(run)
    if tick is not None:
        # before any waiting run: a tick takes the first free slot of any worker
        task = app.task(name=TICK_TASK, pass_context=True, queueing_lock=TICK_LOCK,
                        priority=10)(tick)
        # Procrastinate defers each tick once, whatever the number of workers
        # (procrastinate_periodic_defers); the tick holds no `lock`, so a tick that stalls
        # with its worker does not stop the next (procrastinate#1408)
        app.periodic(cron=timing.cron(), periodic_id="tick")(task)
    return app


def _deferrer(app: procrastinate.App, site: str, connection: Any) -> Any:
    lock = site_lock(site)
    return app.configure_task(RUN_TASK, lock=lock, queueing_lock=lock, connection=connection)


async def defer_run(app: procrastinate.App, site: str, reason: str, *, attempt: int = 1,
                    connection: Any = None) -> int:
    """Queue a run of `site` (`attempt`: the how-manieth try at one run, for the record);
    procrastinate.exceptions.AlreadyEnqueued when one waits already."""
    return int(await _deferrer(app, site, connection).defer_async(
        site=site, reason=reason, attempt=attempt))


def defer_run_sync(app: procrastinate.App, site: str, reason: str,
                   connection: Any = None) -> int:
    """defer_run for a command (no event loop)."""
    return int(_deferrer(app, site, connection).defer(site=site, reason=reason, attempt=1))
