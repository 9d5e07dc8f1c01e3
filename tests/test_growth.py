"""Honest progress (pure): the frontier's growth, no ETA while it grows, the pattern that
supplies most new URLs, and what the terminal shows of them."""

from __future__ import annotations

import pytest

from mirror.crawl.growth import (
    DOMINANT_MIN,
    GrowthWindow,
    NewUrlTally,
    honest_eta,
)
from mirror.model import Progress
from mirror.run.progress import render_progress
from mirror.run.progressfile import LiveProgress, parse_progress


def test_growth_over_the_window_and_a_steady_drain() -> None:
    w = GrowthWindow(span=30.0)
    assert w.add(0.0, 1) == 0.0
    assert w.add(0.5, 101) == pytest.approx(200.0)  # a page linking 100: a step up
    assert w.add(1.0, 95) > 0  # the window still holds the step
    assert w.add(1.5, 90) > 0
    # falling at every sample of the last 1.5 s: it drains
    assert w.add(2.0, 85) == pytest.approx((85 - 101) / 1.5)
    grows = GrowthWindow()
    for i in range(20):  # a trap: every page adds more than it takes
        growth = grows.add(i * 0.5, 10 + 3 * i - (i % 3 == 0))
    assert growth == pytest.approx((67 - 9) / 9.5)


def test_no_eta_while_the_queue_grows() -> None:
    assert honest_eta(100, 10.0, 5.0) is None  # grows faster than it drains
    assert honest_eta(100, 10.0, -2.0) == 10.0
    assert honest_eta(100, 10.0, 0.0) == 10.0
    assert honest_eta(100, 0.0, -1.0) is None  # nothing moves
    assert honest_eta(0, 0.0, 3.0) == 0.0


def test_a_pattern_that_supplies_most_new_urls_is_named_with_a_sample() -> None:
    tally = NewUrlTally(size=200)
    for i in range(DOMINANT_MIN - 1):
        tally.add(f"http://w/index.php?title=P{i}&action=history")
    assert tally.dominant() is None  # too few yet
    for i in range(60):
        tally.add(f"http://w/wiki/Article_{i}")
    top = tally.dominant()
    assert top is not None and top.pattern == "w/index.php?action=&title="
    assert top.share == pytest.approx(99 / 159)
    assert top.sample == "http://w/index.php?title=P98&action=history"
    for i in range(200):  # the window forgets: now articles dominate
        tally.add(f"http://w/wiki/Article_{i}")
    top = tally.dominant()
    assert top is not None and top.pattern == "w/wiki/Article_{n}" and top.share == 1.0
    for i in range(200):
        tally.add(f"http://w/{'abc'[i % 3]}{'xyz'[i % 2]}/")
    assert tally.dominant() is None  # no pattern has more than half


P = Progress(run_id=1, done=40, queued=900, failed=0, retried=0, bytes=1000, elapsed=10.0,
             held_back=0)


def test_the_live_line_says_the_queue_grows_and_names_the_pattern() -> None:
    tally = NewUrlTally()
    for i in range(150):
        tally.add(f"http://w/index.php?title=Special:CreateAccount&returnto=P{i}")
    live = LiveProgress.of(P, pid=1, started=0.0, updated=10.0, rate=4.0, growth=12.5,
                           top=tally.dominant())
    assert live.eta is None
    line = render_progress("wiki", live, "wiki.toml")
    assert "no ETA: queue +12.5/s" in line and "ETA --" not in line
    assert line.splitlines()[1] == (
        "100% of the new URLs are like w/index.php?returnto=&title=; see why they are "
        "crawled: mirror explain wiki.toml "
        "'http://w/index.php?title=Special:CreateAccount&returnto=P149'")
    draining = LiveProgress.of(P, pid=1, started=0.0, updated=10.0, rate=4.0, growth=-3.0)
    assert "ETA 3:45" in render_progress("wiki", draining)
    assert len(render_progress("wiki", draining).splitlines()) == 1


def test_progress_json_keeps_the_new_keys_and_reads_old_files() -> None:
    from dataclasses import asdict

    live = LiveProgress.of(P, pid=1, started=0.0, updated=10.0, rate=4.0, growth=-3.5)
    assert parse_progress(asdict(live)) == live
    old = {k: v for k, v in asdict(live).items()
           if k not in ("growth", "top_pattern", "top_share", "top_sample")}
    assert parse_progress(old) == LiveProgress(**{**old, "growth": 0.0})
    assert parse_progress({**asdict(live), "growth": "fast"}) is None
    assert parse_progress({**asdict(live), "top_pattern": 3}) is None
