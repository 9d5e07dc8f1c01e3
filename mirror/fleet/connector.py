"""The fleet's Procrastinate connector, made to outlast a PostgreSQL restart (a failover, a
network blip): every query of the worker (Procrastinate's fetch, heartbeat, job status,
LISTEN; mirror's own rows, records.py) that meets a lost connection waits (asyncio, the
event loop goes on: the runs' children are supervised meanwhile) and runs again on a new
connection of the pool, with the manifest's backoff and jitter (manifest/reconnect.py),
until the database answers or $MIRROR_DB_GIVE_UP seconds (default 600) have passed: then
FleetDatabaseLost, and the worker stops.

Procrastinate 3.10 alone does not: a lost connection fails the heartbeat side task (the
worker stops), or the fetch loop (the worker stops), or a job's status update (the job
stays "doing"); and its LISTEN loop reconnects only while the server answers at once.

Running a query again is safe when it did not commit. One whose answer was lost but which
did commit is told apart where it matters: a fetch that took a job (the job is "doing"
under this worker, and the worker never saw it: it is returned now rather than left
behind), and a finish or retry of a job that already happened (the job is no longer
"doing": done). Deferring a run again meets its queueing lock (AlreadyEnqueued), which the
callers already take as "a run waits"."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mirror.manifest.db import ManifestWriteError
from mirror.manifest.reconnect import LOST_STATES, give_up_after, waits

if TYPE_CHECKING:
    from procrastinate import PsycopgConnector as _Base
else:
    _Base = object  # the connector is made by new_connector (procrastinate imported there)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: a job fetched under this worker whose answer was lost: "doing", never handed out
_ORPHAN = ("SELECT id, status, task_name, priority, lock, queueing_lock, args, scheduled_at, "
           "queue_name, attempts, worker_id FROM procrastinate_jobs WHERE status = 'doing' "
           "AND worker_id = %(worker_id)s AND NOT (id = ANY(%(known)s)) ORDER BY id LIMIT 1")


class FleetDatabaseLost(ManifestWriteError):
    """The fleet's database did not come back within the give-up time: the worker stops
    (its runs are killed with it; the fleet hands them over once the database is back)."""


def lost(exc: BaseException) -> bool:
    """Whether `exc` (a psycopg error, or Procrastinate's ConnectorException around one)
    means the connection is gone or cannot be made now: psycopg's OperationalError (a
    closed connection, a refused connect, the pool's time-out) or a server that ends its
    sessions (LOST_STATES, class 08)."""
    import psycopg

    cause = _cause(exc)
    state = getattr(cause, "sqlstate", None) or ""
    return isinstance(cause, psycopg.OperationalError) or state in LOST_STATES \
        or state.startswith("08")


def _cause(exc: BaseException) -> BaseException:
    from procrastinate.exceptions import ConnectorException

    return (exc.__cause__ or exc) if isinstance(exc, ConnectorException) else exc


def words(exc: BaseException) -> str:
    return " ".join(str(_cause(exc)).split()) or type(exc).__name__


@dataclass
class Outages:
    """One worker's view of its database's outages: the first query that meets one logs
    the loss, the first that gets through after it logs the reconnection."""

    give_up: float = field(default_factory=give_up_after)
    since: float | None = None  # monotonic time of the loss, while it lasts
    tries: int = 0
    count: int = 0  # outages met so far

    def met(self, exc: BaseException) -> float:
        """A query met a lost connection; the seconds left before giving up."""
        now = time.monotonic()
        if self.since is None:
            self.since, self.tries = now, 0
            self.count += 1
            log.warning("database connection lost: %s; trying again", words(exc))
        self.tries += 1
        return self.give_up - (now - self.since)

    def over(self) -> None:
        if self.since is not None:
            log.warning("database connection lost and made again: reconnected after %.1f s "
                        "(%d tries)", time.monotonic() - self.since, self.tries)
            self.since = None


async def again(outages: Outages, call: Callable[[], Awaitable[T]], what: str) -> T:
    """`call()` until it gets through, waiting between tries while the connection is lost;
    FleetDatabaseLost after the give-up time."""
    for wait in waits():
        try:
            result = await call()
        except Exception as exc:
            if not lost(exc):
                raise
            left = outages.met(exc)
            if left <= 0:
                raise FleetDatabaseLost(
                    f"the fleet database: connection lost ({words(exc)}) and not back after "
                    f"{outages.give_up:g} s ({what}): gave up") from None
            await asyncio.sleep(min(wait, left))
            continue
        outages.over()
        return result
    raise AssertionError("unreachable")  # waits() never ends


def new_connector(**kwargs: Any) -> Any:
    """A PsycopgConnector (its arguments: the pool's) whose queries and LISTEN outlast a
    lost connection."""
    from procrastinate import PsycopgConnector

    kind = type("ReconnectingConnector", (Reconnecting, PsycopgConnector), {})
    return kind(**kwargs)


class Reconnecting(_Base):
    """What new_connector adds to Procrastinate's PsycopgConnector (see above)."""

    def __init__(self, **kwargs: Any) -> None:
        from procrastinate import sql

        super().__init__(**kwargs)
        self.outages = Outages()
        self._handed: set[int] = set()  # job ids fetch_job returned to this worker
        #: Procrastinate's statements whose lost answer is looked up, not assumed undone
        self._fetch = sql.queries["fetch_job"]
        self._ends = (sql.queries["finish_job"], sql.queries["retry_job"])

    async def execute_query_async(self, query: Any, **arguments: Any) -> None:
        call = super().execute_query_async
        if query in self._ends:  # finish_job, retry_job
            await self._end(call, query, arguments)
            return
        await again(self.outages, lambda: call(query, **arguments), "a query")

    async def execute_query_all_async(self, query: Any, **arguments: Any) -> list[dict[str, Any]]:
        call = super().execute_query_all_async
        return await again(self.outages, lambda: call(query, **arguments), "a query")

    async def execute_query_one_async(self, query: Any, **arguments: Any) -> dict[str, Any]:
        call = super().execute_query_one_async
        if query == self._fetch:
            return await self._fetched(call, query, arguments)
        return await again(self.outages, lambda: call(query, **arguments), "a query")

    async def _fetched(self, call: Callable[..., Awaitable[dict[str, Any]]], query: Any,
                     arguments: dict[str, Any]) -> dict[str, Any]:
        """fetch_job; after a loss, a job it took whose answer was lost first."""
        count = self.outages.count

        async def fetch() -> dict[str, Any]:
            if self.outages.count != count:  # a loss since the first try
                found = await self._orphan(arguments["worker_id"])
                if found is not None:
                    log.warning("job %d was taken by this worker by a fetch whose answer "
                                "was lost with the connection: it runs now", found["id"])
                    return found
            return await call(query, **arguments)

        row = await again(self.outages, fetch, "fetching a job")
        if row.get("id") is not None:
            self._handed.add(int(row["id"]))
        return row

    async def _orphan(self, worker_id: int) -> dict[str, Any] | None:
        from psycopg.rows import dict_row

        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_ORPHAN, {"worker_id": worker_id, "known": list(self._handed)})
            return await cur.fetchone()

    async def _end(self, call: Callable[..., Awaitable[Any]], query: Any,
                   arguments: dict[str, Any]) -> Any:
        """finish_job / retry_job; after a loss, one that is refused because the job is no
        longer "doing" had happened (its answer was lost)."""
        count = self.outages.count
        try:
            return await again(self.outages, lambda: call(query, **arguments), "ending a job")
        except Exception as exc:
            if self.outages.count == count or 'not in "doing"' not in words(exc):
                raise
            log.warning("job %s: its status was written before the connection was lost "
                        "(%s)", arguments.get("job_id"), words(exc))
            return None

    async def _loop_notify(self, on_notification: Any, connection: Any,
                           timeout: float = 30.0) -> None:  # Procrastinate's LISTEN_TIMEOUT
        """Procrastinate's wait for notifications, which returns only when its connection
        is dead (and is made again at once, silently): the loss is logged here, the
        reconnection by the next query that gets through (the pool replaces its dead
        connections without a word)."""
        await super()._loop_notify(on_notification, connection, timeout)
        self.outages.met(ConnectionError("the connection that listens for new jobs was "
                                         "closed by the server"))

    async def listen_notify(self, on_notification: Any, channels: Iterable[str]) -> None:
        """Procrastinate's LISTEN loop, started again after a lost connection (new jobs
        are found by polling meanwhile)."""
        listen = super().listen_notify
        channels = list(channels)
        while True:
            await again(self.outages, lambda: listen(on_notification, channels),
                        "listening for jobs")
