"""When a fleet site's next run is due: its schedule read on the wall clock of the time zone
it was registered from, as an instant, so that every worker's clock agrees on it. Pure: the
caller passes "now"."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mirror.errors import MirrorError
from mirror.schedule.spec import Schedule, next_run

UTC = dt.UTC


class ZoneError(MirrorError, ValueError):
    """A time zone name that this machine's zone database does not know."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ZoneError(f"unknown time zone {name!r} (an IANA name such as "
                        "'Europe/Paris' or 'UTC')") from None


def next_due(schedule: Schedule, zone_name: str, after: dt.datetime) -> dt.datetime:
    """The first start of `schedule` strictly after the instant `after` (aware), on the
    wall clock of `zone_name`, in UTC. A wall time that a DST change repeats counts once
    (its first occurrence); one that it skips starts an hour later, as cron does."""
    if after.tzinfo is None:
        raise ValueError("next_due needs an aware datetime")
    wall = after.astimezone(zone(zone_name))
    candidate = next_run(schedule, wall)
    # around a DST fall-back, the next wall time may still be an earlier instant: go on
    while candidate is not None and candidate.astimezone(UTC) <= after:
        candidate = next_run(schedule, candidate)
    if candidate is None:
        raise ValueError(f"{schedule.text!r} never runs")
    return candidate.astimezone(UTC)
