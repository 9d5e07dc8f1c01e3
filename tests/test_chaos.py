"""C1: SIGKILL a real `mirror run` at random moments; the archive ends complete, exactly once.

The driver is bench/chaos.py (which runs 50 kills); CI runs 10. Set MIRROR_CHAOS_SEED to
replay a failing seed, MIRROR_CHAOS_KILLS to change the count.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from chaos import run_chaos  # noqa: E402

pytestmark = pytest.mark.chaos


async def test_sigkill_at_random_moments_loses_nothing_and_fetches_nothing_twice(tmp_path):
    seed = int(os.environ.get("MIRROR_CHAOS_SEED") or random.randrange(1 << 30))
    kills = int(os.environ.get("MIRROR_CHAOS_KILLS") or 10)
    report = await run_chaos(tmp_path, kills=kills, pages=2000, seed=seed)
    print(report.summary())
    assert report.kills >= min(kills, 5), f"replay with MIRROR_CHAOS_SEED={seed}"
    assert report.ok, f"{report.summary()} -- replay with MIRROR_CHAOS_SEED={seed}\n" + \
        "\n".join(report.check_failures) + f"\nrefetched: {report.refetched[:10]}" + \
        f"\nduplicates: {list(report.duplicates)[:10]}"
