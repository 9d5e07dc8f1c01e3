"""Site configuration: one TOML file -> a validated, frozen SiteConfig (nothing else sees dicts)."""

import dataclasses
import datetime as dt
import ipaddress
import json
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, get_type_hints
from urllib.parse import urlsplit

from mirror import __version__
from mirror.schedule.spec import FORMS, Schedule, ScheduleError, parse_schedule
from mirror.web.http import REDACTED, SECRET_HEADERS
from mirror.web.urls import DEFAULT_IGNORE_QUERY


class ConfigError(Exception):
    """A config file that cannot be used; str(exc) is the whole user-facing message, e.g.

    "site.toml: [crawl] workers: expected an integer >= 1, found 'sixteen' (a string)"
    "site.toml: [crawl] worker: unknown key; did you mean 'workers'?"
    "site.toml: [site] name: required key is missing"
    "site.toml: line 3, column 7: invalid TOML: Invalid value"
    "site.toml: cannot read: [Errno 2] No such file or directory"

    `key` is "section.key" ("section" for a whole section, the bare name for an unknown
    top-level key) and None for file-level errors (unreadable file, invalid TOML).
    `message` is the problem, `hint` the advice after it ("did you mean 'workers'?", or "")
    and `detail` both, as str(exc) shows them after the file name. `errors` lists every
    problem of the file: this one alone, or each of a ConfigErrors.
    """

    def __init__(self, path: Path, key: str | None, message: str, hint: str = "") -> None:
        self.path, self.key, self.message, self.hint = path, key, message, hint
        self.detail = f"{message}; {hint}" if hint else message
        super().__init__(f"{path}: {self.detail}")

    @property
    def errors(self) -> "list[ConfigError]":
        return [self]


class ConfigErrors(ConfigError):
    """Several problems of one file, in the order the file is checked: str(exc) lists them
    one a line; path, key, message and hint are the first one's, for callers that show one."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.path, first.key, first.message, first.hint)
        self.args = ("\n".join(map(str, errors)),)
        self._errors = errors

    @property
    def errors(self) -> "list[ConfigError]":
        return list(self._errors)


def config_error(errors: list[ConfigError]) -> ConfigError:
    """One error for a non-empty list: itself when alone, else a ConfigErrors of all."""
    flat = [one for error in errors for one in error.errors]
    return flat[0] if len(flat) == 1 else ConfigErrors(flat)


# --- rules: one per key, each checks a raw TOML value and converts it -----------------------


@dataclass(frozen=True)
class _Context:
    base: Path  # folder of the config file; relative paths are resolved against it


class _Invalid(Exception):
    """A value broke its rule; `where` locates it inside the key, e.g. "[2]" or ".Cookie"."""

    def __init__(self, detail: str, where: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.where = where


Rule = Callable[[Any, _Context], Any]


def _type_name(value: object) -> str:
    # bool before int: True is an int to Python but never to a config file.
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a float"),
                       (str, "a string"), (list, "an array"), (dict, "a table"),
                       (dt.datetime, "a datetime"), (dt.date, "a date"), (dt.time, "a time")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _describe(value: object, *, secret: bool = False) -> str:
    if secret:
        shown = REDACTED
    elif isinstance(value, dt.date | dt.time):
        shown = value.isoformat()
    else:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
    return f"{shown} ({_type_name(value)})"


def _expected(expected: str, value: object, where: str = "", *, secret: bool = False) -> _Invalid:
    return _Invalid(f"expected {expected}, found {_describe(value, secret=secret)}", where)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(expected: str, ok: Callable[[Any], bool],
           convert: Callable[[Any], Any] = lambda v: v) -> Rule:
    def rule(value: Any, ctx: _Context) -> Any:
        if not ok(value):
            raise _expected(expected, value)
        return convert(value)
    return rule


#: the least value of each number rule, and whether that value is allowed (>=) or not (>)
_MINIMUM: dict[Rule, tuple[float, bool]] = {}


def _integer(minimum: int) -> Rule:
    rule = _check(f"an integer >= {minimum}", lambda v: _is_int(v) and v >= minimum)
    _MINIMUM[rule] = (minimum, True)
    return rule


def _number(minimum: float, *, inclusive: bool) -> Rule:
    """A finite float (an integer is accepted and converted), >= or > minimum."""
    def ok(v: Any) -> bool:
        if not (_is_int(v) or isinstance(v, float)) or not math.isfinite(v):
            return False
        return bool(v >= minimum if inclusive else v > minimum)
    rule = _check(f"a number {'>=' if inclusive else '>'} {minimum:g}", ok, float)
    _MINIMUM[rule] = (minimum, inclusive)
    return rule


def _boolean() -> Rule:
    return _check("true or false", lambda v: isinstance(v, bool))


def _string(expected: str, ok: Callable[[str], bool] = bool,
            convert: Callable[[str], Any] = lambda s: s) -> Rule:
    return _check(expected, lambda v: isinstance(v, str) and ok(v), convert)


def _choice(*choices: str) -> Rule:
    return _string("one of " + ", ".join(map(repr, choices)), lambda s: s in choices)


def _array(item: Rule, expected: str, *, nonempty: bool = False) -> Rule:
    """An array checked item by item; errors name the index: "include[2]"."""
    def rule(value: Any, ctx: _Context) -> tuple[Any, ...]:
        if not isinstance(value, list) or (nonempty and not value):
            raise _expected(expected, value)
        items = []
        for index, element in enumerate(value):
            try:
                items.append(item(element, ctx))
            except _Invalid as exc:
                raise _Invalid(exc.detail, f"[{index}]{exc.where}") from None
        return tuple(items)
    return rule


def _store_url(value: Any, ctx: _Context) -> str:
    """"" (none), or an s3://bucket/prefix address; the reason when it is not one."""
    if not isinstance(value, str):
        raise _expected("an address such as 's3://bucket/prefix'", value)
    if not value.strip():
        return ""
    from mirror.archive.objstore import parse_store_url  # light: obstore loads on use only

    try:
        bucket, prefix = parse_store_url(value.strip())
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    return f"s3://{bucket}" + (f"/{prefix}" if prefix else "")


