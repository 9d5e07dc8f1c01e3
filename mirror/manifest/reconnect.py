"""A PostgreSQL connection lost and made again (a server restart, a failover, a network
blip): which errors mean the connection is gone, the waits between two tries (exponential
backoff with full jitter, bounded), and the loop that tries until the database answers or
GIVE_UP seconds have passed (then DatabaseGone, a ManifestWriteError: the run stops with
its exit code and words, and every later statement fails at once).

The loop sleeps in the calling thread, which for a shared run is the crawl's event loop:
while the database is away nothing else of the run goes on. That is on purpose: no
response could be stored nor any lease checked meanwhile, and the manifest's connection is
not made for other writes while it is being made again. The cost is the responses in
flight, which time out and are fetched again later (a retry, at most one per host slot).
The fleet's worker (fleet/connector.py) waits with asyncio instead: its runs are child
processes to supervise meanwhile.

What happens to the transaction that was cut is PostgresDb's (manifest/db.py): one cut
before its COMMIT was rolled back by the server and is run again (ManifestReconnected); one
whose COMMIT's answer was lost is looked up by its transaction id (pg_xact_status) and is
either done (it committed) or run again.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: seconds a worker keeps trying to reach its database again before it gives up
#: (ManifestWriteError); $MIRROR_DB_GIVE_UP overrides it (tests, impatient operators)
GIVE_UP = 600.0
GIVE_UP_ENV = "MIRROR_DB_GIVE_UP"
#: the first wait before trying again, and the longest (the waits double in between)
FIRST_WAIT = 0.1
LONGEST_WAIT = 5.0
#: SQLSTATEs of a connection the server ended or refuses for now: admin_shutdown,
#: crash_shutdown, cannot_connect_now (starting up, shutting down), and class 08
#: (connection exceptions)
LOST_STATES = ("57P01", "57P02", "57P03")


def give_up_after(env: dict[str, str] | None = None) -> float:
    """GIVE_UP, or $MIRROR_DB_GIVE_UP seconds when set to a positive number."""
    text = (os.environ if env is None else env).get(GIVE_UP_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return GIVE_UP
    return value if value > 0 else GIVE_UP


def waits(first: float = FIRST_WAIT, longest: float = LONGEST_WAIT,
          rand: Callable[[float, float], float] = random.uniform) -> Iterator[float]:
    """The waits between two tries: full jitter over an exponentially growing bound
    (first, 2*first, ... longest), so that workers that lost one server do not all knock
    at once when it is back."""
    bound = first
    while True:
        yield rand(0.0, bound)
        bound = min(bound * 2, longest)


def is_lost(exc: BaseException, conn: Any) -> bool:
    """Whether `exc` (a psycopg error) means the connection is gone: the connection says
    so (broken, closed), or the server ended it (LOST_STATES, class 08)."""
    if getattr(conn, "broken", False) or getattr(conn, "closed", False):
        return True
    state = getattr(exc, "sqlstate", None) or ""
    return state in LOST_STATES or state.startswith("08")


@dataclass(frozen=True)
class Outage:
    """One loss of the connection, once it is made again."""

    reason: str  # the driver's words for the loss
    seconds: float  # from the loss to the new connection
    tries: int  # connections tried


def reconnect(connect: Callable[[], Any], reason: str, *, give_up: float,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> tuple[Any, Outage]:
    """A new connection from `connect` (which raises on failure), tried with waits()
    between tries; TimeoutError (with the last failure's words) after `give_up` seconds."""
    start, tries, last = clock(), 0, reason
    for wait in waits():
        tries += 1
        try:
            conn = connect()
        except Exception as exc:  # noqa: BLE001 - any failure to connect: try again
            last = " ".join(str(exc).split()) or type(exc).__name__
        else:
            return conn, Outage(reason, clock() - start, tries)
        left = give_up - (clock() - start)
        if left <= 0:
            raise TimeoutError(last)
        sleep(min(wait, left))
    raise AssertionError("unreachable")  # waits() never ends
