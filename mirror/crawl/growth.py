"""Honest progress (pure): how fast the frontier grows, an ETA only while it drains, and the
URL pattern that supplies most new URLs, if one does."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from itertools import pairwise

from mirror.web.patterns import url_pattern

#: seconds of (time, queued) samples the frontier's growth is measured over
GROWTH_SPAN = 30.0
#: new URLs the pattern tally remembers; a pattern "supplies most" above DOMINANT_SHARE of
#: them, once at least DOMINANT_MIN were seen
RECENT_URLS = 2000
DOMINANT_SHARE = 0.5
DOMINANT_MIN = 100

@dataclass(frozen=True)
class Dominant:
    pattern: str
    share: float  # of the recent new URLs, 0..1
    sample: str  # the latest new URL of the pattern, for `mirror explain`


class NewUrlTally:
    """The patterns of the last RECENT_URLS new URLs of the run, and a sample of each."""

    def __init__(self, size: int = RECENT_URLS) -> None:
        self._recent: deque[str] = deque(maxlen=size)
        self._counts: Counter[str] = Counter()
        self._sample: dict[str, str] = {}

    def add(self, url: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            old = self._recent[0]
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old], self._sample[old]
        pattern = url_pattern(url)
        self._recent.append(pattern)
        self._counts[pattern] += 1
        self._sample[pattern] = url

    def dominant(self) -> Dominant | None:
        """The pattern of more than DOMINANT_SHARE of the recent new URLs, if one is."""
        if len(self._recent) < DOMINANT_MIN or not self._counts:
            return None
        pattern, count = self._counts.most_common(1)[0]
        share = count / len(self._recent)
        return Dominant(pattern, share, self._sample[pattern]) if share > DOMINANT_SHARE else None


class GrowthWindow:
    """The frontier's growth in URLs per second (negative while it drains), from
    (monotonic time, queued) samples: over the last `span` seconds, or over the last
    `recent` seconds when the queue has fallen at every sample since (a page that links
    many at once is a step, not growth: once the queue drains steadily, it drains)."""

    def __init__(self, span: float = GROWTH_SPAN, recent: float = 1.5) -> None:
        self.span, self.recent = span, recent
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, queued: int) -> float:
        """Record `queued` at `now`; returns the growth."""
        self._samples.append((now, queued))
        while len(self._samples) >= 2 and self._samples[1][0] <= now - self.span:
            self._samples.popleft()
        last = [s for s in self._samples if s[0] >= now - self.recent]
        falling = len(last) >= 3 and all(b[1] < a[1] for a, b in pairwise(last))
        (t0, q0), (t1, q1) = last[0] if falling else self._samples[0], self._samples[-1]
        return (q1 - q0) / (t1 - t0) if t1 > t0 else 0.0


def honest_eta(queued: int, rate: float, growth: float) -> float | None:
    """Seconds until `queued` URLs are done at `rate` pages/s; None while nothing moves or
    while the queue grows (new URLs come faster than they are fetched): no promise that
    cannot hold."""
    if queued == 0:
        return 0.0
    return queued / rate if rate > 0 and growth <= 0 else None


def explain_hint(d: Dominant, config: str) -> str:
    """The sentence shown when one pattern supplies most new URLs."""
    return (f"{d.share:.0%} of the new URLs are like {d.pattern}; see why they are crawled: "
            f"mirror explain {config} '{d.sample}'")