def _is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return False
    host = parts.hostname or ""
    # urlsplit drops tabs and newlines (as browsers do); a site file means none of them
    return (parts.scheme.lower() in ("http", "https") and bool(host)
            and not re.search(r"\s", host) and not re.search(r"[\x00-\x1f\x7f]", text.strip()))


def _ipv6(text: str) -> str | None:
    """An IPv6 address, bracketed or not, in the form urls.host_of gives ("[::1]"); else None."""
    try:
        return f"[{ipaddress.IPv6Address(text.removeprefix('[').removesuffix(']')).compressed}]"
    except ValueError:
        return None


def _is_host(text: str) -> bool:
    """A bare host: no scheme, port, path or wildcard; only an IPv6 address has colons."""
    text = text.strip()
    if ":" in text:
        return _ipv6(text) is not None
    return re.fullmatch(r"[^\s/\\?#@*\[\]]+", text) is not None


def _host(text: str) -> str:
    text = text.strip().lower()
    return _ipv6(text) or text


def _regex(value: Any, ctx: _Context) -> str:
    if not isinstance(value, str):
        raise _expected("a regular expression (a string)", value)
    try:
        re.compile(value)
    except re.error as exc:
        raise _Invalid(f"invalid regular expression: {exc}") from None
    return value


def _directory(value: Any, ctx: _Context) -> Path:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise _expected("a non-empty path", value)
    return Path(os.path.abspath(ctx.base / Path(value).expanduser()))


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
_NO_CRLF = "without CR, LF or NUL"


def _field_value(text: str) -> bool:
    return not any(c in text for c in "\r\n\0")


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _headers(value: Any, ctx: _Context) -> tuple[tuple[str, str], ...]:
    """A table of header name -> value, kept in the order written."""
    if not isinstance(value, dict):
        raise _expected("a table of header names to strings", value)
    seen: dict[str, str] = {}
    for name, text in value.items():
        lower, where = name.lower(), f".{_toml_key(name)}"
        if not _TOKEN.fullmatch(name):
            raise _Invalid(f"invalid header name {name!r}; expected an HTTP token "
                           "(letters, digits and !#$%&'*+-.^_`|~)")
        if lower in seen:
            raise _Invalid(f"header {name!r} is set twice (also as {seen[lower]!r}); "
                           "header names ignore case")
        if lower == "user-agent":
            raise _Invalid("set the User-Agent with [crawl] user_agent", where)
        if not isinstance(text, str) or not _field_value(text):
            raise _expected(f"a string {_NO_CRLF}", text, where, secret=lower in SECRET_HEADERS)
        seen[lower] = name
    return tuple(value.items())


def _show_headers(headers: tuple[tuple[str, str], ...], redact: bool) -> dict[str, str]:
    return {name: REDACTED if redact and name.lower() in SECRET_HEADERS else text
            for name, text in headers}


