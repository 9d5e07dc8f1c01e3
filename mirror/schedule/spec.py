"""A schedule ("hourly", "daily 03:15", "weekly sun 04:00" or a 5-field cron expression):
parsed and checked, its next run after a given time, and the forms cron and systemd read.
Pure: no clock, no I/O (the caller passes "now")."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from mirror.errors import UsageError

WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron's numbers: 0 = Sunday
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
FULL_WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
NAMED = ("hourly", "daily", "weekly")
#: what a schedule may be, for messages
FORMS = '"hourly", "daily HH:MM", "weekly DAY HH:MM" or a 5-field cron expression'
#: the longest wait between two runs that next_run searches: a Feb 29 that falls on a given
#: weekday comes back within 40 years (28, or 40 across a century's missing leap day)
_HORIZON = dt.timedelta(days=366 * 41)


class ScheduleError(UsageError, ValueError):
    """A schedule that cannot be used; str is the whole reason, e.g.
    "invalid schedule 'daily 25:00': the hour must be 0-23, found 25"."""


@dataclass(frozen=True)
class _Spec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names of low, low + 1, ...


_FIELDS = (_Spec("minute", 0, 59), _Spec("hour", 0, 23), _Spec("day of month", 1, 31),
           _Spec("month", 1, 12, MONTHS), _Spec("day of week", 0, 7, WEEKDAYS + ("sun",)))


@dataclass(frozen=True)
class Schedule:
    """When runs start, on the local wall clock: the sets of minutes, hours, days of the
    month, months and weekdays (0 = Sunday) at which cron would start one.

    cron's rule for the two day fields holds: when both are restricted (neither begins
    with "*"), a day matches if either matches; otherwise both must match.
    """

    text: str  # canonical: "hourly", "daily 03:15", "weekly sun 04:00", or the cron fields
    cron: str  # the five cron fields that say the same
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    either_day: bool = False  # cron's OR rule applies (both day fields restricted)

    def __str__(self) -> str:
        return self.text

    def runs_on(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        by_date, by_weekday = day.day in self.days, day.isoweekday() % 7 in self.weekdays
        return (by_date or by_weekday) if self.either_day else (by_date and by_weekday)

    def on_calendar(self) -> tuple[str, ...]:
        """systemd OnCalendar= values (a timer fires on any of them): one, or two for
        cron's OR of the day fields, which systemd (weekday AND date) cannot say in one."""
        clock = f"{_list(self.hours, 0, 23)}:{_list(self.minutes, 0, 59)}:00"
        months, days = _list(self.months, 1, 12), _list(self.days, 1, 31)
        if self.either_day:
            return (f"*-{months}-{days} {clock}",
                    f"{_weekdays(self.weekdays)}*-{months}-* {clock}")
        return (f"{_weekdays(self.weekdays)}*-{months}-{days} {clock}",)


def _list(values: frozenset[int], low: int, high: int) -> str:
    if values == frozenset(range(low, high + 1)):
        return "*"
    return ",".join(f"{v:02d}" for v in sorted(values))


def _weekdays(values: frozenset[int]) -> str:
    """The weekday part with its space, "" for every day (systemd has no "*" there)."""
    if len(values) == 7:
        return ""
    return ",".join(WEEKDAYS[v].title() for v in sorted(values)) + " "


# --- parsing -----------------------------------------------------------------------------------


def parse_schedule(text: str) -> Schedule:
    """A schedule from its text; ScheduleError says what is wrong."""
    words = text.split()
    if not words:
        raise ScheduleError(f"expected {FORMS}, found an empty schedule")
    if words[0].lower() in NAMED:
        schedule = _named([w.lower() for w in words], text)
    elif len(words) == 5:
        schedule = _cron(words, text)
    else:
        import difflib  # only a wrong schedule comes here

        close = difflib.get_close_matches(words[0].lower(), NAMED, n=1)
        hint = f"; did you mean {close[0]!r}?" if close and len(words) < 5 else ""
        if re.match(r"[0-9*]", words[0]):
            hint = (f"; a cron expression has 5 fields (minute hour day-of-month month "
                    f"day-of-week), this has {len(words)}")
        raise ScheduleError(f"expected {FORMS}, found {text!r}{hint}")
    if next_run(schedule, dt.datetime(2000, 1, 1)) is None:
        raise ScheduleError(f"invalid cron expression {text!r}: it never runs (no month "
                            "in it has those days)")
    return schedule


_USAGE = {"hourly": ("hourly", "hourly"), "daily": ("daily HH:MM", "daily 03:15"),
          "weekly": ("weekly DAY HH:MM", "weekly sun 04:00")}


