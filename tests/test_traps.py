"""Trap limits (P6): each trap input paired with a control input that must still be accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.config import ConfigError, parse_config
from mirror.crawl.scope import (
    MAX_HOST_BYTES,
    MAX_HOST_PAGES,
    PAGE,
    REQUISITE,
    HostBudget,
    Scope,
    cap_outlinks,
    trap_rule,
)
from mirror.web.urls import normalize

SITE = '[site]\nname = "ex"\nstart_urls = ["http://example.com/"]\n'
BASE = "http://example.com"


def scope(**keys: object) -> Scope:
    lines = [f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in keys.items()]
    return Scope.from_config(parse_config(SITE + "[scope]\n" + "\n".join(lines), Path("s.toml")))


def _path(depth: int) -> str:
    return "".join(f"/s{i}" for i in range(depth))


# (id, trap URL, rule, control URL) under the default limits
TRAP_CASES = [
    ("segment-repeats", "/a/b/a/b/a/b", "segment_repeats", "/a/b/a/b"),
    ("segment-repeats-spread", "/x/a/y/a/z/a", "segment_repeats", "/x/a/y/a/z"),
    ("segment-repeats-file", "/p/index.html/index.html/index.html", "segment_repeats",
     "/p/index.html/q/index.html"),
    ("repeats-dated-archive", "/2026/01/01/01/", "segment_repeats", "/2026/01/01/post"),
    ("path-depth", _path(21), "path_depth", _path(20)),
    ("path-depth-trailing-slash", _path(21) + "/", "path_depth", _path(20) + "/"),
    ("path-depth-empty-segments", "/a" + "/" * 21, "path_depth", "/a" + "/" * 19),
    ("url-length", "/" + "x" * 2100, "url_length", "/" + "x" * (2083 - len(BASE) - 1)),
    ("url-length-query", "/p?q=" + "y" * 2080, "url_length", "/p?q=" + "y" * 2000),
    ("escapes-doubling", "/esc/" + "%25" * 700, "url_length", "/esc/%2525"),
]


@pytest.mark.parametrize(("trap", "rule", "control"), [c[1:] for c in TRAP_CASES],
                         ids=[c[0] for c in TRAP_CASES])
def test_trap_and_control(trap: str, rule: str, control: str) -> None:
    s = scope()
    trap_url, control_url = normalize(BASE + trap), normalize(BASE + control)
    for requisite in (False, True):  # trap limits hold for requisites as well
        assert s.decide(trap_url, 1, requisite).reason == rule
        assert not s.decide(trap_url, 1, requisite).allowed
    assert s.decide(control_url, 1, False).allowed
    assert s.decide(control_url, 1, False).mode == PAGE


def test_query_does_not_count_as_path() -> None:
    url = normalize(BASE + "/a?x=/a/a/a/a" + "/s" * 30)
    assert trap_rule(url, 2083, 20, 2) is None


def test_empty_segments_do_not_count_as_repeats() -> None:
    assert trap_rule(BASE + "/a//b//c//d", 2083, 20, 2) is None


@pytest.mark.parametrize("url", [
    BASE + "/", BASE + "/a", BASE + "/a/", BASE + "/a/b/c.html?x=1",
    "http://[::1]:8080/a/b", BASE + "/%E2%82%AC/%E2%82%AC",
])
def test_ordinary_urls_pass(url: str) -> None:
    assert trap_rule(url, 2083, 20, 2) is None


@pytest.mark.parametrize(("keys", "url"), [
    ({"max_path_depth": 0}, _path(200)),
    ({"max_segment_repeats": 0}, "/a/a/a/a/a"),
    ({"max_url_length": 0}, "/" + "x" * 10_000),
])
def test_zero_turns_a_limit_off(keys: dict[str, int], url: str) -> None:
    assert scope(**keys).decide(normalize(BASE + url), 1, False).allowed
    assert not scope().decide(normalize(BASE + url), 1, False).allowed  # control: the default


@pytest.mark.parametrize(("keys", "trap", "rule", "control"), [
    ({"max_path_depth": 3}, "/a/b/c/d", "path_depth", "/a/b/c"),
    ({"max_segment_repeats": 1}, "/a/b/a", "segment_repeats", "/a/b/c"),
    ({"max_url_length": 31}, "/abcdefghijklm", "url_length", "/abcdefghijkl"),
])
def test_configured_limits(keys: dict[str, int], trap: str, rule: str, control: str) -> None:
    s = scope(**keys)
    assert s.decide(BASE + trap, 1, False).reason == rule
    assert s.decide(BASE + control, 1, False).allowed


def test_exclude_still_wins_and_other_rules_still_apply() -> None:
    s = scope(exclude='["/a/"]', max_depth=2)
    assert s.decide(BASE + "/a/b/a/b/a/b", 1, False).reason == "exclude"
    assert s.decide(BASE + "/ok", 3, False).reason == "max_depth"
    assert s.decide("http://other.org/x", 1, False).reason == "host"
    assert s.decide("http://other.org/x", 1, True).mode == REQUISITE
    assert s.decide("http://other.org/b/b/b", 1, True).reason == "segment_repeats"


# -- outlinks ------------------------------------------------------------------------------


def test_cap_outlinks_keeps_the_first_links() -> None:
    links = list(range(10))
    assert cap_outlinks(links, 4) == ([0, 1, 2, 3], 6)
    assert cap_outlinks(links, 10) == (links, 0)  # control: at the limit
    assert cap_outlinks(links, 0) == (links, 0)  # 0: no limit
    assert cap_outlinks([], 3) == ([], 0)


def test_cap_outlinks_prefers_requisites_in_document_order() -> None:
    links = ["a1", "r1", "a2", "a3", "r2", "a4", "r3"]
    kept, dropped = cap_outlinks(links, 4, keep_first=lambda s: s.startswith("r"))
    assert (kept, dropped) == (["a1", "r1", "r2", "r3"], 3)
    kept, dropped = cap_outlinks(links, 2, keep_first=lambda s: s.startswith("r"))
    assert (kept, dropped) == (["r1", "r2"], 5)


def test_scope_caps_outlinks_at_6000_by_default() -> None:
    page = [f"{BASE}/p{i}" for i in range(7000)]
    kept, dropped = scope().cap_outlinks(page)
    assert (len(kept), dropped) == (6000, 1000)
    assert kept == page[:6000]
    assert scope().cap_outlinks(page[:6000]) == (page[:6000], 0)  # control
    assert scope(max_outlinks=0).cap_outlinks(page) == (page, 0)


# -- per-host budgets ----------------------------------------------------------------------


BUDGET_CASES = [
    # (id, max_pages, max_bytes, pages so far, bytes so far, expected)
    ("no-limits", 0, 0, 10**9, 10**15, None),
    ("pages-left", 10, 0, 9, 0, None),
    ("pages-spent", 10, 0, 10, 0, MAX_HOST_PAGES),
    ("bytes-left", 0, 1000, 50, 999, None),
    ("bytes-spent", 0, 1000, 50, 1000, MAX_HOST_BYTES),
    ("bytes-overshot", 0, 1000, 1, 5000, MAX_HOST_BYTES),
    ("pages-checked-first", 1, 1, 1, 1, MAX_HOST_PAGES),
    ("both-left", 5, 5000, 4, 4999, None),
]


@pytest.mark.parametrize(("max_pages", "max_bytes", "pages", "nbytes", "rule"),
                         [c[1:] for c in BUDGET_CASES], ids=[c[0] for c in BUDGET_CASES])
def test_host_budget(max_pages: int, max_bytes: int, pages: int, nbytes: int,
                     rule: str | None) -> None:
    assert HostBudget(max_pages, max_bytes).exceeded(pages, nbytes) == rule


def test_scope_budget_from_config() -> None:
    assert scope().budget == HostBudget(0, 0)
    assert scope(max_host_pages=3, max_host_bytes=10).budget == HostBudget(3, 10)


# -- config keys ---------------------------------------------------------------------------


def test_new_keys_defaults() -> None:
    cfg = parse_config(SITE, Path("s.toml"))
    assert (cfg.scope.max_path_depth, cfg.scope.max_segment_repeats) == (20, 2)
    assert (cfg.scope.max_url_length, cfg.scope.max_outlinks) == (2083, 6000)
    assert (cfg.scope.max_host_pages, cfg.scope.max_host_bytes) == (0, 0)
    assert cfg.scope.robots is True
    assert (cfg.crawl.max_crawl_delay, cfg.crawl.max_retry_after) == (30.0, 600.0)
    s = Scope.from_config(cfg)
    assert (s.max_path_depth, s.max_segment_repeats, s.max_url_length, s.max_outlinks) == (
        20, 2, 2083, 6000)


@pytest.mark.parametrize(("text", "message"), [
    ("[scope]\nmax_path_depth = -1", "[scope] max_path_depth: expected an integer >= 0"),
    ("[scope]\nmax_segment_repeats = 1.5", "[scope] max_segment_repeats: expected an integer"),
    ("[scope]\nmax_url_length = true", "[scope] max_url_length: expected an integer >= 0"),
    ("[scope]\nmax_outlinks = '6000'", "[scope] max_outlinks: expected an integer >= 0"),
    ("[scope]\nmax_host_pages = -5", "[scope] max_host_pages: expected an integer >= 0"),
    ("[scope]\nmax_host_bytes = -1", "[scope] max_host_bytes: expected an integer >= 0"),
    ("[scope]\nrobots = 'yes'", "[scope] robots: expected true or false"),
    ("[crawl]\nmax_crawl_delay = -1", "[crawl] max_crawl_delay: expected a number >= 0"),
    ("[crawl]\nmax_retry_after = nan", "[crawl] max_retry_after: expected a number >= 0"),
    ("[scope]\nmax_path_dept = 3", "did you mean 'max_path_depth'?"),
])
def test_new_keys_validation(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(SITE + text, Path("s.toml"))


def test_new_keys_accept_their_ranges() -> None:
    cfg = parse_config(SITE + "[scope]\nmax_path_depth = 0\nrobots = false\n"
                       "[crawl]\nmax_crawl_delay = 0\nmax_retry_after = 5\n", Path("s.toml"))
    assert cfg.scope.max_path_depth == 0 and cfg.scope.robots is False
    assert cfg.crawl.max_crawl_delay == 0.0 and cfg.crawl.max_retry_after == 5.0
    assert isinstance(cfg.crawl.max_retry_after, float)


def test_fault_server_pairs_are_decided_as_promised() -> None:
    """The fault server's P6 entry points and controls, through the default scope."""
    from faultsrv import PAIRS

    s = scope()
    for pair in PAIRS:
        control = s.decide(normalize(BASE + pair.control), 1, False)
        assert control.allowed, (pair.name, control)