#: the CMS traps [scope] traps can skip: each is a scope rule "trap:<name>" (crawl/scope.py)
TRAPS = ("replytocom", "login", "share", "print")


def _optional_file(value: Any, ctx: _Context) -> Path | None:
    """A path to a file, relative to the site file's folder; "" for none."""
    if value == "":
        return None
    path = _directory(value, ctx)
    if not path.is_file():
        raise _Invalid(f"no such file: {path}")
    return path


def _show_path(value: Path | None, redact: bool) -> str:
    return "" if value is None else str(value)


def _login_fields(value: Any, ctx: _Context) -> tuple[tuple[str, str], ...]:
    """name -> a string, or { env = "NAME" } read from the environment now (a secret that
    stays out of the file); kept in the order written."""
    if not isinstance(value, dict):
        raise _expected('a table of field names to strings or { env = "NAME" }', value)
    out = []
    for name, given in value.items():
        where = f".{_toml_key(name)}"
        if isinstance(given, dict):
            env = given.get("env")
            if set(given) != {"env"} or not isinstance(env, str) or not env:
                raise _Invalid('expected { env = "NAME" }, the name of an environment '
                               "variable", where)
            if env not in os.environ:
                raise _Invalid(f"the environment variable {env} is not set", where)
            given = os.environ[env]
        elif not isinstance(given, str):
            raise _expected('a string or { env = "NAME" }', given, where, secret=True)
        out.append((name, given))
    return tuple(out)


def _show_fields(fields_: tuple[tuple[str, str], ...], redact: bool) -> dict[str, str]:
    """Login field values are never shown: a user name is harmless, a password is not,
    and the file cannot say which is which."""
    return {name: REDACTED if redact else text for name, text in fields_}


def _success(value: Any, ctx: _Context) -> str | int:
    if isinstance(value, str) or (_is_int(value) and 100 <= value <= 599):
        return value  # type: ignore[no-any-return]
    raise _expected("a text the page shows once logged in, or an HTTP status (100-599)", value)


def _key(rule: Rule, default: Any = dataclasses.MISSING, *,
         default_from: Callable[[dict[str, Any]], object] | None = None,
         show: Callable[[Any, bool], object] | None = None) -> Any:
    """Declare a config key: its rule and default. A key with neither is required.

    default_from computes a raw TOML default from the keys parsed before it;
    show(value, redact) renders the value for effective() when the generic form won't do.
    """
    meta = {"rule": rule, "default_from": default_from, "show": show}
    return field(default=default, metadata=meta)


# --- the schema: sections and keys, in the order they are checked and shown ------------------


@dataclass(frozen=True)
class SiteSection:
    name: str = _key(_string("a name made of letters, digits, '_' and '-'",
                             lambda s: re.fullmatch(r"[A-Za-z0-9_-]+", s) is not None))
    start_urls: tuple[str, ...] = _key(_array(
        _string("an absolute http(s) URL such as 'https://example.com/'", _is_http_url,
                str.strip),
        "a non-empty array of URLs", nonempty=True))
    output_dir: Path = _key(_directory, default_from=lambda keys: f"archive/{keys['name']}")


@dataclass(frozen=True)
class ScopeSection:
    hosts: tuple[str, ...] = _key(_array(
        _string("a host name such as 'cdn.example.com'", _is_host, _host),
        "an array of host names"), ())
    include: tuple[str, ...] = _key(_array(_regex, "an array of regular expressions"), ())
    exclude: tuple[str, ...] = _key(_array(_regex, "an array of regular expressions"), ())
    max_depth: int = _key(_integer(0), 20)
    max_pages: int = _key(_integer(0), 0)  # 0: no limit
    page_requisites: bool = _key(_boolean(), True)
    ignore_query: tuple[str, ...] = _key(_array(
        _string("a parameter name or glob such as 'utm_*'"), "an array of parameter names"),
        DEFAULT_IGNORE_QUERY)
    # Trap limits (P6); 0 turns a limit off.
    max_path_depth: int = _key(_integer(0), 20)  # path segments
    max_segment_repeats: int = _key(_integer(0), 2)  # times one path segment may appear
    max_url_length: int = _key(_integer(0), 2083)  # characters of the canonical URL
    max_outlinks: int = _key(_integer(0), 6000)  # links taken from one page
    # requisites of requisites in a row (frames in frames, @imports), 0: no limit
    max_requisite_depth: int = _key(_integer(0), 5)
    max_host_pages: int = _key(_integer(0), 0)  # URLs fetched from one host per run
    max_host_bytes: int = _key(_integer(0), 0)  # body bytes fetched from one host per run
    robots: bool = _key(_boolean(), True)  # obey robots.txt (RFC 9309)
    # read the sitemaps robots.txt names (else /sitemap.xml) and crawl their in-scope URLs
    sitemaps: bool = _key(_boolean(), True)
    # URLs the run's sitemaps may list in all (sitemaps and pages, in or out of scope); those
    # past it are counted under the rule sitemap-budget, not stored (0: no limit)
    max_sitemap_urls: int = _key(_integer(0), 100_000)
    # URL traps of the common CMSs skipped by default, each under its own rule; remove a
    # name from the list to crawl those URLs again
    traps: tuple[str, ...] = _key(_array(_choice(*TRAPS), "an array of trap names"), TRAPS)


