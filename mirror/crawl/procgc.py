"""Garbage-collector settings for a crawl's long-lived processes (the crawler, a helper).

A crawl allocates a few container objects per link and per request, so Python's default
young-generation threshold (700) runs a collection every few pages, and each older
collection walks every object the imports made. `settle`, once the imports are done:
  - freezes what exists then (modules, classes, what start-up built): no collection
    walks it again;
  - collects the young generation every 10,000 allocations, the older ones 20 times less
    often each. Garbage cycles are still collected; memory stays bounded (issue 17: the
    100,000-page crawl's peak RSS is measured with these settings).
Only a process of its own calls it (the `mirror` command, a helper): frozen objects are
never freed, which a test process that runs many crawls in turn should not pay for.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 20, 20)


def settle() -> None:
    # no gc.collect() first: imports leave no garbage cycles, and it costs 10 ms
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
