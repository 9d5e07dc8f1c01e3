"""The value rules of site files: each checks one raw TOML value and converts it (config.py
declares which key has which rule)."""

import dataclasses
import datetime as dt
import ipaddress
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mirror.crawl.traprules import NAMES
from mirror.errors import UsageError
from mirror.schedule.spec import FORMS, Schedule, ScheduleError, parse_schedule
from mirror.web.http import REDACTED, SECRET_HEADERS

#: the CMS traps [scope] traps can skip: each is a scope rule "trap:<name>" (crawl/traprules.py)
TRAPS = NAMES


@dataclass(frozen=True)
class Context:
    base: Path  # folder of the config file; relative paths are resolved against it


class Invalid(UsageError):
    """A value broke its rule; `where` locates it inside the key, e.g. "[2]" or ".Cookie"."""

    def __init__(self, detail: str, where: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.where = where


Rule = Callable[[Any, Context], Any]


def key(rule: Rule, default: Any = dataclasses.MISSING, *,
        default_from: Callable[[dict[str, Any]], object] | None = None,
        show: Callable[[Any, bool], object] | None = None) -> Any:
    """Declare a config key (a field of a section's dataclass): its rule and default. A key
    with neither is required.

    default_from computes a raw TOML default from the keys parsed before it;
    show(value, redact) renders the value for effective() when the generic form won't do.
    """
    meta = {"rule": rule, "default_from": default_from, "show": show}
    return field(default=default, metadata=meta)


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


def mismatch(expected: str, value: object, where: str = "", *, secret: bool = False) -> Invalid:
    return Invalid(f"expected {expected}, found {_describe(value, secret=secret)}", where)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check(expected: str, ok: Callable[[Any], bool],
          convert: Callable[[Any], Any] = lambda v: v) -> Rule:
    def rule(value: Any, ctx: Context) -> Any:
        if not ok(value):
            raise mismatch(expected, value)
        return convert(value)
    return rule


@dataclass(frozen=True)
class Bounds:
    """The range of a number rule: minimum (allowed itself when inclusive) to maximum."""

    minimum: float
    inclusive: bool
    maximum: float


#: the bounds of each number rule (the app's number inputs take their min and max from it)
_BOUNDS: dict[Rule, Bounds] = {}


def integer(minimum: int, maximum: int) -> Rule:
    """An integer from minimum to maximum: every count has a ceiling, so a typo such as
    workers = 100000000000000000000 is refused here, not met as a MemoryError mid-run."""
    rule = check(f"an integer from {minimum} to {maximum:_}".replace("_", ","),
                 lambda v: is_int(v) and minimum <= v <= maximum)
    _BOUNDS[rule] = Bounds(minimum, True, maximum)
    return rule


def number(minimum: float, maximum: float, *, inclusive: bool) -> Rule:
    """A finite float (an integer is accepted and converted), >= or > minimum, <= maximum."""
    def ok(v: Any) -> bool:
        if not (is_int(v) or isinstance(v, float)) or not math.isfinite(v):
            return False
        return bool(v >= minimum if inclusive else v > minimum) and v <= maximum
    shown = (f"from {minimum:g} to {maximum:g}" if inclusive
             else f"> {minimum:g} and <= {maximum:g}")
    rule = check(f"a number {shown}", ok, float)
    _BOUNDS[rule] = Bounds(minimum, inclusive, maximum)
    return rule


def bounds_of_rule(rule: Rule) -> Bounds | None:
    """The range of a number rule; None for other rules."""
    return _BOUNDS.get(rule)


def boolean() -> Rule:
    return check("true or false", lambda v: isinstance(v, bool))


def string(expected: str, ok: Callable[[str], bool] = bool,
           convert: Callable[[str], Any] = lambda s: s) -> Rule:
    return check(expected, lambda v: isinstance(v, str) and ok(v), convert)


def choice(*choices: str) -> Rule:
    return string("one of " + ", ".join(map(repr, choices)), lambda s: s in choices)


def trap_name(value: Any, ctx: Context) -> str:
    """One of the built-in trap rules' names; the closest ones named when it is not."""
    if isinstance(value, str) and value in TRAPS:
        return value
    import difflib

    close = difflib.get_close_matches(value, TRAPS, 1, 0.6) if isinstance(value, str) else []
    like = repr(close[0]) if close else "'login' or 'mediawiki-edit'"
    raise mismatch(f"a trap rule name such as {like} (`mirror check` lists all "
                   f"{len(TRAPS)})", value)


def array(item: Rule, expected: str, *, nonempty: bool = False) -> Rule:
    """An array checked item by item; errors name the index: "include[2]"."""
    def rule(value: Any, ctx: Context) -> tuple[Any, ...]:
        if not isinstance(value, list) or (nonempty and not value):
            raise mismatch(expected, value)
        items = []
        for index, element in enumerate(value):
            try:
                items.append(item(element, ctx))
            except Invalid as exc:
                raise Invalid(exc.detail, f"[{index}]{exc.where}") from None
        return tuple(items)
    return rule


def store_url(value: Any, ctx: Context) -> str:
    """"" (none), or an s3://bucket/prefix address; the reason when it is not one."""
    if not isinstance(value, str):
        raise mismatch("an address such as 's3://bucket/prefix'", value)
    if not value.strip():
        return ""
    from mirror.store.objstore import parse_store_url  # light: obstore loads on use only

    try:
        bucket, prefix = parse_store_url(value.strip())
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return f"s3://{bucket}" + (f"/{prefix}" if prefix else "")


def is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return False
    host = parts.hostname or ""
    # urlsplit drops tabs and newlines (as browsers do); a site file means none of them
    return (parts.scheme.lower() in ("http", "https") and bool(host)
            and not re.search(r"\s", host) and not re.search(r"[\x00-\x1f\x7f]", text.strip())
            and _fetchable_host(f"http://{parts.netloc}/"))


def _fetchable_host(url: str) -> bool:
    """The URL's host is one the crawler can fetch: no empty label ('..'), no 'xn--' label
    that is not valid punycode (mirror.web.urls refuses them in links too)."""
    from mirror.web.urls import host_of

    return bool(host_of(url))


def _ipv6(text: str) -> str | None:
    """An IPv6 address, bracketed or not, in the form urls.host_of gives ("[::1]"); else None."""
    try:
        return f"[{ipaddress.IPv6Address(text.removeprefix('[').removesuffix(']')).compressed}]"
    except ValueError:
        return None


def is_host(text: str) -> bool:
    """A bare host: no scheme, port, path or wildcard; only an IPv6 address has colons."""
    text = text.strip()
    if ":" in text:
        return _ipv6(text) is not None
    return (re.fullmatch(r"[^\s/\\?#@*\[\]]+", text) is not None
            and _fetchable_host(f"http://{text}/"))


def host(text: str) -> str:
    text = text.strip().lower()
    return _ipv6(text) or text


def regex(value: Any, ctx: Context) -> str:
    if not isinstance(value, str):
        raise mismatch("a regular expression (a string)", value)
    try:
        re.compile(value)
    except re.error as exc:
        raise Invalid(f"invalid regular expression: {exc}") from None
    return value


def directory(value: Any, ctx: Context) -> Path:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise mismatch("a non-empty path", value)
    return Path(os.path.abspath(ctx.base / Path(value).expanduser()))


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
NO_CRLF = "without control characters (a tab is allowed)"
#: request headers the HTTP layer writes itself: one from the site file would frame the
#: request wrongly (every answer a 400) or send it to another host
OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection",
                         "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
                         "expect"})


