"""Tables for mirror.crawl.robots: RFC 9309 status classes, agent matching, size cap, the cache."""

from __future__ import annotations

import gzip
import zlib

import pytest

from mirror.crawl.robots import (
    MAX_RETRY_TTL,
    RETRY_TTL,
    ROBOTS_MAX_BYTES,
    ROBOTS_TTL,
    RobotsCache,
    RobotsRules,
    product_token,
    robots_url,
    rules_from_response,
)
from mirror.web.urls import InvalidURL

UA = "mirror/0.1.0 (+https://example.com/about-our-bot)"
SITE = "http://example.com"

RULES = b"""\
User-agent: *
Disallow: /private/
Crawl-delay: 2

User-agent: mirror
Disallow: /no-mirror/
Allow: /no-mirror/but-this
Crawl-delay: 7

User-agent: otherbot
Disallow: /
"""

# (id, status, body, expected reason, trap URL disallowed?) -- every row also checks a
# control URL that must stay allowed whenever the blanket is not disallow-all.
STATUS_CASES = [
    ("200-parsed", 200, RULES, "parsed", True),
    ("204-empty", 204, b"", "parsed", False),
    ("206-partial", 206, RULES, "parsed", True),
    ("301-after-limit", 301, b"", "redirects: allow all", False),
    ("400", 400, b"", "4xx: allow all", False),
    ("401-rfc-allows", 401, b"Disallow: /", "4xx: allow all", False),
    ("403-rfc-allows", 403, b"", "4xx: allow all", False),
    ("404", 404, b"", "4xx: allow all", False),
    ("410", 410, b"", "4xx: allow all", False),
    ("429-slow-down", 429, b"", "429: disallow all", True),
    ("500", 500, RULES, "5xx: disallow all", True),
    ("503", 503, b"", "5xx: disallow all", True),
    ("599", 599, b"", "5xx: disallow all", True),
    ("odd-1xx", 100, b"", "unreachable: disallow all", True),
    ("odd-600", 600, b"", "unreachable: disallow all", True),
]


@pytest.mark.parametrize(("status", "body", "reason", "trap_blocked"),
                         [c[1:] for c in STATUS_CASES], ids=[c[0] for c in STATUS_CASES])
def test_status_classes(status: int, body: bytes, reason: str, trap_blocked: bool) -> None:
    rules = rules_from_response(status, body)
    assert rules.reason == reason
    assert rules.allowed(f"{SITE}/no-mirror/x", UA) is not trap_blocked
    unreachable = reason.endswith("disallow all")
    assert rules.unreachable is unreachable
    assert rules.allowed(f"{SITE}/public", UA) is not unreachable  # the control
    assert rules.allowed(f"{SITE}/robots.txt", UA)  # always, even when unreachable


def test_network_failure_disallows_all() -> None:
    rules = rules_from_response(None, None, error="timeout")
    assert rules.reason == "unreachable: disallow all"
    assert rules.unreachable
    assert not rules.allowed(f"{SITE}/", UA)
    assert rules.crawl_delay(UA) is None


# (id, URL path, allowed for UA) over RULES: the "mirror" group applies, not "*".
MATCH_CASES = [
    ("own-group-disallow", "/no-mirror/page", False),
    ("own-group-longer-allow", "/no-mirror/but-this", True),
    ("star-rules-not-merged", "/private/x", True),
    ("control-root", "/", True),
    ("control-page", "/a/b?c=d", True),
]


@pytest.mark.parametrize(("path", "allowed"), [c[1:] for c in MATCH_CASES],
                         ids=[c[0] for c in MATCH_CASES])
def test_product_token_selects_its_group(path: str, allowed: bool) -> None:
    assert rules_from_response(200, RULES).allowed(SITE + path, UA) is allowed


@pytest.mark.parametrize(("agent", "delay", "private_allowed"), [
    (UA, 7.0, True),
    ("MIRROR/2", 7.0, True),  # matching ignores case
    ("mirror", 7.0, True),  # a bare token works too
    ("mirrorbot/1.0", 2.0, False),  # another product: the "*" group
    ("Mozilla/5.0 (compatible; mirror/1.0)", 2.0, False),  # the token is the first product
    ("123/4", 2.0, False),  # no token at all: only "*"
])
def test_agent_matching(agent: str, delay: float, private_allowed: bool) -> None:
    rules = rules_from_response(200, RULES)
    assert rules.crawl_delay(agent) == delay
    assert rules.allowed(f"{SITE}/private/x", agent) is private_allowed


