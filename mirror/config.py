"""Site configuration: one TOML file -> a validated, frozen SiteConfig (nothing else sees dicts)."""

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from mirror import __version__
from mirror.browserconfig import BrowserSection
from mirror.configrules import (
    NO_CRLF,
    TRAPS,
    Bounds,
    Context,
    Invalid,
    archive_dir,
    array,
    boolean,
    bounds_of_rule,
    choice,
    command,
    field_value,
    header_table,
    host,
    integer,
    is_host,
    is_http_url,
    login_fields,
    mismatch,
    number,
    optional_file,
    regex,
    schedule_spec,
    show_fields,
    show_headers,
    show_path,
    show_schedule,
    store_url,
    string,
    success,
    trap_name,
)
from mirror.configrules import (
    key as _key,
)
from mirror.errors import UsageError
from mirror.schedule.spec import Schedule
from mirror.web.http import SECRET_HEADERS
from mirror.web.patterns import valid_pattern
from mirror.web.urls import DEFAULT_IGNORE_QUERY


class ConfigError(UsageError):
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

    def lines(self) -> list[str]:
        """Every problem of the file, one a line, then how many when there are several."""
        count = [f"{self.path}: {len(self.errors)} errors"] if len(self.errors) > 1 else []
        return [str(one) for one in self.errors] + count


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



# --- the schema: how a key is declared -------------------------------------------------------

HOUR, DAY = 3600, 86400  # ceilings of the time keys, in seconds
#: a learned URL pattern as the run report and `mirror explain` write it
_PATTERN = string("a URL pattern as the report writes it, such as "
                  "'example.com/index.php?action=&title=' (host/path, no scheme, no spaces)",
                  valid_pattern)
#: link-extraction helpers a site file may ask for; a run starts at most one per core
MAX_PARSE_PROCESSES = 32


# --- the schema: sections and keys, in the order they are checked and shown ------------------


@dataclass(frozen=True)
class SiteSection:
    name: str = _key(string("a name made of letters, digits, '_' and '-'",
                             lambda s: re.fullmatch(r"[A-Za-z0-9_-]+", s) is not None))
    start_urls: tuple[str, ...] = _key(array(
        string("an absolute http(s) URL such as 'https://example.com/'", is_http_url,
                str.strip),
        "a non-empty array of URLs", nonempty=True))
    output_dir: Path = _key(archive_dir, default_from=lambda keys: f"archive/{keys['name']}")


@dataclass(frozen=True)
class ScopeSection:
    hosts: tuple[str, ...] = _key(array(
        string("a host name such as 'cdn.example.com'", is_host, host),
        "an array of host names"), ())
    include: tuple[str, ...] = _key(array(regex, "an array of regular expressions"), ())
    exclude: tuple[str, ...] = _key(array(regex, "an array of regular expressions"), ())
    max_depth: int = _key(integer(0, 10_000), 20)
    max_pages: int = _key(integer(0, 1_000_000_000), 0)  # 0: no limit
    page_requisites: bool = _key(boolean(), True)
    ignore_query: tuple[str, ...] = _key(array(
        string("a parameter name or glob such as 'utm_*'"), "an array of parameter names"),
        DEFAULT_IGNORE_QUERY)
    # Trap limits (P6); 0 turns a limit off.
    max_path_depth: int = _key(integer(0, 1000), 20)  # path segments
    max_segment_repeats: int = _key(integer(0, 1000), 2)  # times one path segment may appear
    max_url_length: int = _key(integer(0, 100_000), 2083)  # characters of the canonical URL
    max_outlinks: int = _key(integer(0, 1_000_000), 6000)  # links taken from one page
    # requisites of requisites in a row (frames in frames, @imports), 0: no limit
    max_requisite_depth: int = _key(integer(0, 1000), 5)
    # URLs fetched from one host per run, and their body bytes
    max_host_pages: int = _key(integer(0, 1_000_000_000), 0)
    max_host_bytes: int = _key(integer(0, 10**15), 0)
    robots: bool = _key(boolean(), True)  # obey robots.txt (RFC 9309)
    # obey <meta name="robots"> and X-Robots-Tag: nofollow pages' links are not followed
    # (rule meta-robots; their requisites are), noindex pages are recorded (web.robotsmeta)
    meta_robots: bool = _key(boolean(), True)
    # read the sitemaps robots.txt names (else /sitemap.xml) and crawl their in-scope URLs
    sitemaps: bool = _key(boolean(), True)
    # URLs the run's sitemaps may list in all (sitemaps and pages, in or out of scope); those
    # past it are counted under the rule sitemap-budget, not stored (0: no limit)
    max_sitemap_urls: int = _key(integer(0, 1_000_000_000), 100_000)
    # URL traps of the common CMSs skipped by default, each under its own rule; remove a
    # name from the list to crawl those URLs again
    traps: tuple[str, ...] = _key(array(trap_name, "an array of trap names"), TRAPS)
    # learned trap patterns (web/patterns.py): a URL pattern whose first pages are all
    # noindex or near-duplicates of pages stored before stops being fetched, and filters
    # combined on a faceted path are skipped; near-duplicates are judged on a page's own
    # text (its host's template left out), never on a few words (README)
    learn_traps: bool = _key(boolean(), True)
    # patterns as the report writes them ("example.com/index.php?action=&title="): never
    # stopped by learning / never fetched (rule skip_patterns)
    fetch_patterns: tuple[str, ...] = _key(array(_PATTERN, "an array of URL patterns"), ())
    skip_patterns: tuple[str, ...] = _key(array(_PATTERN, "an array of URL patterns"), ())