def field_value(text: str) -> bool:
    """No control character but tab: the HTTP layer refuses the others at each request,
    which would make every host look unreachable."""
    return re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", text) is None


def toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def header_table(value: Any, ctx: Context) -> tuple[tuple[str, str], ...]:
    """A table of header name -> value, kept in the order written."""
    if not isinstance(value, dict):
        raise mismatch("a table of header names to strings", value)
    seen: dict[str, str] = {}
    for name, text in value.items():
        lower, where = name.lower(), f".{toml_key(name)}"
        if not _TOKEN.fullmatch(name):
            raise Invalid(f"invalid header name {name!r}; expected an HTTP token "
                           "(letters, digits and !#$%&'*+-.^_`|~)")
        if lower in seen:
            raise Invalid(f"header {name!r} is set twice (also as {seen[lower]!r}); "
                           "header names ignore case")
        if lower == "user-agent":
            raise Invalid("set the User-Agent with [crawl] user_agent", where)
        if lower in OWN_HEADERS:
            raise Invalid(f"{name} is written by the HTTP layer for each request; remove it "
                          "from [crawl] headers", where)
        if not isinstance(text, str) or not field_value(text):
            raise mismatch(f"a string {NO_CRLF}", text, where, secret=lower in SECRET_HEADERS)
        seen[lower] = name
    return tuple(value.items())


