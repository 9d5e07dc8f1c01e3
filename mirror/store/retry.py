"""When an upload to the store is tried again: exponential backoff with full jitter, bounded
per wait and in total (pure; the threads that upload sleep on what it says).

The n-th retry (n = 0, 1, ...) waits a random time in [0, min(CAP, BASE * 2**n)] ("full
jitter": workers that lost the store at the same moment do not come back in step), and no
retry begins once `budget` seconds have passed since the first failure. Each try itself is
bounded by the store client's timeouts (mirror.store.objstore: 5 s to connect, 60 s without
a byte). A run that ends with uploads still pending after its budget exits with
ExitCode.UPLOAD_PENDING; `mirror push site.toml` uploads them later.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

#: the first retry's longest wait (seconds), doubled at each retry
BASE = 0.5
#: the longest wait between two tries (seconds)
CAP = 30.0


@dataclass
class Backoff:
    """The retries of one outage: `next_wait()` until `due()` says the budget is spent."""

    budget: float  # seconds, from the first failure, during which retries begin
    started: float  # when the first failure was seen (the caller's clock)
    base: float = BASE
    cap: float = CAP
    rand: Callable[[], float] = field(default=random.random)
    tries: int = 0  # retries told so far

    def next_wait(self, now: float) -> float | None:
        """How long to wait before the next retry; None when no retry may begin (the
        budget is spent, or would be before the wait is over: the last retry is then at
        the budget's end)."""
        left = self.started + self.budget - now
        if left <= 0:
            return None
        wait = float(min(self.cap, self.base * 2.0 ** self.tries) * self.rand())
        self.tries += 1
        return min(wait, left)