@dataclass(frozen=True)
class CrawlSection:
    workers: int = _key(_integer(1), 16)
    per_host: int = _key(_integer(1), 4)
    # helper processes that find the links of pages (mirror.crawl.parsepool); 0: in this process
    parse_processes: int = _key(_integer(0), 1)
    delay: float = _key(_number(0, inclusive=True), 0.0)
    max_crawl_delay: float = _key(_number(0, inclusive=True), 30.0)  # cap on robots Crawl-delay
    max_retry_after: float = _key(_number(0, inclusive=True), 600.0)  # cap on Retry-After
    max_redirects: int = _key(_integer(0), 10)
    max_tries: int = _key(_integer(1), 4)
    timeout: float = _key(_number(0, inclusive=False), 60.0)
    connect_timeout: float = _key(_number(0, inclusive=False), 10.0)
    read_timeout: float = _key(_number(0, inclusive=False), 30.0)
    max_response_bytes: int = _key(_integer(1), 100_000_000)
    user_agent: str = _key(_string(f"a non-empty string {_NO_CRLF}",
                                   lambda s: bool(s.strip()) and _field_value(s)),
                           f"mirror/{__version__}")
    headers: tuple[tuple[str, str], ...] = _key(_headers, (), show=_show_headers)
    # Seconds the first SIGINT/SIGTERM lets in-flight fetches finish before aborting them.
    stop_grace: float = _key(_number(0, inclusive=True), 5.0)
    # Seconds one URL's retries may take from its first failure; past it the URL fails
    max_retry_time: float = _key(_number(0, inclusive=True), 180.0)
    # Connection failures (name does not resolve, refused, TLS) after which a host's other
    # URLs fail at once with the same reason; 0: never
    dead_host_after: int = _key(_integer(0), 1)
    # a cookie jar for the run, its cookies sent to the site's own hosts only
    cookies: bool = _key(_boolean(), True)
    # a Netscape cookies.txt (what browser extensions export) loaded into the jar
    cookies_file: Path | None = _key(_optional_file, None, show=_show_path)


@dataclass(frozen=True)
class LoginSection:
    """A form login made before the crawl (and again when a page shows the form again)."""

    url: str = _key(_string("an absolute http(s) URL such as 'https://example.com/login'",
                            lambda s: s == "" or _is_http_url(s), str.strip), "")  # "": none
    # form fields: a string, or { env = "NAME" } for a secret kept out of the file
    fields: tuple[tuple[str, str], ...] = _key(_login_fields, (), show=_show_fields)
    method: str = _key(_choice("POST", "GET"), "POST")
    # logged in when the answer has this text (a string) or this status (an integer)
    success: str | int = _key(_success, "")


@dataclass(frozen=True)
class ArchiveSection:
    # Rotation threshold: a new WARC file is started once the open one reaches this size.
    # Any value >= 1 is accepted so that tests can force rotation with tiny files.
    warc_max_bytes: int = _key(_integer(1), 1_000_000_000)
    # "fast": records are flushed to the OS before each manifest commit (safe against a
    # killed process). "power": also fsync'ed (safe against power loss; slower).
    durability: str = _key(_choice("fast", "power"), "fast")
    # Object storage that receives closed WARC files, the index and manifest snapshots:
    # "s3://bucket/prefix" (endpoint and credentials from the AWS_* variables); "": none.
    store: str = _key(_store_url, "")


def _schedule(value: Any, ctx: _Context) -> Schedule | None:
    if not isinstance(value, str):
        raise _expected(FORMS, value)
    if not value.strip():
        return None
    try:
        return parse_schedule(value)
    except ScheduleError as exc:
        raise _Invalid(str(exc)) from None


