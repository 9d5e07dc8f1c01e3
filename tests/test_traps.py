"""Trap limits (P6): each trap input paired with a control input that must still be accepted."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import Crawl, TestSite

from mirror.config import TRAPS, ConfigError, parse_config
from mirror.crawl.scope import (
    LOGOUT,
    MAX_HOST_BYTES,
    MAX_HOST_PAGES,
    PAGE,
    REQUISITE,
    Decision,
    HostBudget,
    Scope,
    cap_outlinks,
    cms_trap,
    trap_rule,
)
from mirror.crawl.traprules import NAMES
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
    ("[scope]\nmax_path_depth = -1", "[scope] max_path_depth: expected an integer from 0"),
    ("[scope]\nmax_segment_repeats = 1.5", "[scope] max_segment_repeats: expected an integer"),
    ("[scope]\nmax_url_length = true", "[scope] max_url_length: expected an integer from 0"),
    ("[scope]\nmax_outlinks = '6000'", "[scope] max_outlinks: expected an integer from 0"),
    ("[scope]\nmax_host_pages = -5", "[scope] max_host_pages: expected an integer from 0"),
    ("[scope]\nmax_host_bytes = -1", "[scope] max_host_bytes: expected an integer from 0"),
    ("[scope]\nrobots = 'yes'", "[scope] robots: expected true or false"),
    ("[crawl]\nmax_crawl_delay = -1", "[crawl] max_crawl_delay: expected a number from 0"),
    ("[crawl]\nmax_retry_after = nan", "[crawl] max_retry_after: expected a number from 0"),
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


# -- CMS traps ([scope] traps) and logout links ----------------------------------------------

# (id, trap URL, rule under the default traps, a control URL that stays a page)
CMS_CASES = [
    ("replytocom", "/2024/05/hello/?replytocom=17", "trap:replytocom", "/2024/05/hello/"),
    ("replytocom-second-param", "/p/?a=1&replytocom=3#respond", "trap:replytocom", "/p/?a=1"),
    ("wp-login", "/wp-login.php", "trap:login", "/wp-content/login-help/"),
    ("wp-login-redirect", "/wp-login.php?redirect_to=%2Fp%2F", "trap:login", "/p/?redirect=1"),
    ("wp-lostpassword", "/wp-login.php?action=lostpassword", "trap:login", "/lost/"),
    ("wp-admin", "/wp-admin/", "trap:login", "/wp-administrators/"),
    ("wp-admin-page", "/wp-admin/post.php?post=1", "trap:login", "/admin-notes/post.php"),
    ("login", "/login", "trap:login", "/login-tips"),
    ("login-next", "/accounts/login/?next=/a/", "trap:login", "/accounts/"),
    ("login-php", "/login.php", "trap:login", "/images/login.png"),
    ("signin", "/signin", "trap:login", "/signing-day"),
    ("sign-in", "/sign-in/", "trap:login", "/sign/"),
    ("drupal-user-login", "/user/login?destination=/node/1", "trap:login", "/user/1"),
    ("drupal-password", "/user/password", "trap:login", "/user/passwords-guide"),
    ("account-login", "/account/login", "trap:login", "/account/"),
    ("password-reset", "/password/reset", "trap:login", "/password/"),
    ("forgot-password", "/forgot-password", "trap:login", "/forgot"),
    ("woo-lost-password", "/my-account/lost-password/", "trap:login", "/my-account/"),
    ("action-rp", "/wp-login.php?action=rp&key=k", "trap:login", "/?action=rpm"),
    ("joomla-login", "/index.php?option=com_users&view=login", "trap:login",
     "/index.php?option=com_users&view=profile"),
    ("joomla-task", "/index.php?task=user.login", "trap:login", "/index.php?task=user.view"),
    ("phpbb-login", "/ucp.php?mode=login", "trap:login", "/ucp.php?mode=register"),
    ("dokuwiki-login", "/doku.php?id=start&do=login", "trap:login", "/doku.php?id=start"),
    ("mediawiki-login", "/index.php?title=Special:UserLogin&returnto=Main",
     "trap:login", "/index.php?title=Factory_reset"),
    ("mediawiki-login-path", "/wiki/Special:UserLogin", "trap:login", "/wiki/Special:Search"),
    ("share", "/2024/05/hello/?share=twitter&nb=1", "trap:share", "/2024/05/hello/?shared=1"),
    ("share-email", "/p/?share=email", "trap:share", "/p/?sharer=1"),
    ("print-param", "/p/?print=1", "trap:print", "/p/?printer_model=x"),
    ("print-format", "/p/?format=print", "trap:print", "/p/?format=json"),
    ("mediawiki-printable", "/index.php?title=Main&printable=yes", "trap:print",
     "/index.php?title=Main"),
    ("drupal-print", "/print/node/12", "trap:print", "/printing/node/12"),
    ("drupal-printmail", "/printmail/12", "trap:print", "/mail/12"),
    ("wp-print", "/2024/05/hello/print/", "trap:print", "/2024/05/print-hello/"),
    ("joomla-mailto", "/index.php?option=com_mailto&tmpl=component", "trap:print",
     "/index.php?option=com_content"),
    ("logout-no-session", "/logout", "trap:login", "/log"),
    ("wp-logout-no-session", "/wp-login.php?action=logout&_wpnonce=1", "trap:login", "/"),
]


@pytest.mark.parametrize(("trap", "rule", "control"), [c[1:] for c in CMS_CASES],
                         ids=[c[0] for c in CMS_CASES])
def test_cms_trap_and_control(trap: str, rule: str, control: str) -> None:
    s = scope()
    trap_url, control_url = normalize(BASE + trap), normalize(BASE + control)
    assert s.decide(trap_url, 1, False) == Decision(False, "", rule)
    # the control stays a page under its rule (another built-in rule may skip it)
    assert cms_trap(control_url, (rule.removeprefix("trap:"),), False) is None
    assert cms_trap(trap_url, (), False) is None  # every trap can be turned off


# (id, logout URL) skipped under "logout" while there is a session to keep
LOGOUT_CASES = [
    ("logout", "/logout"), ("log-out", "/account/log-out/"), ("signout", "/signout"),
    ("sign-out", "/users/sign-out"), ("logoff", "/logoff.aspx"), ("logout-php", "/logout.php"),
    ("wp", "/wp-login.php?action=logout&_wpnonce=abc"), ("param", "/index.php?logout=1"),
    ("phpbb", "/ucp.php?mode=logout&sid=1"), ("joomla", "/index.php?task=user.logout"),
    ("dokuwiki", "/doku.php?do=logout"), ("mediawiki", "/wiki/Special:UserLogout"),
    ("mediawiki-query", "/index.php?title=Special%3AUserLogout&returnto=Main"),
]


@pytest.mark.parametrize("path", [c[1] for c in LOGOUT_CASES], ids=[c[0] for c in LOGOUT_CASES])
def test_logout_links(path: str) -> None:
    url = normalize(BASE + path)
    assert cms_trap(url, TRAPS, keep_session=True) == LOGOUT
    assert cms_trap(url, (), keep_session=True) == LOGOUT  # whatever the traps
    assert cms_trap(url, TRAPS, keep_session=True, requisite=True) == LOGOUT
    assert cms_trap(url, TRAPS, keep_session=False) == "trap:login"
    assert cms_trap(url, ("share",), keep_session=False) is None


@pytest.mark.parametrize("path", ["/blog/logout-tips", "/catalog/", "/images/logout.png",
                                  "/?do=edit", "/p?logouts=2"])
def test_logout_controls(path: str) -> None:
    assert cms_trap(normalize(BASE + path), ("login",), keep_session=True) is None


def test_session_comes_from_login_cookies_file_or_cookie_header(tmp_path: Path) -> None:
    def keeps(text: str) -> bool:
        return Scope.from_config(parse_config(SITE + text, tmp_path / "s.toml")).keep_session

    (tmp_path / "cookies.txt").write_text("# Netscape HTTP Cookie File\n", encoding="utf-8")
    assert not keeps("")
    assert keeps('[login]\nurl = "http://example.com/login"\n')
    assert keeps('[crawl]\ncookies_file = "cookies.txt"\n')
    assert not keeps('[crawl]\ncookies = false\ncookies_file = "cookies.txt"\n')
    assert keeps('[crawl.headers]\nCookie = "sid=1"\n')
    s = scope()
    assert s.decide(BASE + "/logout", 1, False).reason == "trap:login"


def test_requisites_meet_only_the_login_trap() -> None:
    s = scope()
    for path in ("/p/?share=twitter", "/p/?replytocom=2", "/print/logo.png", "/p/?print=1"):
        assert s.decide(BASE + path, 1, True) == Decision(True, PAGE, "in scope")
    # a protected image that redirects to the login form
    assert s.decide(BASE + "/wp-login.php?redirect_to=/img.png", 1, True).reason == "trap:login"
    off_site = "http://cdn.example.net/wp-login.php"
    assert s.decide(off_site, 1, True).reason == "trap:login"
    assert s.decide("http://cdn.example.net/x.png?share=1", 1, True).mode == REQUISITE


def test_other_rules_come_first() -> None:
    s = scope(exclude='["replytocom"]', max_depth=1)
    assert s.decide(BASE + "/p/?replytocom=1", 1, False).reason == "exclude"
    assert s.decide(BASE + "/p/?share=x", 2, False).reason == "max_depth"  # not fetched anyway
    assert s.decide("http://other.org/wp-login.php", 1, False).reason == "host"
    assert s.decide(BASE + "/a/a/a/login", 1, False).reason == "segment_repeats"


def test_traps_config() -> None:
    assert scope().traps == TRAPS == NAMES  # every built-in rule is on by default
    assert TRAPS[:4] == ("replytocom", "login", "share", "print")
    assert scope(traps="[]").decide(BASE + "/p/?replytocom=1", 1, False).allowed
    only = scope(traps='["share"]')
    assert only.decide(BASE + "/p/?share=x", 1, False).reason == "trap:share"
    assert only.decide(BASE + "/wp-login.php", 1, False).allowed
    with pytest.raises(ConfigError, match=r"\[scope\] traps\[0\]: expected a trap rule name"):
        scope(traps='["amp"]')


def wordpress_like(site: TestSite) -> None:
    """A blog: two posts with comment reply links, share and print links, a login link."""
    traps = ('<a href="?replytocom={n}">Reply</a> <a href="?share=twitter&nb=1">Tweet</a> '
             '<a href="?share=email">Mail</a> <a href="print/">Print</a> '
             '<a href="?print=1">Print 2</a> <a href="/wp-login.php?redirect_to={path}">Log in</a>'
             ' <a href="/wp-login.php?action=lostpassword">Lost your password?</a>')
    site.page("/", '<a href="/2024/hello/">Hello</a> <a href="/2024/again/">Again</a> '
              '<img src="/logo.png?share=1">')
    site.page("/logo.png", b"\x89PNG", content_type="image/png")
    for slug in ("hello", "again"):
        path = f"/2024/{slug}/"
        site.page(path, f"<h1>{slug}</h1>" + "".join(
            traps.format(n=n, path=path) for n in (1, 2, 3)))
        site.page(path + "print/", f"<h1>{slug} to print</h1>")
    site.page("/wp-login.php", "<form><input type=password></form>")


async def test_a_wordpress_like_site(crawl: Callable[..., Awaitable[Crawl]],
                                     make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    wordpress_like(site)
    result = await crawl([site.base], crawl={"workers": 2})
    assert sorted(set(site.log)) == ["/", "/2024/again/", "/2024/hello/", "/logo.png?share=1"]
    report = json.loads(next((result.archive / "reports").glob("*.json")).read_text())
    assert report["skipped"] == {"trap:replytocom": 6, "trap:share": 4, "trap:print": 4,
                                 "trap:login": 3}
    assert set(report["skipped_urls"]) == set(report["skipped"])
    result.assert_verifies()


async def test_a_wordpress_like_site_without_traps(
        crawl: Callable[..., Awaitable[Crawl]],
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    wordpress_like(site)
    result = await crawl([site.base], scope={"traps": []}, crawl={"workers": 2})
    assert site.count("/2024/hello/?replytocom=2") == 1
    assert site.count("/2024/hello/?share=twitter&nb=1") == 1
    assert site.count("/2024/hello/print/") == 1
    assert site.count("/wp-login.php?action=lostpassword") == 1
    report = json.loads(next((result.archive / "reports").glob("*.json")).read_text())
    assert not [rule for rule in report["skipped"] if rule.startswith("trap:")]


def test_decision_cache_keeps_max_depth_apart() -> None:
    """Discovery caches a reference's decision on "deeper than max_depth", not on the depth:
    the same link found at every depth in turn (shallow, deep, shallow again) is a page
    up to max_depth and skipped under max_depth past it, a requisite at any depth, and an
    invalid reference keeps no redirects left."""
    from mirror.crawl.discover import Discovery
    from mirror.model import LinkKind

    cfg = parse_config(SITE + "[scope]\nmax_depth = 2\n", Path("s.toml"))
    disc = Discovery(cfg, Scope.from_config(cfg))
    link = "http://example.com/a/b.html"
    for depth in (1, 2, 3, 2, 5, 0):
        new = disc.decide(link, depth, 4, False, LinkKind.LINK)
        assert (new.depth, new.redirects_left) == (depth, 4)
        if depth <= 2:
            assert (new.mode, new.skip_reason) == ("page", None)
        else:
            assert (new.mode, new.skip_reason) == ("", "max_depth")
        required = disc.decide(link, depth, 4, True, LinkKind.REQUISITE)
        assert required.mode == ("page" if depth <= 2 else "requisite")
    bad = disc.decide("http://exa mple.com/", 1, 4, False, LinkKind.LINK)
    assert bad.skip_reason and bad.redirects_left == 0