@pytest.mark.parametrize(("agent", "token"), [
    (UA, "mirror"),
    ("  Mirror_Bot-2/1.0", "mirror_bot-"),
    ("Mozilla/5.0", "mozilla"),
    ("9bot", ""),
    ("", ""),
])
def test_product_token(agent: str, token: str) -> None:
    assert product_token(agent) == token


def test_request_rate_is_a_delay_when_there_is_no_crawl_delay() -> None:
    rules = rules_from_response(200, b"User-agent: *\nRequest-rate: 1/5\nDisallow: /x\n")
    assert rules.crawl_delay(UA) == 5.0
    assert rules_from_response(200, b"User-agent: *\nDisallow: /x\n").crawl_delay(UA) is None


def test_blanket_rules_have_no_delay_or_sitemaps() -> None:
    assert rules_from_response(404, b"").crawl_delay(UA) is None
    assert rules_from_response(404, b"").sitemaps == ()
    parsed = rules_from_response(200, b"Sitemap: http://example.com/s.xml\n")
    assert parsed.sitemaps == ("http://example.com/s.xml",)


def test_bom_and_invalid_utf8_are_tolerated() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /caf\xff\nDisallow: /private/\n"
    rules = rules_from_response(200, body)
    assert not rules.allowed(f"{SITE}/private/x", UA)
    assert rules.allowed(f"{SITE}/public", UA)


def test_garbage_body_allows_all() -> None:
    rules = rules_from_response(200, b"<html><body>Not a robots file</body></html>\x00\x01")
    assert rules.reason == "parsed"
    assert rules.allowed(f"{SITE}/anything", UA)


