"""robots.txt per RFC 9309 over protego: what a response means, agent matching, a cache."""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from protego import Protego

from mirror.web.codings import DecodeError, decode_body
from mirror.web.urls import normalize, site_key

#: bytes of robots.txt parsed (RFC 9309 2.5: at least 500 kibibytes); the rest is ignored
ROBOTS_MAX_BYTES = 500 * 1024
#: redirects the caller follows for robots.txt (RFC 9309 2.3.1.2: at least five)
ROBOTS_MAX_REDIRECTS = 5
#: how long fetched rules are used (RFC 9309 2.4: not more than 24 hours)
ROBOTS_TTL = 24 * 3600.0
#: first recheck of an unreachable robots.txt; doubles per failure up to MAX_RETRY_TTL
RETRY_TTL = 60.0
MAX_RETRY_TTL = 3600.0
#: skip-rule token for a URL that robots.txt disallows
ROBOTS_RULE = "robots"

_TOKEN = re.compile(r"[A-Za-z_-]+")  # RFC 9309 2.2.1 product-token characters
# A user-agent line in the spellings protego accepts ("User-agent:", "useragent", ...).
_AGENT_LINE = re.compile(r"\s*user[- ]?agent(?:\s*:|\s)(.*)", re.IGNORECASE)


@dataclass(frozen=True)
class RobotsRules:
    """The robots.txt rules of one origin: parsed, or a blanket allow / disallow."""

    reason: str  # "parsed", "4xx: allow all", "5xx: disallow all", ...
    parser: Protego | None = field(default=None, compare=False, repr=False)
    allow_all: bool = True  # what applies when there is no parser
    agents: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> RobotsRules:
        return cls("parsed", Protego.parse(text), agents=_group_agents(text))

    @classmethod
    def allow(cls, reason: str) -> RobotsRules:
        return cls(reason, None, True)

    @classmethod
    def disallow(cls, reason: str) -> RobotsRules:
        return cls(reason, None, False)

    @property
    def unreachable(self) -> bool:
        """A temporary disallow-all (5xx, 429, network failure): defer URLs, don't skip them."""
        return self.parser is None and not self.allow_all

    def allowed(self, url: str, user_agent: str) -> bool:
        """May `user_agent` (a User-Agent header or its product token) fetch `url`?

        /robots.txt itself is always allowed (RFC 9309 2.2.2).
        """
        if _is_robots_path(url):
            return True
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(url, self._token(user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        """Seconds between requests asked for by Crawl-delay, else by Request-rate; or None."""
        if self.parser is None:
            return None
        token = self._token(user_agent)
        delay = self.parser.crawl_delay(token)
        rate = self.parser.request_rate(token)
        if delay is None and rate is not None and rate.requests > 0:
            delay = rate.seconds / rate.requests
        return delay

    @property
    def sitemaps(self) -> tuple[str, ...]:
        return tuple(self.parser.sitemaps) if self.parser else ()

    def _token(self, user_agent: str) -> str:
        """Our product token if a group names it exactly, else "" (only "*" then applies).

        protego alone would also pick a group that names a prefix of the token ("mirr"
        for "mirror"); RFC 9309 2.2.1 matches the whole token, ignoring case.
        """
        token = product_token(user_agent)
        return token if token in self.agents else ""


def _group_agents(text: str) -> frozenset[str]:
    """Lower-cased user-agent values of a robots.txt ('*' removed too, as protego does)."""
    agents: set[str] = set()
    for line in text.splitlines():
        if found := _AGENT_LINE.match(line.partition("#")[0]):
            value = found.group(1).strip().lower()
            agents.update((value, value.replace("*", "")))
    return frozenset(agents)


@lru_cache(maxsize=64)
def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against, lower-cased.

    "mirror/0.1.0 (+https://example.com/bot)" -> "mirror". The token is the leading run of
    letters, '_' and '-' (RFC 9309 2.2.1); "" when there is none, so only "*" applies.
    """
    found = _TOKEN.match(user_agent.strip())
    return found.group().lower() if found else ""


def robots_url(url: str) -> str:
    """'scheme://host[:port]/robots.txt' of an http(s) URL. Raises InvalidURL."""
    canonical = normalize(url, ignore_query=())
    scheme = canonical.partition(":")[0]
    return f"{scheme}://{site_key(canonical)}/robots.txt"


def _is_robots_path(url: str) -> bool:
    rest = url.partition("://")[2]
    path = "/" + rest.partition("/")[2]
    return path.partition("?")[0].partition("#")[0] == "/robots.txt"


def rules_from_response(
    status: int | None,
    body: bytes | None,
    *,
    content_encoding: str | None = None,
    truncated: bool = False,
    error: str | None = None,
) -> RobotsRules:
    """What one robots.txt answer means (RFC 9309 2.3.1).

    status None (with `error` saying why) is a network failure or timeout. The caller:
    - follows 3xx itself, up to ROBOTS_MAX_REDIRECTS hops, across hosts too, passing the
      final answer here; the rules then apply to the original origin. A 3xx given here
      means the limit was hit (or Location was missing): unavailable, allow all;
    - passes the body as received (`content_encoding` from the header; `truncated` if the
      fetch cut it): it is decoded here, capped at ROBOTS_MAX_BYTES.
    2xx: parsed (UTF-8, invalid bytes replaced, BOM dropped). 4xx except 429: allow all.
    5xx, 429, other statuses, network failures and undecodable bodies: disallow all for
    now (`unreachable`); RobotsCache says when to ask again.
    """
    if status is None:
        return RobotsRules.disallow("unreachable: disallow all")
    if 200 <= status < 300:
        return _parse_body(body or b"", content_encoding, truncated)
    if 300 <= status < 400:
        return RobotsRules.allow("redirects: allow all")
    if status == 429:  # "slow down" is not "no robots.txt here" (Google reads it as 5xx)
        return RobotsRules.disallow("429: disallow all")
    if 400 <= status < 500:  # 401 and 403 too, as RFC 9309 says (the 1996 draft differed)
        return RobotsRules.allow("4xx: allow all")
    if 500 <= status < 600:
        return RobotsRules.disallow("5xx: disallow all")
    return RobotsRules.disallow("unreachable: disallow all")


def _parse_body(body: bytes, content_encoding: str | None, truncated: bool) -> RobotsRules:
    try:
        data, cut = decode_body(body, content_encoding, ROBOTS_MAX_BYTES)
    except DecodeError:
        return RobotsRules.disallow("undecodable: disallow all")
    if cut or truncated:
        # A line cut in two could turn "Disallow: /private" into "Disallow: /pr" (or an
        # Allow into a broader one): keep only complete lines.
        data = data[: data.rfind(b"\n") + 1]
    return RobotsRules.parse(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))


@dataclass
class _Entry:
    rules: RobotsRules
    expires: float
    failures: int  # unreachable answers in a row


class RobotsCache:
    """Rules per key (use robots_url(url): robots.txt is per scheme, host and port) and
    when to fetch them again. Pure bookkeeping over an injected monotonic clock.

    Fetched rules (2xx, 4xx, 3xx) are kept ROBOTS_TTL. After an unreachable answer the next
    try is due after RETRY_TTL, doubling per failure in a row up to MAX_RETRY_TTL (or after
    the `retry_in` given, e.g. a Retry-After). Rules fetched earlier stay in force while
    robots.txt is unreachable (RFC 9309 2.4); without them the host is disallowed.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        ttl: float = ROBOTS_TTL,
        retry_ttl: float = RETRY_TTL,
        max_retry_ttl: float = MAX_RETRY_TTL,
        max_sites: int = 4096,
    ) -> None:
        self.clock = clock
        self.ttl = ttl
        self.retry_ttl = retry_ttl
        self.max_retry_ttl = max_retry_ttl
        self.max_sites = max_sites
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def get(self, site: str) -> RobotsRules | None:
        """The rules in force, even past their expiry (refresh meanwhile); None: fetch first."""
        entry = self._entries.get(site)
        if entry is None:
            return None
        self._entries.move_to_end(site)
        return entry.rules

    def needs_refresh(self, site: str) -> bool:
        """True when robots.txt should be fetched (again) for `site`."""
        return self.expires_in(site) <= 0

    def expires_in(self, site: str) -> float:
        """Seconds until `site`'s rules are due for a refresh; 0 when due or unknown.

        For unreachable rules this is when deferred URLs of the host can be tried again.
        """
        entry = self._entries.get(site)
        return max(entry.expires - self.clock(), 0.0) if entry else 0.0

    def put(self, site: str, rules: RobotsRules, *, retry_in: float | None = None) -> RobotsRules:
        """Record a fetch's outcome; returns the rules now in force for `site`."""
        old = self._entries.get(site)
        if rules.unreachable:
            failures = old.failures + 1 if old else 1
            wait = retry_in if retry_in is not None else self._retry_wait(failures)
            if old and not old.rules.unreachable:
                rules = old.rules
            entry = _Entry(rules, self.clock() + wait, failures)
        else:
            entry = _Entry(rules, self.clock() + self.ttl, 0)
        self._entries[site] = entry
        self._entries.move_to_end(site)
        while len(self._entries) > self.max_sites:
            self._entries.popitem(last=False)
        return entry.rules

    def _retry_wait(self, failures: int) -> float:
        return min(self.max_retry_ttl, self.retry_ttl * 2.0 ** min(failures - 1, 32))