def show_headers(headers: tuple[tuple[str, str], ...], redact: bool) -> dict[str, str]:
    return {name: REDACTED if redact and name.lower() in SECRET_HEADERS else text
            for name, text in headers}




def archive_dir(value: Any, ctx: Context) -> Path:
    """A folder for the site's archive: absent, empty or a mirror archive (outputdir.py)."""
    from mirror.outputdir import output_dir_problem

    path = directory(value, ctx)
    if problem := output_dir_problem(path):
        raise Invalid(problem)
    return path


def optional_file(value: Any, ctx: Context) -> Path | None:
    """A path to a file, relative to the site file's folder; "" for none."""
    if value == "":
        return None
    path = directory(value, ctx)
    if not path.is_file():
        raise Invalid(f"no such file: {path}")
    return path


def show_path(value: Path | None, redact: bool) -> str:
    return "" if value is None else str(value)


def login_fields(value: Any, ctx: Context) -> tuple[tuple[str, str], ...]:
    """name -> a string, or { env = "NAME" } read from the environment now (a secret that
    stays out of the file); kept in the order written."""
    if not isinstance(value, dict):
        raise mismatch('a table of field names to strings or { env = "NAME" }', value)
    out = []
    for name, given in value.items():
        where = f".{toml_key(name)}"
        if isinstance(given, dict):
            env = given.get("env")
            if set(given) != {"env"} or not isinstance(env, str) or not env:
                raise Invalid('expected { env = "NAME" }, the name of an environment '
                               "variable", where)
            if env not in os.environ:
                raise Invalid(f"the environment variable {env} is not set", where)
            given = os.environ[env]
        elif not isinstance(given, str):
            raise mismatch('a string or { env = "NAME" }', given, where, secret=True)
        out.append((name, given))
    return tuple(out)


def show_fields(fields_: tuple[tuple[str, str], ...], redact: bool) -> dict[str, str]:
    """Login field values are never shown: a user name is harmless, a password is not,
    and the file cannot say which is which."""
    return {name: REDACTED if redact else text for name, text in fields_}


def success(value: Any, ctx: Context) -> str | int:
    if isinstance(value, str) or (is_int(value) and 100 <= value <= 599):
        return value  # type: ignore[no-any-return]
    raise mismatch("a text the page shows once logged in, or an HTTP status (100-599)", value)


def schedule_spec(value: Any, ctx: Context) -> Schedule | None:
    if not isinstance(value, str):
        raise mismatch(FORMS, value)
    if not value.strip():
        return None
    try:
        return parse_schedule(value)
    except ScheduleError as exc:
        raise Invalid(str(exc)) from None


def show_schedule(value: Schedule | None, redact: bool) -> str:
    return "" if value is None else value.text


command = string("a shell command (a string without NUL)", lambda s: "\0" not in s)