def _big(tail: bytes) -> bytes:
    filler = b"# " + b"x" * 97 + b"\n"  # 100-byte comment lines
    head = b"User-agent: *\nDisallow: /early/\n"
    return head + filler * (ROBOTS_MAX_BYTES // 100) + tail


def test_only_the_first_500_kib_are_parsed() -> None:
    rules = rules_from_response(200, _big(b"Disallow: /late/\n"))
    assert not rules.allowed(f"{SITE}/early/x", UA)  # control: rules before the cap apply
    assert rules.allowed(f"{SITE}/late/x", UA)


def test_a_line_cut_by_the_cap_is_dropped() -> None:
    head = b"User-agent: *\n"
    filler = b"#" * (ROBOTS_MAX_BYTES - len(head) - len(b"Disallow: /pr") - 1) + b"\n"
    body = head + filler + b"Disallow: /private\n"  # the cap falls after "Disallow: /pr"
    rules = rules_from_response(200, body)
    assert rules.allowed(f"{SITE}/print", UA)  # not "Disallow: /pr"
    control = rules_from_response(200, head + b"Disallow: /private\n")
    assert control.allowed(f"{SITE}/print", UA)
    assert not control.allowed(f"{SITE}/private", UA)


def test_truncated_fetch_drops_its_last_line() -> None:
    body = b"User-agent: *\nDisallow: /a/\nDisallow: /pr"
    assert rules_from_response(200, body, truncated=True).allowed(f"{SITE}/print", UA)
    assert not rules_from_response(200, body).allowed(f"{SITE}/print", UA)  # control


@pytest.mark.parametrize(("coding", "pack"), [
    ("gzip", lambda b: gzip.compress(b, mtime=0)),
    ("deflate", zlib.compress),
    ("identity", lambda b: b),
    (None, lambda b: b),
])
def test_content_coding_is_undone(coding, pack) -> None:
    rules = rules_from_response(200, pack(RULES), content_encoding=coding)
    assert rules.reason == "parsed"
    assert not rules.allowed(f"{SITE}/no-mirror/x", UA)
    assert rules.allowed(f"{SITE}/public", UA)


def test_gzip_bomb_is_capped() -> None:
    bomb = gzip.compress(b"User-agent: *\nDisallow: /a/\n" + b"\n" * (8 * 1024 * 1024))
    rules = rules_from_response(200, bomb, content_encoding="gzip")
    assert not rules.allowed(f"{SITE}/a/x", UA)


def test_corrupt_coding_disallows_for_now() -> None:
    rules = rules_from_response(200, b"not gzip at all", content_encoding="gzip")
    assert rules.reason == "undecodable: disallow all"
    assert rules.unreachable


@pytest.mark.parametrize(("url", "expected"), [
    ("http://Example.COM/a/b?c#d", "http://example.com/robots.txt"),
    ("https://example.com:443/x", "https://example.com/robots.txt"),
    ("http://u:p@example.com:8080/x", "http://example.com:8080/robots.txt"),
    ("http://[::1]:81/", "http://[::1]:81/robots.txt"),
    ("http://Bücher.example/", "http://xn--bcher-kva.example/robots.txt"),
])
def test_robots_url(url: str, expected: str) -> None:
    assert robots_url(url) == expected


def test_robots_url_rejects_other_schemes() -> None:
    with pytest.raises(InvalidURL):
        robots_url("ftp://example.com/")


def test_rules_compare_by_outcome() -> None:
    assert RobotsRules.allow("4xx: allow all") == rules_from_response(404, b"")
    assert RobotsRules.disallow("5xx: disallow all") == rules_from_response(503, b"")


# -- the cache ---------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


KEY = "http://example.com/robots.txt"


def test_cache_unknown_site_must_be_fetched() -> None:
    cache = RobotsCache(clock=Clock())
    assert cache.get(KEY) is None
    assert cache.needs_refresh(KEY)
    assert cache.expires_in(KEY) == 0


def test_cache_keeps_fetched_rules_24_hours() -> None:
    clock = Clock()
    cache = RobotsCache(clock=clock)
    rules = rules_from_response(200, RULES)
    assert cache.put(KEY, rules) is rules
    assert cache.get(KEY) is rules and not cache.needs_refresh(KEY)
    clock.now += ROBOTS_TTL - 1
    assert not cache.needs_refresh(KEY)
    clock.now += 1
    assert cache.needs_refresh(KEY)
    assert cache.get(KEY) is rules  # still used while the refresh is under way


def test_cache_4xx_lasts_as_long_as_rules() -> None:
    clock = Clock()
    cache = RobotsCache(clock=clock)
    cache.put(KEY, rules_from_response(404, b""))
    assert cache.expires_in(KEY) == ROBOTS_TTL


def test_cache_unreachable_is_rechecked_with_backoff() -> None:
    clock = Clock()
    cache = RobotsCache(clock=clock)
    waits = []
    for _ in range(8):
        got = cache.put(KEY, rules_from_response(503, b""))
        assert got.unreachable
        waits.append(cache.expires_in(KEY))
        clock.now += waits[-1]
        assert cache.needs_refresh(KEY)
    assert waits == [min(RETRY_TTL * 2**i, MAX_RETRY_TTL) for i in range(8)]
    cache.put(KEY, rules_from_response(200, RULES))  # success resets the backoff
    assert cache.expires_in(KEY) == ROBOTS_TTL
    cache.put(KEY, rules_from_response(None, None, error="reset"))
    assert cache.expires_in(KEY) == RETRY_TTL


def test_cache_retry_in_overrides_the_backoff() -> None:
    cache = RobotsCache(clock=Clock())
    cache.put(KEY, rules_from_response(503, b""), retry_in=7.5)
    assert cache.expires_in(KEY) == 7.5


def test_cache_keeps_earlier_rules_while_unreachable() -> None:
    clock = Clock()
    cache = RobotsCache(clock=clock)
    rules = cache.put(KEY, rules_from_response(200, RULES))
    clock.now += ROBOTS_TTL
    kept = cache.put(KEY, rules_from_response(500, b""))
    assert kept is rules and cache.get(KEY) is rules
    assert cache.expires_in(KEY) == RETRY_TTL  # but asked again soon


def test_cache_forgets_least_recently_used_sites() -> None:
    cache = RobotsCache(clock=Clock(), max_sites=2)
    for key in ("a", "b"):
        cache.put(key, rules_from_response(404, b""))
    assert cache.get("a") is not None  # "a" used: "b" is now the oldest
    cache.put("c", rules_from_response(404, b""))
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None


@pytest.mark.parametrize(("robots", "blocked"), [
    (b"User-agent: mirr\nDisallow: /\n", False),  # a prefix of our token is another robot
    (b"User-agent: mirrorbot\nDisallow: /\n", False),
    (b"User-agent: MIRROR\nDisallow: /\n", True),  # control: exact, any case
    (b"useragent mirror\ndisallow: /\n", True),  # protego's lenient spellings
    (b"User-agent: mirror* # wildcard\nDisallow: /\n", True),
    (b"User-agent: mirr\nDisallow: /\n\nUser-agent: *\nDisallow: /\n", True),  # "*" applies
])
def test_group_must_name_the_whole_token(robots: bytes, blocked: bool) -> None:
    assert rules_from_response(200, robots).allowed(f"{SITE}/x", UA) is not blocked