def _named(words: list[str], text: str) -> Schedule:
    kind, args = words[0], words[1:]
    usage, example = _USAGE[kind]
    if len(args) != len(usage.split()) - 1:
        raise ScheduleError(f"invalid schedule {text!r}: expected {usage!r}, such as "
                            f"{example!r}")
    if kind == "hourly":
        return _from_cron("hourly", "0 * * * *")
    try:
        hour, minute = _clock(args[-1])
        weekday = _weekday(args[0]) if kind == "weekly" else None
    except ScheduleError as exc:
        raise ScheduleError(f"invalid schedule {text!r}: {exc}") from None
    if weekday is None:
        return _from_cron(f"daily {hour:02d}:{minute:02d}", f"{minute} {hour} * * *")
    return _from_cron(f"weekly {WEEKDAYS[weekday]} {hour:02d}:{minute:02d}",
                      f"{minute} {hour} * * {weekday}")


def _clock(word: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d{1,2}):(\d{2})", word)
    if not found:
        raise ScheduleError(f"expected a time HH:MM such as 03:15, found {word!r}")
    hour, minute = int(found[1]), int(found[2])
    if hour > 23:
        raise ScheduleError(f"the hour must be 0-23, found {hour}")
    if minute > 59:
        raise ScheduleError(f"the minute must be 0-59, found {minute}")
    return hour, minute


def _weekday(word: str) -> int:
    for names in (WEEKDAYS, FULL_WEEKDAYS):
        if word in names:
            return names.index(word)
    raise ScheduleError(f"expected a day of the week (sun, mon, tue, wed, thu, fri, sat), "
                        f"found {word!r}")


def _from_cron(text: str, cron: str) -> Schedule:
    return _cron(cron.split(), cron, text=text)


def _cron(words: list[str], written: str, *, text: str | None = None) -> Schedule:
    sets = []
    for word, spec in zip(words, _FIELDS, strict=True):
        try:
            sets.append(_field(word, spec))
        except ScheduleError as exc:
            raise ScheduleError(f"invalid cron expression {written!r}: {spec.name} field "
                                f"{word!r}: {exc}") from None
    minutes, hours, days, months, weekdays = sets
    cron = " ".join(words)
    return Schedule(text or cron, cron, minutes, hours, days, months,
                    frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
                    either_day=not words[2].startswith("*") and not words[4].startswith("*"))


def _field(word: str, spec: _Spec) -> frozenset[int]:
    """One cron field: a list of *, N, N-M, each with an optional /STEP (as Debian's cron
    reads them; N/STEP without a range is refused, as Debian's crontab does)."""
    values: set[int] = set()
    for part in word.split(","):
        span, slash, step_text = part.partition("/")
        step = _step(step_text) if slash else 1
        if span == "*":
            low, high = spec.low, spec.high
        elif "-" in span:
            first, _, last = span.partition("-")
            low, high = _value(first, spec), _value(last, spec)
            if low > high:
                raise ScheduleError(f"the range {span!r} runs backwards")
        elif slash:
            raise ScheduleError(f"a step needs a range: write {span}-{spec.high}/{step_text} "
                                f"or */{step_text}")
        else:
            low = high = _value(span, spec)
        values.update(range(low, high + 1, step))
    return frozenset(values)


def _step(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise ScheduleError(f"expected a step of 1 or more after '/', found {text!r}")
    return int(text)


def _value(text: str, spec: _Spec) -> int:
    if text.isdigit():
        value = int(text)
        if not spec.low <= value <= spec.high:
            raise ScheduleError(f"{value} is out of range {spec.low}-{spec.high}")
        return value
    if text.lower() in spec.names:
        return spec.low + spec.names.index(text.lower())
    if spec.names:
        names = ", ".join(dict.fromkeys(spec.names))
        raise ScheduleError(f"expected a number {spec.low}-{spec.high} or a name ({names}), "
                            f"found {text!r}")
    raise ScheduleError(f"expected a number {spec.low}-{spec.high}, found {text!r}")


# --- when ------------------------------------------------------------------------------------


def next_run(schedule: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first minute strictly after `after` at which the schedule starts a run, on
    `after`'s wall clock and with its tzinfo (naive in, naive out). None if it never runs.

    Wall-clock arithmetic, as cron and systemd count: on the night a DST change skips or
    repeats an hour, a time in that hour is returned as the wall clock shows it.
    """
    start = after.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    times = sorted(dt.time(h, m) for h in schedule.hours for m in schedule.minutes)
    day, last = start.date(), (start + _HORIZON).date()
    while day <= last:
        if schedule.runs_on(day):
            for at in times:
                candidate = dt.datetime.combine(day, at, tzinfo=after.tzinfo)
                if candidate >= start:
                    return candidate
        day += dt.timedelta(days=1)
    return None


def period(schedule: Schedule, at: dt.datetime) -> dt.timedelta:
    """The time between the first two runs after `at`: a day for "daily", an hour for
    "hourly", whatever a cron expression makes of that moment."""
    first = next_run(schedule, at)
    second = next_run(schedule, first) if first else None
    if first is None or second is None:
        raise ValueError(f"{schedule.text!r} never runs")
    return second - first