@dataclass(frozen=True)
class CrawlSection:
    workers: int = _key(integer(1, 1000), 16)
    per_host: int = _key(integer(1, 100), 4)
    # helper processes that find the links of pages (mirror.crawl.parsepool); 0: in this process
    parse_processes: int = _key(integer(0, MAX_PARSE_PROCESSES), 1)
    delay: float = _key(number(0, HOUR, inclusive=True), 0.0)
    # cap on robots Crawl-delay
    max_crawl_delay: float = _key(number(0, DAY, inclusive=True), 30.0)
    max_retry_after: float = _key(number(0, DAY, inclusive=True), 600.0)  # cap on Retry-After
    max_redirects: int = _key(integer(0, 100), 10)
    max_tries: int = _key(integer(1, 100), 4)
    timeout: float = _key(number(0, HOUR, inclusive=False), 60.0)
    connect_timeout: float = _key(number(0, HOUR, inclusive=False), 10.0)
    read_timeout: float = _key(number(0, HOUR, inclusive=False), 30.0)
    max_response_bytes: int = _key(integer(1, 10**11), 100_000_000)
    user_agent: str = _key(string(f"a non-empty string {NO_CRLF}",
                                   lambda s: bool(s.strip()) and field_value(s)),
                           f"mirror/{__version__}")
    headers: tuple[tuple[str, str], ...] = _key(header_table, (), show=show_headers)
    # Seconds the first SIGINT/SIGTERM lets in-flight fetches finish before aborting them.
    stop_grace: float = _key(number(0, HOUR, inclusive=True), 5.0)
    # Seconds one URL's retries may take from its first failure; past it the URL fails
    max_retry_time: float = _key(number(0, DAY, inclusive=True), 180.0)
    # Connection failures (name does not resolve, refused, TLS) after which a host's other
    # URLs fail at once with the same reason; 0: never
    dead_host_after: int = _key(integer(0, 1000), 1)
    # a cookie jar for the run, its cookies sent to the site's own hosts only
    cookies: bool = _key(boolean(), True)
    # a Netscape cookies.txt (what browser extensions export) loaded into the jar
    cookies_file: Path | None = _key(optional_file, None, show=show_path)


@dataclass(frozen=True)
class LoginSection:
    """A form login made before the crawl (and again when a page shows the form again)."""

    url: str = _key(string("an absolute http(s) URL such as 'https://example.com/login'",
                            lambda s: s == "" or is_http_url(s), str.strip), "")  # "": none
    # form fields: a string, or { env = "NAME" } for a secret kept out of the file
    fields: tuple[tuple[str, str], ...] = _key(login_fields, (), show=show_fields)
    method: str = _key(choice("POST", "GET"), "POST")
    # logged in when the answer has this text (a string) or this status (an integer)
    success: str | int = _key(success, "")


