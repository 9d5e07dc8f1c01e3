"""Form login ([login]): made before the crawl and again when a page shows the login form;
the login exchange is never archived, and no message ever holds a field's value."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import quote_plus

from mirror.archive.warcwriter import Exchange
from mirror.config import SiteConfig
from mirror.crawl.fetch import FetchError, FormAnswer, Limits, Session, send_form
from mirror.crawl.scope import TRAP_RULE, Scope, cms_trap
from mirror.errors import UsageError
from mirror.web.charset import decode_text, sniff_charset
from mirror.web.codings import DecodeError, decode_body
from mirror.web.html import base_url
from mirror.web.http import HTML_TYPES, REDACTED, REDIRECT_STATUSES, header_map, mime_of
from mirror.web.urls import InvalidURL, join, normalize

log = logging.getLogger(__name__)

#: most bytes of a page read to look for the login form
MAX_LOOK_BYTES = 2_000_000
#: re-logins in a row after which the page still shows the form: then no more of them
MAX_USELESS_LOGINS = 3


class LoginError(UsageError):
    """A login that failed; str(exc) says why, without any field's value."""


@dataclass(frozen=True)
class LoginOutcome:
    url: str  # where the answer came from, after redirects (its query left out)
    status: int  # the last answer's status
    check: str  # what showed success: "text", "status" or "no login form"


@dataclass
class Form:
    """A <form> as a login needs it: where it goes and what it sends unasked."""

    action: str  # absolute URL the form is sent to
    passwords: int = 0  # password inputs in it
    fields: list[tuple[str, str]] = field(default_factory=list)  # hidden inputs, a submit


