"""Politeness and retry policy (P1), pure: which answers are retried, exponential backoff
with jitter per URL and per host, Retry-After, host delay."""

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
#: answers tried again (and counted as failed if they persist)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: backoff between two tries of a URL: BACKOFF_BASE * 2**(try-1), capped, with jitter
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0

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
    wait = exponential(failures, rng, base, cap) if failures > 0 else 0.0
    return max(wait, retry_after or 0.0)


def exponential(n: int, rng: random.Random, base: float, cap: float) -> float:
    """The n-th wait (n >= 1) of an exponential backoff: min(cap, base * 2**(n-1)) times a
    jitter factor in [0.5, 1.5), so that URLs, hosts and runs do not retry in step."""
    exponent = min(max(n - 1, 0), 64)  # 2**64 * base is past any cap; avoids overflow
    return min(cap, base * 2.0**exponent) * rng.uniform(0.5, 1.5)


def backoff(tries: int, rng: random.Random, base: float = BACKOFF_BASE) -> float:
    """Seconds before try number `tries + 1` of one URL."""
    return exponential(tries, rng, base, BACKOFF_CAP)


def http_error(status: int, truncated: str | None) -> str | None:
    """Why an answer should be tried again (and counts as failed if it persists), if so."""
    if status in RETRY_STATUSES:
        return f"HTTP {status}"
    if truncated == "disconnect":
        return "disconnect: body cut short"
    return None


def retry_delay(tries: int, max_tries: int, retryable: bool, rng: random.Random,
                base: float = BACKOFF_BASE, at_least: float = 0.0) -> float | None:
    """Seconds until a URL that has now failed `tries` times is tried again, or None: give
    up (not retryable, or no tries left)."""
    if not retryable or tries >= max_tries:
        return None
    return max(backoff(tries, rng, base), at_least)


class HostBackoffs:
    """Each host's streak of 429/503 answers, and how long it is held back for it (P1)."""

    def __init__(self, rng: random.Random, base: float, max_retry_after: float) -> None:
        self.rng = rng
        self.base = base
        self.max_retry_after = max_retry_after
        self._failures: dict[str, int] = {}

    def answer(self, site: str, status: int, retry_after: str | None, now: datetime) -> float:
        """Seconds `site` gets no request after answering `status`: a 429/503 lengthens
        its streak (Retry-After honoured, clamped); any other answer ends it (0)."""
        if status not in BACKOFF_STATUSES:
            self._failures.pop(site, None)
            return 0.0
        failures = self._failures[site] = self._failures.get(site, 0) + 1
        wait = parse_retry_after(retry_after, now, self.max_retry_after)
        return host_backoff(failures, wait, self.rng, base=self.base)


def host_delay(configured: float, crawl_delay: float | None, cap: float) -> float:
    """Seconds between two request starts to a host: the configured delay, or the
    robots.txt Crawl-delay cut to `cap` when that is longer."""
    return max(configured, min(crawl_delay or 0.0, cap))


#: what a fetch error of each kind says of the whole host, when it says the host cannot be
#: reached at all (a slow answer, a timeout, says nothing of the kind)
HOST_FAILURES = {
    "dns": "name does not resolve",
    "tls": "TLS handshake failed",
    "reset": "connection reset",
    "disconnect": "connection closed before any answer",
}
#: kinds a live host also gives now and then (a dropped keep-alive connection): they count
#: a third each, so a host is dead after three of them in a row with no answer between
SOFT_FAILURES = frozenset({"reset", "disconnect"})


def host_failure(kind: str, message: str) -> str | None:
    """Why a fetch error means the host is unreachable ("connection refused"), or None."""
    if kind == "connect":  # "cannot connect to host:port: Connection refused"
        return message.rsplit(": ", 1)[-1].strip().lower() or "cannot connect"
    return HOST_FAILURES.get(kind)


class DeadHosts:
    """Hosts that failed `after` connections in a row with no answer at all (no such name,
    refused, TLS, reset): their other URLs fail at once, with the same reason, instead of
    each waiting out its own retries. Any HTTP answer from a host clears its count."""

    def __init__(self, after: int) -> None:
        self.after = after  # 0: never
        self._failures: dict[str, int] = {}  # in thirds of a failure
        self.dead: dict[str, str] = {}  # site -> reason

    def failed(self, site: str, reason: str, soft: bool = False) -> bool:
        """Count a failure (a soft one: a third); True when the host is (now) dead."""
        if site in self.dead:
            return True
        failures = self._failures[site] = self._failures.get(site, 0) + (1 if soft else 3)
        if self.after and failures >= 3 * self.after:
            self.dead[site] = reason
            return True
        return False

    def answered(self, site: str) -> None:
        self._failures.pop(site, None)

    def reason(self, site: str) -> str | None:
        return self.dead.get(site)


def out_of_time(first_failure: float, now: float, delay: float, budget: float) -> bool:
    """Whether a URL failing since `first_failure` would be tried again past its retry
    budget (seconds from its first failure), if it waited `delay` more."""
    return now + delay - first_failure > budget