@dataclass(frozen=True)
class ArchiveSection:
    # Rotation threshold: a new WARC file is started once the open one reaches this size.
    # Any value >= 1 is accepted so that tests can force rotation with tiny files.
    warc_max_bytes: int = _key(integer(1, 10**12), 1_000_000_000)
    # "fast": records are flushed to the OS before each manifest commit (safe against a
    # killed process). "power": also fsync'ed (safe against power loss; slower).
    durability: str = _key(choice("fast", "power"), "fast")
    # Object storage that receives closed WARC files, the index and manifest snapshots:
    # "s3://bucket/prefix" (endpoint and credentials from the AWS_* variables); "": none.
    store: str = _key(store_url, "")
    store_retry: float = _key(number(0, DAY, inclusive=True), 300.0)  # s of upload retries


@dataclass(frozen=True)
class ScheduleSection:
    # when scheduled runs start, on the local clock: "hourly", "daily HH:MM",
    # "weekly DAY HH:MM" or a 5-field cron expression; "" for none. `mirror schedule apply`
    # makes it an OS timer (a systemd user timer, else a crontab entry)
    every: Schedule | None = _key(schedule_spec, None, show=show_schedule)



@dataclass(frozen=True)
class HooksSection:
    """Shell commands run after each run, with MIRROR_SITE, MIRROR_RUN_ID, MIRROR_EXIT_CODE
    and MIRROR_REPORT in their environment (mirror/run/hooks.py)."""

    # after a run that made a snapshot: exit 0, 3, 4 or 5 (5: its uploads pending); ""
    after: str = _key(command, "")
    # after any other run (internal error, interrupted); "" for none
    on_failure: str = _key(command, "")
    # seconds a hook may take; then it is stopped (the run's exit code stays)
    timeout: float = _key(number(0, DAY, inclusive=False), 600.0)


@dataclass(frozen=True)
class RetentionSection:
    """Which runs `mirror prune` keeps, borgmatic's way: the last N runs, and the last run
    of each of the last N days, weeks and months; 0 turns a rule off, all 0: keep all."""

    keep_last: int = _key(integer(0, 100_000), 0)
    keep_daily: int = _key(integer(0, 100_000), 0)
    keep_weekly: int = _key(integer(0, 100_000), 0)
    keep_monthly: int = _key(integer(0, 100_000), 0)

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
    browser: BrowserSection

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
        del settings["archive"]["store"], settings["archive"]["store_retry"]  # not the crawl
        for name in _NOT_CRAWL:
            del settings[name]
        del settings["browser"]["executable"]  # where the program lives, as output_dir
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


def bounds_of(key: str) -> Bounds | None:
    """The range of a number key ("crawl.workers" -> Bounds(1, True, 1000)); None for a key
    that is not a number."""
    section, name = key.split(".")
    return bounds_of_rule(next(f.metadata["rule"] for f in fields(_SECTIONS[section])
                               if f.name == name))


def minimum_of(key: str) -> tuple[float, bool] | None:
    """The least value of a number key ("crawl.workers" -> (1, True)) and whether that
    value itself is allowed; None for a key that is not a number."""
    bounds = bounds_of(key)
    return None if bounds is None else (bounds.minimum, bounds.inclusive)


def maximum_of(key: str) -> float | None:
    """The greatest value of a number key ("crawl.workers" -> 1000); None for others."""
    bounds = bounds_of(key)
    return None if bounds is None else bounds.maximum


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
    except RecursionError:  # tomllib recurses once per level of [[[...]]] or {a={b=...}}
        raise ConfigError(path, None, "invalid TOML: arrays or tables nested too deeply "
                          "(hundreds of levels); a site file needs at most three") from None
    absolute = Path(os.path.abspath(path))
    ctx = Context(base=absolute.parent)
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


def _parse_section(kind: type[T], section: str, raw: object, ctx: Context, path: Path) -> T:
    """The section's dataclass; a ConfigError holding every problem of the section."""
    if not isinstance(raw, dict):
        raise ConfigError(path, section, f"[{section}]: {mismatch('a table', raw).detail}")
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
        except Invalid as exc:
            errors.append(ConfigError(path, f"{section}.{key.name}",
                                      f"{where}{exc.where}: {exc.detail}"))
    if errors:
        raise config_error(errors)
    return kind(**values)