def _show_schedule(value: Schedule | None, redact: bool) -> str:
    return "" if value is None else value.text


@dataclass(frozen=True)
class ScheduleSection:
    # when scheduled runs start, on the local clock: "hourly", "daily HH:MM",
    # "weekly DAY HH:MM" or a 5-field cron expression; "" for none. `mirror schedule apply`
    # makes it an OS timer (a systemd user timer, else a crontab entry)
    every: Schedule | None = _key(_schedule, None, show=_show_schedule)


_command = _string("a shell command (a string without NUL)", lambda s: "\0" not in s)


@dataclass(frozen=True)
class HooksSection:
    """Shell commands run after each run, with MIRROR_SITE, MIRROR_RUN_ID, MIRROR_EXIT_CODE
    and MIRROR_REPORT in their environment (mirror/schedule/hooks.py)."""

    # after a run that ended with exit 0, 3 or 4 (complete, some URLs failed, a limit); ""
    after: str = _key(_command, "")
    # after any other run (internal error, interrupted); "" for none
    on_failure: str = _key(_command, "")
    # seconds a hook may take; then it is stopped (the run's exit code stays)
    timeout: float = _key(_number(0, inclusive=False), 600.0)


@dataclass(frozen=True)
class RetentionSection:
    """Which runs `mirror prune` keeps, borgmatic's way: the last N runs, and the last run
    of each of the last N days, weeks and months; 0 turns a rule off, all 0: keep all."""

    keep_last: int = _key(_integer(0), 0)
    keep_daily: int = _key(_integer(0), 0)
    keep_weekly: int = _key(_integer(0), 0)
    keep_monthly: int = _key(_integer(0), 0)

    @property
    def enabled(self) -> bool:
        """Some rule is set: prune drops what none of them keeps."""
        return any((self.keep_last, self.keep_daily, self.keep_weekly, self.keep_monthly))


#: sections that say when and what else to do, not how to crawl: left out of the digest
_NOT_CRAWL = ("schedule", "hooks", "retention")


@dataclass(frozen=True)
class SiteConfig:
    path: Path  # absolute path of the TOML file
    site: SiteSection
    scope: ScopeSection
    crawl: CrawlSection
    login: LoginSection
    archive: ArchiveSection
    schedule: ScheduleSection
    hooks: HooksSection
    retention: RetentionSection

    def headers_for(self, on_site: bool) -> dict[str, str]:
        """[crawl] headers for one request: secret ones (Authorization, Cookie,
        Proxy-Authorization) only for the site's own hosts, never for other origins (P9)."""
        return {name: value for name, value in self.crawl.headers
                if on_site or name.lower() not in SECRET_HEADERS}

    def effective(self) -> dict[str, dict[str, object]]:
        """Effective settings by section and key, secret header values redacted."""
        return self._settings(redact=True)

    def digest(self) -> str:
        """Return "sha256:<hex>" of the settings that shape the crawl, as canonical JSON.

        Leaves out where files live (the config path, output_dir), so moving a site's folder
        keeps its digest, and the sections that do not shape the crawl (schedule, hooks,
        retention). Secret header values are left out: the digest is written into
        every WARC file, and a hash of a short password could be brute-forced offline.
        """
        import hashlib  # here: it loads OpenSSL, which `check` and `status` need not

        settings = self._settings(redact=True)
        del settings["site"]["output_dir"]
        del settings["archive"]["store"]  # where copies go does not shape the crawl
        for name in _NOT_CRAWL:
            del settings[name]
        canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def _settings(self, *, redact: bool) -> dict[str, dict[str, object]]:
        settings: dict[str, dict[str, object]] = {}
        for name in _SECTIONS:
            section = getattr(self, name)
            settings[name] = {}
            for key in fields(section):
                value, show = getattr(section, key.name), key.metadata["show"]
                settings[name][key.name] = show(value, redact) if show else _plain(value)
        return settings


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


_SECTIONS: dict[str, type] = {
    name: kind for name, kind in get_type_hints(SiteConfig).items() if name != "path"
}


def minimum_of(key: str) -> tuple[float, bool] | None:
    """The least value of a number key ("crawl.workers" -> (1, True)) and whether that
    value itself is allowed; None for a key that is not a number."""
    section, name = key.split(".")
    rule = next(f.metadata["rule"] for f in fields(_SECTIONS[section]) if f.name == name)
    return _MINIMUM.get(rule)


