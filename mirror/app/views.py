"""The app's pages: Jinja2 templates (autoescaped) and the pure formatting they use."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime

import jinja2
from markupsafe import Markup, escape

from mirror.app.status import at_text
from mirror.model import exit_meaning
from mirror.run.report import human_bytes

STATE_CLASS = {
    "running": "run", "starting": "run", "busy": "run", "idle": "ok", "never run": "none",
    "interrupted": "warn", "failed": "bad", "broken": "bad", "verifying": "run",
}


def duration(seconds: float | None) -> str:
    """'4.2 s', '3 min 05 s', '2 h 07 min'."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def ago(iso: str | None, now: float | None = None) -> str:
    """'5 min ago' for a run time (YYYY-mm-ddTHH:MM:SSZ); the time itself after a week."""
    if not iso:
        return ""
    iso = re.sub(r"\.\d+Z$", "Z", iso)  # a WARC-Date may have fractions of a second
    try:
        then = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return iso
    seconds = max((time.time() if now is None else now) - then, 0.0)
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600),
                              (7 * 86400, "d", 86400)):
        if seconds < limit:
            return f"{int(seconds // size)} {unit} ago"
    return utc_text(iso)


def utc_text(iso: str | None) -> str:
    """'2026-11-27 22:24:17 UTC' for a run time (YYYY-mm-ddTHH:MM:SSZ), as history and
    compare show times; anything else as it is."""
    if not iso or not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", iso):
        return iso or ""
    return re.sub(r"\.\d+Z$", "Z", iso).replace("T", " ").removesuffix("Z") + " UTC"


def exit_text(code: int | None, failure: str | None = None) -> str:
    """'exit 3 (some URLs failed)'; 'exit 3 (run failed)' when the run's report says it
    failed (runhealth: it stored no page, ...) whatever its code."""
    if code is None:
        return ""
    return f"exit {code} ({'run failed' if failure else exit_meaning(code) or 'error'})"


def highlight(text: str, spans: Iterable[tuple[int, int]]) -> Markup:
    """`text` with its `spans` ([start, end) offsets) in <mark>. The text is an archived
    page's, so hostile: every piece of it is escaped, and only the marks are markup."""
    out: list[str] = []
    at = 0
    for start, end in sorted(spans):
        start, end = max(start, at), min(end, len(text))  # overlapping or out of range
        if start >= end:
            continue
        out += [escape(text[at:start]), "<mark>", escape(text[start:end]), "</mark>"]
        at = end
    out.append(escape(text[at:]))
    return Markup("".join(out))


def clock(moment: datetime | None) -> str:
    """'today 03:15', 'Wed 03:15' within a week, else '2024-03-05 03:15'; '' for None."""
    return "" if moment is None else at_text(moment, datetime.now(moment.tzinfo))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mirror.app", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(bytes=human_bytes, duration=duration, ago=ago, exit=exit_text,
                       highlight=highlight, utc=utc_text,
                       state_class=lambda s: STATE_CLASS.get(str(s), "none"), clock=clock)
    return env
