"""The fleet page of `mirror ui --db`: the fleet read from its database (fleet/status.py)
and the little formatting its template needs. Read-only: the fleet is changed from the
command line (`mirror schedule ... --db`, `mirror worker`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mirror.app.views import duration
from mirror.run.report import human_bytes

#: seconds between two reloads of the page (a meta refresh: the page has no script of its own)
REFRESH = 5


def since(moment: dt.datetime | None, now: dt.datetime) -> str:
    """'12 s ago', '3 min ago', '2 h ago', else the date (UTC)."""
    if moment is None:
        return ""
    seconds = max((now - moment).total_seconds(), 0.0)
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // size)} {unit} ago"
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def until(moment: dt.datetime | None, now: dt.datetime) -> str:
    """'in 5 min', 'in 3 d', 'due now' (the tick queues it)."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    if seconds <= 0:
        return "due now"
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"in {int(seconds // size) or 1} {unit}"
    return f"in {int(seconds // 86400)} d"


def local(moment: dt.datetime | None) -> str:
    """The moment on this machine's clock: '2024-03-05 03:15'."""
    return "" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M")


def fleet_context(dsn: str, stall_after: float = 30.0) -> dict[str, Any]:
    """What fleet.html shows; `error` says why the fleet could not be read."""
    from mirror.fleet.db import FleetError
    from mirror.fleet.status import read
    from mirror.manifest.db import shown

    helpers = {"since": since, "until": until, "local": local, "bytes": human_bytes,
               "duration": duration, "refresh": REFRESH}
    try:
        fleet = read(dsn, stall_after)
    except FleetError as exc:
        return {"fleet": None, "error": str(exc), "database": shown(dsn, scheme=False),
                **helpers}
    except Exception as exc:  # noqa: BLE001 - psycopg's errors: the page says what happened
        return {"fleet": None, "error": f"{type(exc).__name__}: {exc}",
                "database": shown(dsn, scheme=False), **helpers}
    return {"fleet": fleet, "error": "", "database": fleet.database, **helpers}