#: the sections in the order they are checked and shown
SECTION_NAMES = tuple(_SECTIONS)

# --- loading ---------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str]) -> SiteConfig:
    """Read and validate a site file; every problem is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a BOM from Windows editors
    except OSError as exc:
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
        raise ConfigError(path, None, f"cannot read: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(path, None, f"cannot read: not UTF-8 text (byte {exc.start})") from exc
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> SiteConfig:
    """Validate TOML text; `path` names the file in messages and anchors relative paths.
    Every problem of the text is found before one ConfigError (a ConfigErrors when there
    are several) is raised; invalid TOML is the one problem found alone."""
    path = Path(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, None, _syntax_message(exc, text)) from exc
    absolute = Path(os.path.abspath(path))
    ctx = _Context(base=absolute.parent)
    errors = _unknown_top_level(raw, path)
    sections: dict[str, Any] = {}
    for name, kind in _SECTIONS.items():
        try:
            sections[name] = _parse_section(kind, name, raw.get(name, {}), ctx, path)
        except ConfigError as exc:
            errors += exc.errors
    login = sections.get("login")
    if login is not None and login.fields and not login.url:
        errors.append(ConfigError(path, "login.url", "[login] url: required when [login] "
                                  "fields are given (the address the login form is sent to)"))
    if errors:
        raise config_error(errors)
    return SiteConfig(path=absolute, **sections)


def _syntax_message(exc: tomllib.TOMLDecodeError, text: str) -> str:
    message = str(exc)
    if found := re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message, re.DOTALL):
        message, line, column = found[1], found[2], found[3]
    elif found := re.fullmatch(r"(.*) \(at end of document\)", message, re.DOTALL):
        lines = text.split("\n")
        message, line, column = found[1], str(len(lines)), str(len(lines[-1]) + 1)
    else:
        return f"invalid TOML: {message}"
    return f"line {line}, column {column}: invalid TOML: {message}"


def _hint(name: str, valid: list[str], plural: str, *, guess: bool = True) -> str:
    import difflib  # only a wrong key comes here

    by_lower = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1) if guess else []
    if close:
        return f"did you mean {by_lower[close[0]]!r}?"
    return f"valid {plural} are: {', '.join(valid)}"


def _unknown_top_level(raw: dict[str, Any], path: Path) -> list[ConfigError]:
    errors = []
    for name, value in raw.items():
        if name in _SECTIONS:
            continue
        table = isinstance(value, dict)
        homes = [s for s, kind in _SECTIONS.items() if name in {f.name for f in fields(kind)}]
        if not homes:
            hint = _hint(name, list(_SECTIONS), "sections", guess=table)
        elif table:  # e.g. [headers] for [crawl.headers]
            hint = f"did you mean [{homes[0]}.{name}]?"
        else:  # a key written above its section header
            hint = f"did you mean [{homes[0]}] {name}?"
        message = f"[{name}]: unknown section" if table else f"{name}: unknown top-level key"
        errors.append(ConfigError(path, name, message, hint))
    return errors


T = TypeVar("T")


def _parse_section(kind: type[T], section: str, raw: object, ctx: _Context, path: Path) -> T:
    """The section's dataclass; a ConfigError holding every problem of the section."""
    if not isinstance(raw, dict):
        raise ConfigError(path, section, f"[{section}]: {_expected('a table', raw).detail}")
    keys = fields(kind)  # type: ignore[arg-type]
    errors = [ConfigError(path, f"{section}.{name}", f"[{section}] {name}: unknown key",
                          _hint(name, [key.name for key in keys], "keys"))
              for name in raw if name not in {key.name for key in keys}]
    values: dict[str, Any] = {}
    for key in keys:
        where = f"[{section}] {key.name}"
        if key.name in raw:
            value = raw[key.name]
        elif key.metadata["default_from"]:
            try:
                value = key.metadata["default_from"](values)
            except KeyError:  # the key it derives from is invalid, and reported
                continue
        elif key.default is dataclasses.MISSING:
            errors.append(ConfigError(path, f"{section}.{key.name}",
                                      f"{where}: required key is missing"))
            continue
        else:
            continue  # the dataclass default applies
        try:
            values[key.name] = key.metadata["rule"](value, ctx)
        except _Invalid as exc:
            errors.append(ConfigError(path, f"{section}.{key.name}",
                                      f"{where}{exc.where}: {exc.detail}"))
    if errors:
        raise config_error(errors)
    return kind(**values)
