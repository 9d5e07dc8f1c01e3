"""Cookies of a run: a Netscape cookies.txt read into records, and the site-only rule (no I/O
but reading the file; the aiohttp jar that applies them is fetch.SiteCookieJar)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, Morsel
from pathlib import Path

from mirror.errors import MirrorError
from mirror.web.urls import InvalidURL, normalize

#: the prefix curl and browser extensions put before the domain of an HttpOnly cookie
HTTP_ONLY_PREFIX = "#HttpOnly_"
_FIELDS = "domain, include-subdomains, path, secure, expiry, name, value"
_FLAGS = {"TRUE": True, "FALSE": False}


class CookieFileError(MirrorError, ValueError):
    """A cookies.txt that cannot be used; str(exc) names the file and line, never a value."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")
        self.source = source
        self.line = line


@dataclass(frozen=True)
class FileCookie:
    """One line of a cookies.txt; repr() hides the value."""

    domain: str  # without the leading dot
    include_subdomains: bool
    path: str
    secure: bool
    expires: int  # seconds since the epoch; 0 for a session cookie
    name: str
    value: str
    http_only: bool = False

    def __repr__(self) -> str:
        return f"FileCookie({self.domain!r}, {self.path!r}, {self.name!r}, value=<redacted>)"

    @property
    def url(self) -> str:
        """An address the cookie could have come from (the jar takes its host and path)."""
        return f"{'https' if self.secure else 'http'}://{self.domain}{self.path}"

    def morsel(self, now: float | None = None) -> Morsel[str]:
        """The cookie as a Set-Cookie would have given it to the jar."""
        morsel: Morsel[str] = Morsel()
        morsel.set(self.name, self.value, self.value)
        morsel["path"] = self.path
        if self.include_subdomains:
            morsel["domain"] = self.domain  # else a host-only cookie, for url's host alone
        if self.secure:
            morsel["secure"] = True
        if self.http_only:
            morsel["httponly"] = True
        if self.expires:
            left = self.expires - (time.time() if now is None else now)
            morsel["max-age"] = str(max(int(left), 1))
        return morsel


def read_cookies_txt(path: Path, now: float | None = None) -> list[FileCookie]:
    """The unexpired cookies of a Netscape cookies.txt. Raises CookieFileError."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
        raise CookieFileError(str(path), None, f"cannot read: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise CookieFileError(str(path), None,
                              f"cannot read: not UTF-8 text (byte {exc.start})") from exc
    return parse_cookies_txt(text, str(path), now)


def parse_cookies_txt(text: str, source: str = "cookies.txt",
                      now: float | None = None) -> list[FileCookie]:
    """Cookies of the text of a cookies.txt, expired ones left out. Raises CookieFileError.

    One cookie a line: seven tab-separated fields (domain, include-subdomains TRUE/FALSE,
    path, secure TRUE/FALSE, expiry in seconds since the epoch with 0 for a session
    cookie, name, value); a line starting "#HttpOnly_" is an HttpOnly cookie, other lines
    starting "#" and blank lines are comments. A missing value (six fields) is empty.
    """
    now = time.time() if now is None else now
    cookies = []
    for number, line in enumerate(text.splitlines(), 1):
        http_only = line.startswith(HTTP_ONLY_PREFIX)
        line = line.removeprefix(HTTP_ONLY_PREFIX)
        if not line.strip() or (line.startswith("#") and not http_only):
            continue
        try:
            cookie = _cookie(line, http_only)
        except ValueError as exc:
            raise CookieFileError(source, number, str(exc)) from None
        if not cookie.expires or cookie.expires > now:
            cookies.append(cookie)
    return cookies


def _cookie(line: str, http_only: bool) -> FileCookie:
    fields = line.split("\t")
    if len(fields) == 6:
        fields.append("")
    if len(fields) != 7:
        hint = "; fields are separated by tabs, not spaces" if len(fields) == 1 else ""
        raise ValueError(f"expected 7 tab-separated fields ({_FIELDS}), "
                         f"found {len(fields)}{hint}")
    domain, subdomains, path, secure, expiry, name, value = fields
    domain = domain.strip().lower()
    if not domain.lstrip(".") or any(c in domain for c in " /\\:;,"):
        raise ValueError("domain: expected a host name such as .example.com")
    for label, flag in (("include-subdomains", subdomains), ("secure", secure)):
        if flag.strip().upper() not in _FLAGS:
            raise ValueError(f"{label}: expected TRUE or FALSE")
    if not path.startswith("/"):
        raise ValueError("path: expected a path starting with /")
    try:
        expires = int(float(expiry))
    except (ValueError, OverflowError):
        raise ValueError("expiry: expected seconds since 1970 (0 for a session cookie)") \
            from None
    probe: Morsel[str] = Morsel()
    try:
        probe.set(name, value, value)
    except CookieError:
        raise ValueError("name: not a valid cookie name") from None
    if any(c in value for c in "\r\n\0;"):
        raise ValueError("value: has a character a Cookie header cannot carry")
    return FileCookie(
        domain=domain.lstrip("."),
        include_subdomains=_FLAGS[subdomains.strip().upper()] or domain.startswith("."),
        path=path, secure=_FLAGS[secure.strip().upper()], expires=max(expires, 0),
        name=name, value=value, http_only=http_only)


def site_filter(on_site: Callable[[str], bool]) -> Callable[[str], bool]:
    """on_site (it wants canonical URLs: Scope.on_site) for any URL the jar is handed."""

    def allowed(url: str) -> bool:
        try:
            return on_site(normalize(url))
        except InvalidURL:
            return False

    return allowed
