"""Form login ([login]): the login form, its check, re-login when the session is lost, and
that neither the login exchange nor a field value reaches the archive or a message."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import Crawl, TestSite, write_config

from mirror.archive.warcwriter import Exchange
from mirror.config import SiteConfig, load_config
from mirror.crawl.fetch import Limits, fetch, open_session, site_cookie_jar
from mirror.crawl.login import (
    MAX_USELESS_LOGINS,
    LoginError,
    LoginKeeper,
    _scrub,
    forms_of,
    log_in,
    lost_session,
    shows_login_form,
)
from mirror.crawl.scope import Scope
from mirror.web.http import REDACTED

USER, PASSWORD = "alice-the-user", "pw-Very-Secret-42"
LIMITS = Limits(timeout=10, connect_timeout=5, read_timeout=5, max_bytes=1 << 20)
PAGE, LOGIN = "http://example.com/docs/page", "http://example.com/login"

LOGIN_FORM = """<html><body><h1>Log in</h1>{error}
<form action="/login" method="post">
<input type="hidden" name="csrf" value="{token}">
<input name="user"> <input type="password" name="password">
<input type="checkbox" name="remember" value="1">
<input type="submit" name="go" value="Log in"> <input type="submit" name="other" value="x">
</form></body></html>"""


class LoginSite:
    """A site whose pages need a session: / links to /p1../p5 and /logout; without a valid
    session a page redirects to /login?next=...; GET /login shows the form (and sets the
    CSRF cookie its hidden field must match); POST /login checks it all and sets `sid`.
    After `forget_after` pages on one session the site forgets it (0: never)."""

    def __init__(self, site: TestSite, forget_after: int = 0, pages: int = 5) -> None:
        self.site, self.forget_after = site, forget_after
        self.sessions: dict[str, int] = {}  # sid -> pages served
        self.posts: list[dict[str, str]] = []  # the login forms received
        self.tokens = itertools.count(1)
        links = "".join(f'<a href="/p{i}">page {i}</a> ' for i in range(1, pages + 1))
        site.handler("/", self.page(f"<p>home</p>{links}<a href='/logout'>Log out</a>"))
        for i in range(1, pages + 1):
            site.handler(f"/p{i}", self.page(f"<p>secret page {i}</p><a href='/'>home</a>"))
        site.handler("/welcome", self.page("<p>Welcome, alice</p>", counts=False))
        site.handler("/login", self.login)
        site.handler("/logout", self.logout)

    def page(self, body: str, counts: bool = True
             ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            sid = request.cookies.get("sid", "")
            if sid not in self.sessions:
                raise web.HTTPFound(f"/login?next={request.path}")
            self.sessions[sid] += counts
            if self.forget_after and self.sessions[sid] > self.forget_after:
                del self.sessions[sid]  # expired: this and later requests go to the form
                raise web.HTTPFound(f"/login?next={request.path}")
            return web.Response(text=f"<html><body>{body}</body></html>",
                                content_type="text/html")
        return handler

    async def login(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and "user" not in request.query:
            token = f"t{next(self.tokens)}"
            resp = web.Response(text=LOGIN_FORM.format(error="", token=token),
                                content_type="text/html")
            resp.set_cookie("csrftoken", token)
            return resp
        form = dict(await request.post()) if request.method == "POST" else dict(request.query)
        self.posts.append({k: str(v) for k, v in form.items()})
        csrf_ok = request.method == "GET" or (
            form.get("csrf") == request.cookies.get("csrftoken") and "go" in form)
        if form.get("user") != USER or form.get("password") != PASSWORD or not csrf_ok:
            return web.Response(text=LOGIN_FORM.format(error="<p>Wrong password</p>",
                                                       token="t0"), content_type="text/html")
        sid = f"sid{len(self.posts)}"
        self.sessions[sid] = 0
        resp = web.HTTPFound("/welcome")
        resp.set_cookie("sid", sid)
        raise resp

    async def logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.pop(request.cookies.get("sid", ""), None)
        raise web.HTTPFound("/")


def login_config(tmp_path: Path, site: TestSite, **login: Any) -> SiteConfig:
    keys = {"url": site.base + "login",
            "fields": {"user": USER, "password": {"env": "MIRROR_TEST_PASSWORD"}}, **login}
    return load_config(write_config(tmp_path, [site.base], login=keys))


@pytest.fixture(autouse=True)
def password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_TEST_PASSWORD", PASSWORD)


async def body_of(session: object, url: str) -> tuple[int, bytes]:
    ex = await fetch(session, url, LIMITS)  # type: ignore[arg-type]
    try:
        return ex.status, ex.body.read()
    finally:
        ex.body.close()


# -- the login form, pure ------------------------------------------------------------------

FORM_CASES = [
    ("wordpress", '<form name="loginform" action="http://example.com/login" method="post">'
     '<input type="text" name="log"><input type="password" name="pwd"></form>', True),
    ("action-resolves", '<form action="../login?next=/docs/page"><input name=u></form>', True),
    ("base-href", '<base href="http://example.com/a/b/"><form action="/login"></form>', True),
    ("one-password-elsewhere", '<form action="/session"><input type=password></form>', True),
    ("password-outside-a-form", '<div><input type="PASSWORD" name="p"></div>', True),
    ("signup-two-passwords", '<form action="/register"><input type=password name=a>'
     '<input type=password name=b></form>', False),
    ("search-form", '<form action="/search"><input name=q><input type=submit></form>', False),
    ("other-host-login", '<form action="http://other.org/login"></form>', False),
    ("no-form", "<p>just a page about /login</p>", False),
]


@pytest.mark.parametrize(("html", "shown"), [c[1:] for c in FORM_CASES],
                         ids=[c[0] for c in FORM_CASES])
def test_shows_login_form(html: str, shown: bool) -> None:
    assert shows_login_form(html.encode(), PAGE, LOGIN) is shown


def test_forms_of_keeps_hidden_fields_and_one_submit() -> None:
    forms = forms_of(LOGIN_FORM.format(error="", token="abc").encode(), LOGIN)
    assert len(forms) == 1
    assert forms[0].action == LOGIN and forms[0].passwords == 1
    assert forms[0].fields == [("csrf", "abc"), ("go", "Log in")]


def gz(text: str) -> bytes:
    return gzip.compress(text.encode())


LOST_CASES = [
    ("redirect-to-login", 302, {"location": "/login?next=/docs/page"}, b"", True),
    ("redirect-to-wp-login", 302, {"location": "/wp-login.php?redirect_to=x"}, b"", True),
    ("redirect-elsewhere", 301, {"location": "/docs/page/"}, b"", False),
    ("form-shown", 200, {"content-type": "text/html"},
     b'<form action="/login"><input type=password></form>', True),
    ("form-shown-gzip", 200, {"content-type": "text/html; charset=utf-8",
                              "content-encoding": "gzip"},
     gz('<form action="/login"><input type=password></form>'), True),
    ("ordinary-page", 200, {"content-type": "text/html"}, b"<p>hello</p>", False),
    ("not-html", 200, {"content-type": "text/plain"}, b"<input type=password>", False),
    ("error-page", 404, {"content-type": "text/html"}, b"<input type=password>", False),
    ("bad-gzip", 200, {"content-type": "text/html", "content-encoding": "gzip"}, b"xx", False),
]


@pytest.mark.parametrize(("status", "headers", "body", "lost"), [c[1:] for c in LOST_CASES],
                         ids=[c[0] for c in LOST_CASES])
def test_lost_session(status: int, headers: dict[str, str], body: bytes, lost: bool) -> None:
    assert lost_session(PAGE, status, headers, body, LOGIN) is lost


def test_scrub_hides_values_as_is_and_encoded() -> None:
    message = "GET http://h/login?user=a+b&password=p%26w%3D failed for p&w= and a b"
    assert _scrub(message, ["a b", "p&w="]) == (
        f"GET http://h/login?user={REDACTED}&password={REDACTED} failed for {REDACTED} "
        f"and {REDACTED}")


# -- log_in on a real site -----------------------------------------------------------------


async def session_for(cfg: SiteConfig) -> Any:
    return open_session("t", 4, site_cookie_jar(cfg.crawl, Scope.from_config(cfg).on_site))


async def test_log_in_then_pages_show(tmp_path: Path,
                                      make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    app = LoginSite(site)
    cfg = login_config(tmp_path, site)
    async with await session_for(cfg) as session:
        assert (await body_of(session, site.base + "p1"))[0] == 302
        outcome = await log_in(session, cfg, LIMITS)
        assert (outcome.status, outcome.url, outcome.check) == (
            200, site.base + "welcome", "no login form")
        assert await body_of(session, site.base + "p1") == (
            200, b"<html><body><p>secret page 1</p><a href='/'>home</a></body></html>")
    # the form's hidden field and first submit button went with the configured fields
    assert app.posts == [{"csrf": "t1", "go": "Log in", "user": USER, "password": PASSWORD}]


@pytest.mark.parametrize(("success", "check"), [("Welcome, alice", "text"), (302, "status"),
                                                (200, "status")])
async def test_log_in_success_checks(tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
                                     success: str | int, check: str) -> None:
    site = await make_site()
    LoginSite(site)
    cfg = login_config(tmp_path, site, success=success)
    async with await session_for(cfg) as session:
        assert (await log_in(session, cfg, LIMITS)).check == check


@pytest.mark.parametrize(("login", "message"), [
    ({"fields": {"user": USER, "password": "wrong-" + PASSWORD}},
     "shows the login form again: wrong user name or password?"),
    ({"fields": {"user": USER, "password": "wrong-" + PASSWORD}, "success": "Welcome"},
     "does not show the [login] success text"),
    ({"success": 201}, "(302 -> 200, from {base}welcome) does not have the [login] success "
                       "status 201"),
    ({"url": "{base}missing"}, "(404, from {base}missing) is an error"),
    ({"url": "http://127.0.0.1:9/login"}, "cannot log in at http://127.0.0.1:9/login: connect:"),
])
async def test_log_in_failures_never_show_values(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]],
        caplog: pytest.LogCaptureFixture, login: dict[str, Any], message: str) -> None:
    caplog.set_level(logging.DEBUG)
    site = await make_site()
    LoginSite(site)
    login = {k: v.format(base=site.base) if isinstance(v, str) else v for k, v in login.items()}
    cfg = login_config(tmp_path, site, **login)
    async with await session_for(cfg) as session:
        with pytest.raises(LoginError) as info:
            await log_in(session, cfg, LIMITS)
    assert message.format(base=site.base) in str(info.value)
    for text in (str(info.value), caplog.text):
        assert PASSWORD not in text and USER not in text


async def test_log_in_with_get(tmp_path: Path,
                               make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    app = LoginSite(site)
    cfg = login_config(tmp_path, site, method="GET")
    async with await session_for(cfg) as session:
        assert (await log_in(session, cfg, LIMITS)).url == site.base + "welcome"
        assert (await body_of(session, site.base + "p2"))[0] == 200
    assert app.posts == [{"user": USER, "password": PASSWORD}]


# -- staying logged in ---------------------------------------------------------------------


async def test_keeper_logs_in_again_when_the_session_expires(
        tmp_path: Path, make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    app = LoginSite(site, forget_after=2)
    cfg = login_config(tmp_path, site)
    async with await session_for(cfg) as session:
        keeper = LoginKeeper(session, cfg, LIMITS)
        await keeper.log_in()

        async def get(path: str) -> Exchange:
            return await keeper.fetch(lambda: fetch(session, site.base + path, LIMITS))

        statuses = []
        for path in ("p1", "p2", "p3", "p4", "p5"):
            ex = await get(path)
            statuses.append((ex.status, ex.body.read()))
            ex.body.close()
    assert [s for s, _ in statuses] == [200] * 5
    assert all(f"secret page {i}".encode() in b for i, (_, b) in enumerate(statuses, 1))
    assert keeper.logins == len(app.posts) == 3  # the first, after p2, after p4
    assert site.count("/p3") == 2  # refetched once after the re-login


async def test_workers_share_one_relogin(tmp_path: Path,
                                         make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    app = LoginSite(site, pages=6)
    cfg = login_config(tmp_path, site)
    async with await session_for(cfg) as session:
        keeper = LoginKeeper(session, cfg, LIMITS)
        await keeper.log_in()
        app.sessions.clear()  # the site forgets every session at once
        paths = [f"p{i}" for i in range(1, 7)]
        exes = await asyncio.gather(*(keeper.fetch(
            lambda p=p: fetch(session, site.base + p, LIMITS)) for p in paths))  # type: ignore[misc]
        assert [ex.status for ex in exes] == [200] * 6
        for ex in exes:
            ex.body.close()
    assert keeper.logins == len(app.posts) == 2


async def test_useless_relogins_stop(tmp_path: Path,
                                     make_site: Callable[[], Awaitable[TestSite]],
                                     caplog: pytest.LogCaptureFixture) -> None:
    site = await make_site()
    LoginSite(site)
    site.page("/register", '<form action="/login"><input type=password></form>')
    cfg = login_config(tmp_path, site)
    async with await session_for(cfg) as session:
        keeper = LoginKeeper(session, cfg, LIMITS)
        await keeper.log_in()
        for _ in range(MAX_USELESS_LOGINS + 2):
            ex = await keeper.fetch(lambda: fetch(session, site.base + "register", LIMITS))
            ex.body.close()
    assert keeper.logins == 1 + MAX_USELESS_LOGINS and not keeper.relogin
    assert "no more logging in again" in caplog.text


# -- a crawl behind a login -------------------------------------------------------------------

async def test_a_crawl_behind_a_login(crawl: Callable[..., Awaitable[Crawl]],
                                      make_site: Callable[[], Awaitable[TestSite]],
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site = await make_site()
    app = LoginSite(site)
    login = {"url": site.base + "login",
             "fields": {"user": USER, "password": {"env": "MIRROR_TEST_PASSWORD"}}}
    result = await crawl([site.base], login=login, crawl={"workers": 2})
    bodies = {u: r[0]["payload"] for u, r in result.responses().items()}
    for i in range(1, 6):
        assert f"secret page {i}".encode() in bodies[f"{site.base}p{i}"]
    assert result.skipped()[site.base + "logout"] == "logout"
    assert site.count("/logout") == 0 and len(app.sessions) == 1 and len(app.posts) == 1
    records = result.records()
    assert not [r for r in records if "login" in (r["uri"] or "") or "welcome" in (r["uri"] or "")]
    assert {r["http"].protocol for r in records if r["type"] == "request"} == {"GET"}
    raw = b"".join(gzip.decompress(p.read_bytes())
                   for p in (result.archive / "warc").glob("*.warc.gz"))
    assert PASSWORD.encode() not in raw and USER.encode() not in raw
    assert PASSWORD not in caplog.text and USER not in caplog.text
    result.assert_verifies()


async def test_a_crawl_logs_in_again_when_the_session_expires(
        crawl: Callable[..., Awaitable[Crawl]],
        make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    app = LoginSite(site, forget_after=2)
    login = {"url": site.base + "login",
             "fields": {"user": USER, "password": {"env": "MIRROR_TEST_PASSWORD"}}}
    result = await crawl([site.base], login=login, crawl={"workers": 1})
    bodies = {u: r[0]["payload"] for u, r in result.responses().items()}
    for i in range(1, 6):
        assert f"secret page {i}".encode() in bodies[f"{site.base}p{i}"]
    assert len(app.posts) >= 3
    assert not [u for u in bodies if "login" in u]


async def test_a_failed_login_stops_the_run(crawl: Callable[..., Awaitable[Crawl]],
                                            make_site: Callable[[], Awaitable[TestSite]]) -> None:
    site = await make_site()
    LoginSite(site)
    login = {"url": site.base + "login", "fields": {"user": USER, "password": "nope"}}
    result = await crawl([site.base], login=login)
    assert result.result.error is not None and "shows the login form again" in result.result.error
    assert "nope" not in result.result.error
    assert (result.result.exit_code, result.result.state) == (2, "interrupted")  # resumable
    assert result.responses() == {}
