"""Tables for mirror.crawl.politeness: Retry-After, per-host backoff with jitter, host delay."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from mirror.crawl.politeness import (
    BACKOFF_STATUSES,
    HOST_BACKOFF_CAP,
    host_backoff,
    host_delay,
    parse_retry_after,
)

NOW = datetime(2026, 11, 6, 8, 49, 37, tzinfo=UTC)
CAP = 600.0

RETRY_AFTER_CASES = [
    # delay-seconds
    ("seconds", "120", 120.0),
    ("zero", "0", 0.0),
    ("spaces", "  5 ", 5.0),
    ("fraction", "1.5", 1.5),
    ("leading-zeros", "007", 7.0),
    ("clamped", "86400", CAP),
    ("huge", "9" * 400, CAP),
    # HTTP-date, the three RFC 9110 forms
    ("imf-fixdate", "Fri, 06 Nov 2026 08:51:37 GMT", 120.0),
    ("rfc850", "Friday, 06-Nov-26 08:50:37 GMT", 60.0),
    ("asctime", "Fri Nov  6 08:49:47 2026", 10.0),
    ("numeric-zone", "Fri, 06 Nov 2026 10:50:37 +0200", 60.0),
    ("date-past", "Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
    ("date-now", "Fri, 06 Nov 2026 08:49:37 GMT", 0.0),
    ("date-far", "Fri, 06 Nov 2099 08:49:37 GMT", CAP),
    # garbage
    ("none", None, None),
    ("empty", "", None),
    ("blank", "   ", None),
    ("negative", "-5", None),
    ("plus", "+5", None),
    ("nan", "nan", None),
    ("inf", "inf", None),
    ("exponent", "1e3", None),
    ("unit", "5s", None),
    ("word", "soon", None),
    ("bad-day", "Wed, 31 Feb 2026 10:00:00 GMT", None),
    ("date-only", "Fri, 06 Nov 2026", None),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in RETRY_AFTER_CASES],
                         ids=[c[0] for c in RETRY_AFTER_CASES])
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW, CAP) == expected


def test_parse_retry_after_naive_now_is_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert parse_retry_after("Fri, 06 Nov 2026 08:51:37 GMT", naive, CAP) == 120.0


def test_parse_retry_after_other_zone_now() -> None:
    now = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert parse_retry_after("Fri, 06 Nov 2026 08:51:37 GMT", now, CAP) == 120.0


@pytest.mark.parametrize("cap", [0.0, 1.0])
def test_parse_retry_after_small_caps(cap: float) -> None:
    assert parse_retry_after("30", NOW, cap) == cap
    assert parse_retry_after("0", NOW, cap) == 0.0


def test_backoff_statuses() -> None:
    assert BACKOFF_STATUSES == {429, 503}


class FixedRng(random.Random):
    """uniform() returns the low end, the middle or the high end of its range."""

    def __init__(self, where: float) -> None:
        super().__init__(0)
        self.where = where

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.where


BACKOFF_CASES = [
    # (id, failures, retry_after, jitter position, expected)
    ("no-failure", 0, None, 0.5, 0.0),
    ("no-failure-retry-after", 0, 30.0, 0.5, 30.0),
    ("first", 1, None, 0.5, 1.0),
    ("second", 2, None, 0.5, 2.0),
    ("fifth", 5, None, 0.5, 16.0),
    ("jitter-low", 3, None, 0.0, 2.0),
    ("jitter-high", 3, None, 1.0, 6.0),
    ("capped", 30, None, 0.5, HOST_BACKOFF_CAP),
    ("capped-jitter-low", 30, None, 0.0, HOST_BACKOFF_CAP / 2),
    ("huge-count", 10_000, None, 0.5, HOST_BACKOFF_CAP),
    ("retry-after-wins", 1, 120.0, 0.5, 120.0),
    ("retry-after-over-cap", 30, 3600.0, 1.0, 3600.0),
    ("backoff-wins", 8, 1.0, 0.5, 128.0),
    ("retry-after-zero", 1, 0.0, 0.5, 1.0),
    ("negative-count", -3, None, 0.5, 0.0),
]


@pytest.mark.parametrize(("failures", "retry_after", "where", "expected"),
                         [c[1:] for c in BACKOFF_CASES], ids=[c[0] for c in BACKOFF_CASES])
def test_host_backoff(failures: int, retry_after: float | None, where: float,
                      expected: float) -> None:
    assert host_backoff(failures, retry_after, FixedRng(where)) == pytest.approx(expected)


def test_host_backoff_base_and_cap() -> None:
    assert host_backoff(3, None, FixedRng(0.5), base=0.01) == pytest.approx(0.04)
    assert host_backoff(9, None, FixedRng(0.5), base=1.0, cap=10.0) == pytest.approx(10.0)


def test_host_backoff_jitter_spreads_and_is_reproducible() -> None:
    waits = [host_backoff(4, None, random.Random(seed)) for seed in range(50)]
    assert all(4.0 <= w < 12.0 for w in waits)
    assert len(set(waits)) == 50
    assert waits == [host_backoff(4, None, random.Random(seed)) for seed in range(50)]


DELAY_CASES = [
    ("no-crawl-delay", 1.0, None, 30.0, 1.0),
    ("crawl-delay-longer", 1.0, 5.0, 30.0, 5.0),
    ("crawl-delay-shorter", 10.0, 5.0, 30.0, 10.0),
    ("crawl-delay-capped", 0.0, 86400.0, 30.0, 30.0),
    ("cap-below-configured", 45.0, 86400.0, 30.0, 45.0),
    ("cap-zero-ignores-robots", 0.5, 10.0, 0.0, 0.5),
    ("crawl-delay-zero", 0.0, 0.0, 30.0, 0.0),
]


@pytest.mark.parametrize(("configured", "crawl_delay", "cap", "expected"),
                         [c[1:] for c in DELAY_CASES], ids=[c[0] for c in DELAY_CASES])
def test_host_delay(configured: float, crawl_delay: float | None, cap: float,
                    expected: float) -> None:
    assert host_delay(configured, crawl_delay, cap) == expected
