"""Politeness arithmetic (P1): Retry-After parsing, per-host backoff with jitter, host delay."""

from __future__ import annotations

import math
import random
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

#: statuses that slow the whole host down, not just the URL that got them
BACKOFF_STATUSES = frozenset({429, 503})
#: longest backoff a host gets from its own failures (a Retry-After may ask for more)
HOST_BACKOFF_CAP = 300.0

# RFC 9110 delay-seconds is 1*DIGIT; a fraction ("1.5") is accepted too, as browsers do.
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(value: str | None, now: datetime, cap: float) -> float | None:
    """Seconds to wait from a Retry-After header value, clamped to [0, cap]; None if unusable.

    The value is delay-seconds or an HTTP-date (IMF-fixdate, RFC 850 or asctime, RFC 9110
    section 10.2.3); a date in the past gives 0. A date without a zone, and a naive `now`,
    are taken as UTC. Negative numbers, NaN, empty values and anything else -> None.
    """
    if value is None or not (text := value.strip()):
        return None
    seconds = float(text) if _SECONDS.fullmatch(text) else _seconds_until(text, now)
    if seconds is None or math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), cap)  # float("9" * 400) is inf: a long wait, cut to cap


def _seconds_until(text: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return (_aware(when) - _aware(now)).total_seconds()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def host_backoff(
    failures: int,
    retry_after: float | None,
    rng: random.Random,
    base: float = 1.0,
    cap: float = HOST_BACKOFF_CAP,
) -> float:
    """Seconds a host gets no request after its `failures`-th 429/503 in a row.

    min(cap, base * 2**(failures-1)) times a jitter factor in [0.5, 1.5), as the crawler's
    per-URL backoff, so that hosts (and runs) do not retry in step; never less than the
    server's own Retry-After (already clamped by parse_retry_after). No failures and no
    Retry-After: 0.
    """
    wait = 0.0
    if failures > 0:
        exponent = min(failures - 1, 64)  # 2**64 * base is past any cap; avoids overflow
        wait = min(cap, base * 2.0**exponent) * rng.uniform(0.5, 1.5)
    return max(wait, retry_after or 0.0)


def host_delay(configured: float, crawl_delay: float | None, cap: float) -> float:
    """Seconds between two request starts to a host: the configured delay, or the
    robots.txt Crawl-delay cut to `cap` when that is longer."""
    return max(configured, min(crawl_delay or 0.0, cap))