class _Forms(HTMLParser):
    def __init__(self, page_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page_url, self.base = page_url, page_url
        self.forms: list[Form] = []
        self.form: Form | None = None  # the open one
        self.submit = False  # the open form has its submit button

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "base" and "href" in a and self.base == self.page_url:
            self.base = base_url(self.page_url, a["href"])
        elif tag == "form":
            action = a.get("action", "").strip()
            try:
                target = join(self.base, action) if action else self.page_url
            except InvalidURL:
                target = ""
            self.form, self.submit = Form(target), False
            self.forms.append(self.form)
        elif tag in ("input", "button"):
            self._input(tag, a)

    def _input(self, tag: str, a: dict[str, str]) -> None:
        kind = a.get("type", "submit" if tag == "button" else "text").lower()
        if kind == "password":
            if self.form is None:  # a password box outside a form: a form all the same
                self.form = Form(self.page_url)
                self.forms.append(self.form)
            self.form.passwords += 1
        elif self.form is None or not a.get("name"):
            return
        elif kind == "hidden":
            self.form.fields.append((a["name"], a.get("value", "")))
        elif kind in ("submit", "image") and not self.submit:
            self.form.fields.append((a["name"], a.get("value", "")))
            self.submit = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form = None


def forms_of(html: bytes | str, page_url: str) -> list[Form]:
    """The forms of an HTML page (bytes: its charset is sniffed)."""
    parser = _Forms(page_url)
    parser.feed(_text(html) if isinstance(html, bytes) else html)
    parser.close()
    return parser.forms


def _text(html: bytes) -> str:
    return decode_text(html, sniff_charset(html, None))


def same_address(a: str, b: str) -> bool:
    """Do two URLs name the same resource, their query aside?"""
    try:
        return normalize(a).partition("?")[0] == normalize(b).partition("?")[0]
    except InvalidURL:
        return False


def login_form(forms: Sequence[Form], login_url: str) -> Form | None:
    """The login form: one sent to the login URL, else one with a single password box
    (a sign-up or change-password form has two)."""
    for form in forms:
        if same_address(form.action, login_url):
            return form
    return next((form for form in forms if form.passwords == 1), None)


def shows_login_form(html: bytes, page_url: str, login_url: str) -> bool:
    """Does this page show the login form (the session was lost, or never made)?"""
    text = _text(html)
    folded, last = text.lower(), login_url.partition("?")[0].rstrip("/").rpartition("/")[2]
    if "password" not in folded and last.lower() not in folded:
        return False  # most pages: no parsing needed
    return login_form(forms_of(text, page_url), login_url) is not None


def lost_session(url: str, status: int, headers: dict[str, str], body: bytes,
                 login_url: str) -> bool:
    """Is this answer the site asking to log in: a redirect to the login URL (or to
    another login address), or an HTML page showing the login form? `headers`: lower-cased
    names; `body` as received (content-coded)."""
    if status in REDIRECT_STATUSES and "location" in headers:
        try:
            target = normalize(join(url, headers["location"]))
        except InvalidURL:
            return False
        return same_address(target, login_url) or \
            cms_trap(target, ("login",), False) == TRAP_RULE + "login"
    if not 200 <= status < 300 or mime_of(headers.get("content-type")) not in HTML_TYPES:
        return False
    try:
        html, _ = decode_body(body, headers.get("content-encoding"), MAX_LOOK_BYTES)
    except DecodeError:
        return False
    return shows_login_form(html, url, login_url)


async def log_in(session: Session, cfg: SiteConfig, limits: Limits) -> LoginOutcome:
    """Send the [login] form and check the answer ([login] success: a text it shows or a
    status it has; by default a status below 400 and no login form). Raises LoginError.

    A POST form is first fetched with GET, for the cookies that page sets and its hidden
    fields (a CSRF token), which [login] fields override. Nothing here is archived.
    """
    login = cfg.login
    if not login.url:
        raise LoginError("no [login] url")
    # a GET login puts the values in URLs, which error messages may quote
    secrets = [value for _, value in login.fields if value] if login.method == "GET" else []
    try:
        on_site = Scope.from_config(cfg).on_site(normalize(login.url))
    except InvalidURL:
        on_site = False
    headers = cfg.headers_for(on_site)
    fields = list(login.fields)
    try:
        if login.method == "POST":
            given = {name for name, _ in fields}
            fields = [f for f in await _form_fields(session, login.url, limits, headers)
                      if f[0] not in given] + fields
            headers = {**headers, "Referer": login.url}
        answer = await send_form(session, login.url, login.method, fields, limits, headers,
                                 cfg.crawl.max_redirects)
    except FetchError as exc:
        raise LoginError(_scrub(f"cannot log in at {login.url}: {exc}", secrets)) from None
    try:
        outcome = _check(answer, cfg)
    except LoginError as exc:
        raise LoginError(_scrub(str(exc), secrets)) from None
    log.info("logged in at %s (%s)", login.url, outcome.check)
    return outcome


async def _form_fields(session: Session, url: str, limits: Limits,
                       headers: dict[str, str]) -> list[tuple[str, str]]:
    """Hidden fields (and the submit button) of the login form the login URL shows."""
    try:
        page = await send_form(session, url, "GET", [], limits, headers)
    except FetchError as exc:
        log.debug("cannot read the login form at %s: %s", url, exc)
        return []
    html = _html(page)
    form = login_form(forms_of(html, page.url), url) if html is not None else None
    return form.fields if form is not None else []


def _html(answer: FormAnswer) -> bytes | None:
    try:
        return decode_body(answer.body, answer.headers.get("content-encoding"),
                           MAX_LOOK_BYTES)[0]
    except DecodeError:
        return None


def _check(answer: FormAnswer, cfg: SiteConfig) -> LoginOutcome:
    login, status = cfg.login, answer.statuses[-1]
    where = answer.url.partition("?")[0]
    statuses = " -> ".join(map(str, answer.statuses))
    failed = f"login at {login.url} failed: the answer ({statuses}, from {where})"
    html = _html(answer) or b""
    if isinstance(login.success, int):
        if login.success not in answer.statuses:
            raise LoginError(f"{failed} does not have the [login] success status "
                             f"{login.success}")
        return LoginOutcome(where, status, "status")
    if login.success:
        text = decode_text(html, sniff_charset(html, answer.headers.get("content-type")))
        if login.success not in text:
            raise LoginError(f"{failed} does not show the [login] success text")
        return LoginOutcome(where, status, "text")
    if status >= 400:
        raise LoginError(f"{failed} is an error")
    if shows_login_form(html, answer.url, login.url):
        raise LoginError(f"{failed} shows the login form again: wrong user name or "
                         "password? ([login] success sets what a logged-in page shows)")
    return LoginOutcome(where, status, "no login form")


def _scrub(message: str, secrets: Sequence[str]) -> str:
    """message with each field value (as is and URL-encoded) replaced by REDACTED."""
    for value in sorted(secrets, key=len, reverse=True):
        for form in {value, quote_plus(value), quote_plus(value, safe="")}:
            message = message.replace(form, REDACTED)
    return message


class LoginKeeper:
    """Keeps a crawl logged in: log_in() before it; fetch() logs in again when a page shows
    the login form, once for all workers, and fetches that page once more."""

    def __init__(self, session: Session, cfg: SiteConfig, limits: Limits) -> None:
        self.session, self.cfg, self.limits = session, cfg, limits
        self.logins = 0  # logins made (so a worker knows another one logged in meanwhile)
        self.relogin = bool(cfg.login.url)  # off after MAX_USELESS_LOGINS in a row
        self._useless = 0
        self._lock = asyncio.Lock()

    async def log_in(self) -> LoginOutcome:
        async with self._lock:
            outcome = await log_in(self.session, self.cfg, self.limits)
            self.logins += 1
            return outcome

    def lost(self, ex: Exchange) -> bool:
        """Does this exchange show the session was lost (lost_session on its body)?"""
        headers = header_map(ex.response_headers)
        if not self.relogin or (ex.status not in REDIRECT_STATUSES and mime_of(
                headers.get("content-type")) not in HTML_TYPES):
            return False  # an image, say: its body is not read
        ex.body.seek(0)
        body = ex.body.read(MAX_LOOK_BYTES)
        ex.body.seek(0)
        return lost_session(ex.url, ex.status, headers, body, self.cfg.login.url)

    async def fetch(self, fetch_once: Callable[[], Awaitable[Exchange]]) -> Exchange:
        """fetch_once(); if the answer asks to log in: log in again (unless another worker
        just did) and fetch_once() again. Raises what fetch_once and log_in raise."""
        logins = self.logins
        ex = await fetch_once()
        if not self.lost(ex):
            return ex
        ex.body.close()
        async with self._lock:
            if self.logins == logins:
                log.info("%s asks to log in: logging in again", ex.url)
                await log_in(self.session, self.cfg, self.limits)
                self.logins += 1
        ex = await fetch_once()
        if not self.lost(ex):
            self._useless = 0
        elif (useless := self._useless + 1) >= MAX_USELESS_LOGINS:
            log.warning("pages still show the login form after %d logins in a row: no more "
                        "logging in again during this run", useless)
            self.relogin = False
        else:
            self._useless = useless
        return ex
