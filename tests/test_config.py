"""Tests for mirror.config: defaults, every rule with its full message, digest and redaction."""

import dataclasses
import re
from pathlib import Path

import pytest

from mirror import __version__
from mirror.browserconfig import enable_advice, install_command
from mirror.config import (
    ArchiveSection,
    BrowserSection,
    ConfigError,
    ConfigErrors,
    CrawlSection,
    RetentionSection,
    ScopeSection,
    SiteConfig,
    load_config,
    parse_config,
)
from mirror.configrules import Context, Invalid, choice
from mirror.web.http import REDACTED
from mirror.web.urls import DEFAULT_IGNORE_QUERY

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
SITE = '[site]\nname = "ex"\nstart_urls = ["https://example.com/"]\n'


def parse(text: str, path: str = "site.toml") -> SiteConfig:
    return parse_config(text, Path(path))


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return info.value


# --- the shipped example files -----------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path: Path) -> None:
    assert load_config(path).path == path


def test_example_documents_the_defaults() -> None:
    example = load_config(CONFIG_DIR / "example.toml")
    minimal = load_config(CONFIG_DIR / "minimal.toml")
    assert example.effective() == minimal.effective()
    text = (CONFIG_DIR / "example.toml").read_text()
    for section, keys in example.effective().items():
        assert f"[{section}]" in text
        for key in keys:
            assert re.search(rf"^#? ?{key} = ", text, re.MULTILINE), key


# --- defaults and accepted values ---------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    config = parse(SITE, str(tmp_path / "site.toml"))
    assert config.path == tmp_path / "site.toml"
    assert config.site.name == "ex"
    assert config.site.start_urls == ("https://example.com/",)
    assert config.site.output_dir == tmp_path / "archive" / "ex"
    assert config.scope == ScopeSection()
    assert config.scope.ignore_query == DEFAULT_IGNORE_QUERY
    assert config.crawl == CrawlSection()
    assert config.crawl.user_agent == f"mirror/{__version__}"
    assert config.archive == ArchiveSection(warc_max_bytes=1_000_000_000)


def test_sections_are_frozen() -> None:
    config = parse(SITE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.crawl.workers = 1  # type: ignore[misc]


def test_values_are_converted() -> None:
    config = parse(
        '[site]\nname = "Ex_1-b"\nstart_urls = [" HTTP://Example.com/a ", "https://[::1]:8/"]\n'
        '[scope]\nhosts = ["CDN.Example.com", "::1", "[2001:DB8:0::1]", "10.0.0.1"]\ninclude = ["^https://"]\n'
        'max_depth = 0\nmax_pages = 5\npage_requisites = false\nignore_query = ["ref"]\n'
        "[crawl]\ndelay = 2\ntimeout = 0.5\n"
        'headers = { Accept = "text/html", "X!y" = "1" }\n'
        "[archive]\nwarc_max_bytes = 1\n"
    )
    assert config.site.start_urls == ("HTTP://Example.com/a", "https://[::1]:8/")
    assert config.scope.hosts == ("cdn.example.com", "[::1]", "[2001:db8::1]", "10.0.0.1")
    assert config.scope.include == ("^https://",)
    assert (config.scope.max_depth, config.scope.max_pages) == (0, 5)
    assert config.scope.page_requisites is False
    assert config.scope.ignore_query == ("ref",)
    assert config.crawl.delay == 2.0 and isinstance(config.crawl.delay, float)
    assert config.crawl.headers == (("Accept", "text/html"), ("X!y", "1"))
    assert config.archive.warc_max_bytes == 1


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SITE.encode())
    assert load_config(path).site.name == "ex"


# --- output_dir -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (None, "sites/archive/ex"),
        ("out", "sites/out"),
        ("../out/./x", "out/x"),
        ("~/backups", "home/backups"),
    ],
)
def test_output_dir_is_relative_to_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str | None, expected: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sites").mkdir()
    line = f'output_dir = "{written}"\n' if written else ""
    (tmp_path / "sites" / "a.toml").write_text(SITE + line)
    config = load_config("sites/a.toml")
    assert config.path == tmp_path / "sites" / "a.toml"
    assert config.site.output_dir == tmp_path / expected


def test_absolute_output_dir_is_kept(tmp_path: Path) -> None:
    config = parse(SITE + f'output_dir = "{tmp_path / "x"}"\n', "elsewhere/site.toml")
    assert config.site.output_dir == tmp_path / "x"


# --- every rule, every message ------------------------------------------------------------------

URLS = '\nstart_urls = ["https://example.com/"]\n'
HTTP_URL = "an absolute http(s) URL such as 'https://example.com/'"
FIELD = "a string without control characters (a tab is allowed)"
UA = "a non-empty string without control characters (a tab is allowed)"
CRAWL_KEYS = (
    "workers, per_host, parse_processes, delay, max_crawl_delay, max_retry_after, "
    "max_redirects, max_tries, timeout, connect_timeout, "
    "read_timeout, max_response_bytes, user_agent, headers, stop_grace, max_retry_time, "
    "dead_host_after, cookies, cookies_file"
)

SECTIONS = "site, scope, crawl, login, archive, schedule, hooks, retention, browser"
FORMS = '"hourly", "daily HH:MM", "weekly DAY HH:MM" or a 5-field cron expression'

CASES = [
    # [site]
    ("[site]" + URLS, "site.name", "[site] name: required key is missing"),
    ('[site]\nname = "ex"\n', "site.start_urls", "[site] start_urls: required key is missing"),
    ('[site]\nname = "my site"' + URLS, "site.name",
     "[site] name: expected a name made of letters, digits, '_' and '-', "
     "found 'my site' (a string)"),
    ('[site]\nname = "ex\\n"' + URLS, "site.name",
     "[site] name: expected a name made of letters, digits, '_' and '-', found 'ex\\n' (a string)"),
    ("[site]\nname = 3" + URLS, "site.name",
     "[site] name: expected a name made of letters, digits, '_' and '-', found 3 (an integer)"),
    ('[site]\nname = "ex"\nstart_urls = []', "site.start_urls",
     "[site] start_urls: expected a non-empty array of URLs, found [] (an array)"),
    ('[site]\nname = "ex"\nstart_urls = "https://example.com/"', "site.start_urls",
     "[site] start_urls: expected a non-empty array of URLs, "
     "found 'https://example.com/' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = ["https://example.com/", "example.com"]',
     "site.start_urls",
     f"[site] start_urls[1]: expected {HTTP_URL}, found 'example.com' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = ["ftp://example.com/"]', "site.start_urls",
     f"[site] start_urls[0]: expected {HTTP_URL}, found 'ftp://example.com/' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = ["https://"]', "site.start_urls",
     f"[site] start_urls[0]: expected {HTTP_URL}, found 'https://' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = ["http://example.com:99999/"]', "site.start_urls",
     f"[site] start_urls[0]: expected {HTTP_URL}, found 'http://example.com:99999/' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = ["http://exa mple.com/"]', "site.start_urls",
     f"[site] start_urls[0]: expected {HTTP_URL}, found 'http://exa mple.com/' (a string)"),
    ('[site]\nname = "ex"\nstart_urls = [3]', "site.start_urls",
     f"[site] start_urls[0]: expected {HTTP_URL}, found 3 (an integer)"),
    (SITE + 'output_dir = ""', "site.output_dir",
     "[site] output_dir: expected a non-empty path, found '' (a string)"),
    # [scope]
    (SITE + '[scope]\nhosts = ["https://cdn.example.com/"]', "scope.hosts",
     "[scope] hosts[0]: expected a host name such as 'cdn.example.com', "
     "found 'https://cdn.example.com/' (a string)"),
    (SITE + '[scope]\nhosts = ["a.com", "example.com:8080"]', "scope.hosts",
     "[scope] hosts[1]: expected a host name such as 'cdn.example.com', "
     "found 'example.com:8080' (a string)"),
    (SITE + '[scope]\nhosts = ["[::1]:8080"]', "scope.hosts",
     "[scope] hosts[0]: expected a host name such as 'cdn.example.com', "
     "found '[::1]:8080' (a string)"),
    (SITE + '[scope]\nhosts = ["*.example.com"]', "scope.hosts",
     "[scope] hosts[0]: expected a host name such as 'cdn.example.com', "
     "found '*.example.com' (a string)"),
    (SITE + '[scope]\nhosts = "a.com"', "scope.hosts",
     "[scope] hosts: expected an array of host names, found 'a.com' (a string)"),
    (SITE + '[scope]\ninclude = ["ok", "(", 3]', "scope.include",
     "[scope] include[1]: invalid regular expression: "
     "missing ), unterminated subpattern at position 0"),
    (SITE + '[scope]\nexclude = ["a", "b", 3]', "scope.exclude",
     "[scope] exclude[2]: expected a regular expression (a string), found 3 (an integer)"),
    (SITE + '[scope]\nexclude = "a"', "scope.exclude",
     "[scope] exclude: expected an array of regular expressions, found 'a' (a string)"),
    (SITE + "[scope]\nmax_depth = -1", "scope.max_depth",
     "[scope] max_depth: expected an integer from 0 to 10,000, found -1 (an integer)"),
    (SITE + "[scope]\nmax_depth = 1.5", "scope.max_depth",
     "[scope] max_depth: expected an integer from 0 to 10,000, found 1.5 (a float)"),
    (SITE + "[scope]\nmax_pages = true", "scope.max_pages",
     "[scope] max_pages: expected an integer from 0 to 1,000,000,000, found True (a boolean)"),
    (SITE + '[scope]\npage_requisites = "yes"', "scope.page_requisites",
     "[scope] page_requisites: expected true or false, found 'yes' (a string)"),
    (SITE + "[scope]\npage_requisites = 1", "scope.page_requisites",
     "[scope] page_requisites: expected true or false, found 1 (an integer)"),
    (SITE + '[scope]\nignore_query = [""]', "scope.ignore_query",
     "[scope] ignore_query[0]: expected a parameter name or glob such as 'utm_*', "
     "found '' (a string)"),
    ("scope = 3\n" + SITE, "scope", "[scope]: expected a table, found 3 (an integer)"),
    (SITE + "[[scope]]\nmax_depth = 1", "scope",
     "[scope]: expected a table, found [{'max_depth': 1}] (an array)"),
    # [crawl]
    (SITE + '[crawl]\nworkers = "sixteen"', "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found 'sixteen' (a string)"),
    (SITE + "[crawl]\nworkers = 0", "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found 0 (an integer)"),
    (SITE + "[crawl]\nworkers = true", "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found True (a boolean)"),
    (SITE + "[crawl]\nworkers = 16.0", "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found 16.0 (a float)"),
    (SITE + "[crawl]\nper_host = 0", "crawl.per_host",
     "[crawl] per_host: expected an integer from 1 to 100, found 0 (an integer)"),
    (SITE + "[crawl]\ndelay = -1", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found -1 (an integer)"),
    (SITE + "[crawl]\ndelay = nan", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found nan (a float)"),
    (SITE + "[crawl]\ndelay = false", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found False (a boolean)"),
    (SITE + '[crawl]\ndelay = "1s"', "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found '1s' (a string)"),
    (SITE + "[crawl]\ndelay = 1979-05-27", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found 1979-05-27 (a date)"),
    (SITE + "[crawl]\ndelay = 1979-05-27T07:32:00Z", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600,"
     " found 1979-05-27T07:32:00+00:00 (a datetime)"),
    (SITE + "[crawl]\ndelay = 07:32:00", "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found 07:32:00 (a time)"),
    (SITE + "[crawl]\nmax_redirects = -1", "crawl.max_redirects",
     "[crawl] max_redirects: expected an integer from 0 to 100, found -1 (an integer)"),
    (SITE + "[crawl]\nmax_tries = 0", "crawl.max_tries",
     "[crawl] max_tries: expected an integer from 1 to 100, found 0 (an integer)"),
    (SITE + "[crawl]\ntimeout = 0", "crawl.timeout",
     "[crawl] timeout: expected a number > 0 and <= 3600, found 0 (an integer)"),
    (SITE + "[crawl]\ntimeout = inf", "crawl.timeout",
     "[crawl] timeout: expected a number > 0 and <= 3600, found inf (a float)"),
    (SITE + "[crawl]\nconnect_timeout = 0.0", "crawl.connect_timeout",
     "[crawl] connect_timeout: expected a number > 0 and <= 3600, found 0.0 (a float)"),
    (SITE + "[crawl]\nread_timeout = -1.5", "crawl.read_timeout",
     "[crawl] read_timeout: expected a number > 0 and <= 3600, found -1.5 (a float)"),
    (SITE + "[crawl]\nmax_response_bytes = 0", "crawl.max_response_bytes",
     "[crawl] max_response_bytes: expected an integer from 1 to 100,000,000,000,"
     " found 0 (an integer)"),
    (SITE + '[crawl]\nuser_agent = " "', "crawl.user_agent",
     f"[crawl] user_agent: expected {UA}, found ' ' (a string)"),
    (SITE + '[crawl]\nuser_agent = "a\\r\\nX: b"', "crawl.user_agent",
     f"[crawl] user_agent: expected {UA}, found 'a\\r\\nX: b' (a string)"),
    (SITE + '[crawl]\nheaders = "x"', "crawl.headers",
     "[crawl] headers: expected a table of header names to strings, found 'x' (a string)"),
    (SITE + '[crawl]\nheaders = { "Bad Name" = "x" }', "crawl.headers",
     "[crawl] headers: invalid header name 'Bad Name'; expected an HTTP token "
     "(letters, digits and !#$%&'*+-.^_`|~)"),
    (SITE + "[crawl.headers]\nX-A = 1", "crawl.headers",
     f"[crawl] headers.X-A: expected {FIELD}, found 1 (an integer)"),
    (SITE + '[crawl.headers]\n"X!y" = "a\\nb"', "crawl.headers",
     f"[crawl] headers.\"X!y\": expected {FIELD}, found 'a\\nb' (a string)"),
    (SITE + '[crawl.headers]\nCookie = "secret\\n"', "crawl.headers",
     f"[crawl] headers.Cookie: expected {FIELD}, found {REDACTED} (a string)"),
    (SITE + '[crawl.headers]\nAccept = "a"\naccept = "b"', "crawl.headers",
     "[crawl] headers: header 'accept' is set twice (also as 'Accept'); header names ignore case"),
    (SITE + '[crawl.headers]\nuser-agent = "x"', "crawl.headers",
     "[crawl] headers.user-agent: set the User-Agent with [crawl] user_agent"),
    (SITE + '[crawl]\nuser_agent = "' + "x" * 70 + '\\n"', "crawl.user_agent",
     f"[crawl] user_agent: expected {UA}, found '{'x' * 56}... (a string)"),
    # [archive]
    (SITE + "[archive]\nwarc_max_bytes = 0", "archive.warc_max_bytes",
     "[archive] warc_max_bytes: expected an integer from 1 to 1,000,000,000,000,"
     " found 0 (an integer)"),
    # issue 15's keys
    (SITE + "[scope]\ntraps = ['replytocom', 'calendar']", "scope.traps",
     "[scope] traps[1]: expected a trap rule name such as 'login' or 'mediawiki-edit' "
     "(`mirror check` lists all 33), found 'calendar' (a string)"),
    (SITE + "[scope]\ntraps = ['mediawiki-edits']", "scope.traps",
     "[scope] traps[0]: expected a trap rule name such as 'mediawiki-edit' (`mirror check` "
     "lists all 33), found 'mediawiki-edits' (a string)"),
    (SITE + "[crawl]\ncookies_file = 'missing.txt'", "crawl.cookies_file",
     f"[crawl] cookies_file: no such file: {Path('missing.txt').absolute()}"),
    (SITE + "[crawl]\nmax_retry_time = -1", "crawl.max_retry_time",
     "[crawl] max_retry_time: expected a number from 0 to 86400, found -1 (an integer)"),
    (SITE + "[login]\nfields = { user = 'me' }", "login.url",
     "[login] url: required when [login] fields are given (the address the login form is "
     "sent to)"),
    (SITE + "[login]\nurl = 'https://example.com/login'\n"
            "fields = { pass = { env = 'MIRROR_TEST_UNSET_VARIABLE' } }", "login.fields",
     "[login] fields.pass: the environment variable MIRROR_TEST_UNSET_VARIABLE is not set"),
    (SITE + "[login]\nurl = 'https://example.com/login'\nfields = { pass = 12345 }",
     "login.fields",
     "[login] fields.pass: expected a string or { env = \"NAME\" }, found <redacted> "
     "(an integer)"),
    (SITE + "[login]\nurl = 'https://example.com/login'\nsuccess = 999", "login.success",
     "[login] success: expected a text the page shows once logged in, or an HTTP status "
     "(100-599), found 999 (an integer)"),
    # issue 18's sections: [schedule], [hooks], [retention]
    (SITE + "[schedule]\nevery = 3", "schedule.every",
     f"[schedule] every: expected {FORMS}, found 3 (an integer)"),
    (SITE + "[schedule]\nevery = 'nightly'", "schedule.every",
     f"[schedule] every: expected {FORMS}, found 'nightly'"),
    (SITE + "[schedule]\nevery = 'dayly 03:15'", "schedule.every",
     f"[schedule] every: expected {FORMS}, found 'dayly 03:15'; did you mean 'daily'?"),
    (SITE + "[schedule]\nevery = 'daily'", "schedule.every",
     "[schedule] every: invalid schedule 'daily': expected 'daily HH:MM', such as "
     "'daily 03:15'"),
    (SITE + "[schedule]\nevery = 'daily 24:00'", "schedule.every",
     "[schedule] every: invalid schedule 'daily 24:00': the hour must be 0-23, found 24"),
    (SITE + "[schedule]\nevery = 'daily 3pm'", "schedule.every",
     "[schedule] every: invalid schedule 'daily 3pm': expected a time HH:MM such as 03:15, "
     "found '3pm'"),
    (SITE + "[schedule]\nevery = 'weekly sunday'", "schedule.every",
     "[schedule] every: invalid schedule 'weekly sunday': expected 'weekly DAY HH:MM', such "
     "as 'weekly sun 04:00'"),
    (SITE + "[schedule]\nevery = 'weekly sin 04:00'", "schedule.every",
     "[schedule] every: invalid schedule 'weekly sin 04:00': expected a day of the week "
     "(sun, mon, tue, wed, thu, fri, sat), found 'sin'"),
    (SITE + "[schedule]\nevery = '60 3 * * *'", "schedule.every",
     "[schedule] every: invalid cron expression '60 3 * * *': minute field '60': 60 is out "
     "of range 0-59"),
    (SITE + "[schedule]\nevery = '0 3 * * 1 *'", "schedule.every",
     f"[schedule] every: expected {FORMS}, found '0 3 * * 1 *'; a cron expression has 5 "
     "fields (minute hour day-of-month month day-of-week), this has 6"),
    (SITE + "[schedule]\nevery = '0 3 31 2,4 *'", "schedule.every",
     "[schedule] every: invalid cron expression '0 3 31 2,4 *': it never runs (no month in "
     "it has those days)"),
    (SITE + "[schedule]\nevery = '0 3 * * 1'\nat = '03:00'", "schedule.at",
     "[schedule] at: unknown key; valid keys are: every"),
    (SITE + "[hooks]\nafter = ['curl', 'x']", "hooks.after",
     "[hooks] after: expected a shell command (a string without NUL), found ['curl', 'x'] "
     "(an array)"),
    (SITE + "[hooks]\non_failure = \"a\\u0000b\"", "hooks.on_failure",
     "[hooks] on_failure: expected a shell command (a string without NUL), found 'a\\x00b' "
     "(a string)"),
    (SITE + "[hooks]\nonfailure = 'x'", "hooks.onfailure",
     "[hooks] onfailure: unknown key; did you mean 'on_failure'?"),
    (SITE + "[hooks]\ntimeout = 0", "hooks.timeout",
     "[hooks] timeout: expected a number > 0 and <= 86400, found 0 (an integer)"),
    (SITE + "[retention]\nkeep_daily = -1", "retention.keep_daily",
     "[retention] keep_daily: expected an integer from 0 to 100,000, found -1 (an integer)"),
    (SITE + "[retention]\nkeep_weekly = 2.5", "retention.keep_weekly",
     "[retention] keep_weekly: expected an integer from 0 to 100,000, found 2.5 (a float)"),
    (SITE + "[retention]\nkeep_monthly = '6'", "retention.keep_monthly",
     "[retention] keep_monthly: expected an integer from 0 to 100,000, found '6' (a string)"),
    (SITE + "[retention]\nkeep_yearly = 1", "retention.keep_yearly",
     "[retention] keep_yearly: unknown key; did you mean 'keep_daily'?"),
    ("keep_daily = 7\n" + SITE, "keep_daily",
     "keep_daily: unknown top-level key; did you mean [retention] keep_daily?"),
    (SITE + "[retention]\nkeep-last = 3", "retention.keep-last",
     "[retention] keep-last: unknown key; did you mean 'keep_last'?"),
    # unknown names, with and without a hint
    (SITE + "[crawl]\nworker = 3", "crawl.worker",
     "[crawl] worker: unknown key; did you mean 'workers'?"),
    (SITE + "[crawl]\nPER-HOST = 3", "crawl.PER-HOST",
     "[crawl] PER-HOST: unknown key; did you mean 'per_host'?"),
    (SITE + "[crawl]\nspeed = 3", "crawl.speed",
     f"[crawl] speed: unknown key; valid keys are: {CRAWL_KEYS}"),
    (SITE + "[crawl.proxy]\nurl = 'x'", "crawl.proxy",
     f"[crawl] proxy: unknown key; valid keys are: {CRAWL_KEYS}"),
    (SITE + "[crawling]\nworkers = 3", "crawling",
     "[crawling]: unknown section; did you mean 'crawl'?"),
    (SITE + "[proxy]\nurl = 'x'", "proxy",
     f"[proxy]: unknown section; valid sections are: {SECTIONS}"),
    ("workers = 3\n" + SITE, "workers",
     "workers: unknown top-level key; did you mean [crawl] workers?"),
    ("speed = 3\n" + SITE, "speed",
     f"speed: unknown top-level key; valid sections are: {SECTIONS}"),
    (SITE + '[headers]\nCookie = "x"', "headers",
     "[headers]: unknown section; did you mean [crawl.headers]?"),
]


@pytest.mark.parametrize(("text", "key", "message"), CASES, ids=[c[2] for c in CASES])
def test_error_message(text: str, key: str, message: str) -> None:
    exc = error(text)
    assert str(exc) == f"site.toml: {message}"
    assert exc.key == key
    assert exc.path == Path("site.toml")


def test_every_error_of_a_file_at_once() -> None:
    exc = error('typo = 1\n[site]\nname = "ex"\nstart_urls = ["ftp://example.com/"]\n'
                '[crawl]\nworker = 3\nworkers = "many"\ndelay = -1\n'
                '[login]\nfields = { user = "me" }\n')
    assert [(e.key, e.detail) for e in exc.errors] == [
        ("typo", f"typo: unknown top-level key; valid sections are: {SECTIONS}"),
        ("site.start_urls", "[site] start_urls[0]: expected an absolute http(s) URL such as "
                            "'https://example.com/', found 'ftp://example.com/' (a string)"),
        ("crawl.worker", "[crawl] worker: unknown key; did you mean 'workers'?"),
        ("crawl.workers", "[crawl] workers: expected an integer from 1 to 1,000,"
                          " found 'many' (a string)"),
        ("crawl.delay", "[crawl] delay: expected a number from 0 to 3600, found -1 (an integer)"),
        ("login.url", "[login] url: required when [login] fields are given (the address the "
                      "login form is sent to)"),
    ]
    assert str(exc) == "\n".join(f"site.toml: {e.detail}" for e in exc.errors)
    assert (exc.key, exc.path, exc.message) == ("typo", Path("site.toml"),
                                                "typo: unknown top-level key")
    assert isinstance(exc, ConfigErrors)
    worker = exc.errors[2]
    assert (worker.message, worker.hint) == ("[crawl] worker: unknown key",
                                             "did you mean 'workers'?")


def test_a_key_derived_from_an_invalid_key_adds_no_error() -> None:
    """output_dir's default comes from the name: a bad name is one error, not two."""
    exc = error('[site]\nname = "a b"\nstart_urls = ["https://example.com/"]\n')
    assert [e.key for e in exc.errors] == ["site.name"]
    assert not isinstance(exc, ConfigErrors)


def test_a_missing_file_section_is_every_required_key() -> None:
    assert [e.detail for e in error("").errors] == [
        "[site] name: required key is missing", "[site] start_urls: required key is missing"]


def test_invalid_toml_is_one_error() -> None:
    exc = error('[site]\nname = \nworkers = "x"\n')
    assert exc.errors == [exc] and exc.key is None and exc.hint == ""


def test_message_uses_the_path_as_given() -> None:
    with pytest.raises(ConfigError, match=r"^\.\./sites/a\.toml: \[site\] name: required"):
        parse("", "../sites/a.toml")


def test_choice_rule() -> None:
    rule = choice("fast", "power")
    assert rule("power", Context(Path("/"))) == "power"
    with pytest.raises(Invalid) as info:
        rule("slow", Context(Path("/")))
    assert info.value.detail == "expected one of 'fast', 'power', found 'slow' (a string)"


# --- file-level errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[site]\nname = \n", "line 2, column 8: invalid TOML: Invalid value"),
        ("[site\n",
         "line 1, column 6: invalid TOML: Expected ']' at the end of a table declaration"),
        ('[site]\nname = "a"\nname = "b"\n',
         "line 3, column 11: invalid TOML: Cannot overwrite a value"),
        ('[site]\nname = "ex', "line 2, column 11: invalid TOML: Unterminated string"),
        ("[site]\nstart_urls = [1,", "line 2, column 17: invalid TOML: Invalid value"),
    ],
)
def test_toml_syntax_error(text: str, message: str) -> None:
    exc = error(text)
    assert str(exc) == f"site.toml: {message}"
    assert exc.key is None


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config("nope.toml")
    assert str(info.value) == "nope.toml: cannot read: [Errno 2] No such file or directory"
    assert (info.value.path, info.value.key) == (Path("nope.toml"), None)
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_directory_instead_of_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match=r"^d: cannot read: \[Errno 21\] Is a directory$"):
        load_config("d")


def test_not_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("site.toml").write_bytes(b'[site]\nname = "\xff"\n')
    with pytest.raises(ConfigError) as info:
        load_config("site.toml")
    assert str(info.value) == "site.toml: cannot read: not UTF-8 text (byte 15)"


# --- digest and effective settings ---------------------------------------------------------------


def test_digest_is_stable_across_key_order_and_number_spelling() -> None:
    one = parse(SITE + '[crawl]\nworkers = 2\ndelay = 1\nheaders = { A = "1", B = "2" }\n'
                '[scope]\nmax_depth = 3\n')
    two = parse('[scope]\nmax_depth = 3\n[crawl]\nheaders = { B = "2", A = "1" }\n'
                'delay = 1.0\nworkers = 2\n'
                '[site]\nstart_urls = ["https://example.com/"]\nname = "ex"\n')
    assert one.digest() == two.digest()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", one.digest())


def test_digest_ignores_where_files_live(tmp_path: Path) -> None:
    here = parse(SITE, str(tmp_path / "a" / "site.toml"))
    there = parse(SITE + 'output_dir = "/elsewhere"\n', str(tmp_path / "b" / "site.toml"))
    assert here.digest() == there.digest()


@pytest.mark.parametrize(
    "extra",
    [
        '[crawl]\nworkers = 15\n',
        '[scope]\npage_requisites = false\n',
        '[scope]\nignore_query = ["utm_*", "fbclid"]\n',
        '[archive]\nwarc_max_bytes = 5\n',
    ],
)
def test_digest_changes_with_a_value(extra: str) -> None:
    base = parse(SITE + '[crawl.headers]\nAuthorization = "Bearer token"\n')
    if "Authorization" not in extra:
        extra = '[crawl.headers]\nAuthorization = "Bearer token"\n' + extra
    assert parse(SITE + extra).digest() != base.digest()


def test_digest_leaves_secret_values_out() -> None:
    """The digest is written into every WARC: it must not allow guessing a password offline."""
    one = parse(SITE + '[crawl.headers]\nAuthorization = "Bearer one"\n')
    two = parse(SITE + '[crawl.headers]\nAuthorization = "Bearer two"\n')
    assert one.digest() == two.digest()


def test_effective_redacts_secret_headers(tmp_path: Path) -> None:
    config = parse(
        SITE + '[crawl.headers]\nauthorization = "Bearer t0ken"\nCOOKIE = "s=c00kie"\n'
        'Proxy-Authorization = "Basic cHJveHk="\nAccept-Language = "en"\n',
        str(tmp_path / "site.toml"),
    )
    effective = config.effective()
    assert effective["crawl"]["headers"] == {
        "authorization": REDACTED,
        "COOKIE": REDACTED,
        "Proxy-Authorization": REDACTED,
        "Accept-Language": "en",
    }
    assert effective["site"] == {
        "name": "ex",
        "start_urls": ["https://example.com/"],
        "output_dir": str(tmp_path / "archive" / "ex"),
    }
    assert effective["scope"]["ignore_query"] == list(DEFAULT_IGNORE_QUERY)
    assert effective["crawl"]["workers"] == 16
    shown = repr(effective) + config.digest()
    for secret in ("t0ken", "c00kie", "cHJveHk"):
        assert secret not in shown
    assert config.crawl.headers[0] == ("authorization", "Bearer t0ken")  # kept for fetch


# --- [schedule], [hooks], [retention] (issue 18) -------------------------------------------------


def test_schedule_hooks_and_retention_default_to_off() -> None:
    config = parse(SITE)
    assert config.schedule.every is None
    assert (config.hooks.after, config.hooks.on_failure, config.hooks.timeout) == ("", "", 600.0)
    assert config.retention == RetentionSection(0, 0, 0, 0)
    assert not config.retention.enabled
    assert config.effective()["schedule"] == {"every": ""}
    assert config.effective()["retention"] == {
        "keep_last": 0, "keep_daily": 0, "keep_weekly": 0, "keep_monthly": 0}


@pytest.mark.parametrize(
    ("written", "text", "cron"),
    [
        ("hourly", "hourly", "0 * * * *"),
        ("daily 3:15", "daily 03:15", "15 3 * * *"),
        ("  Weekly  SUNDAY 04:00 ", "weekly sun 04:00", "0 4 * * 0"),
        ("*/30 9-17 * * mon-fri", "*/30 9-17 * * mon-fri", "*/30 9-17 * * mon-fri"),
        ("", None, None),
    ],
)
def test_schedule_values(written: str, text: str | None, cron: str | None) -> None:
    every = parse(SITE + f"[schedule]\nevery = '{written}'\n").schedule.every
    assert ((every.text, every.cron) if every else (None, None)) == (text, cron)


def test_hooks_and_retention_values() -> None:
    config = parse(SITE + "[hooks]\nafter = 'curl -fsS https://hc.example/ping'\n"
                   "on_failure = '''\nlogger -t mirror \"run $MIRROR_RUN_ID failed\"\n'''\n"
                   "timeout = 30\n[retention]\nkeep_daily = 7\nkeep_monthly = 12\n")
    assert config.hooks.after == "curl -fsS https://hc.example/ping"
    assert config.hooks.on_failure == 'logger -t mirror "run $MIRROR_RUN_ID failed"\n'
    assert config.hooks.timeout == 30.0
    assert config.retention == RetentionSection(keep_daily=7, keep_monthly=12)
    assert config.retention.enabled
    assert config.effective()["retention"]["keep_daily"] == 7
    assert config.effective()["hooks"]["timeout"] == 30.0


def test_digest_leaves_schedule_hooks_and_retention_out() -> None:
    """They say when to run and what to do after, not how: changing them keeps the digest
    that every WARC file records (and that configs without them already had)."""
    plain = parse(SITE)
    more = parse(SITE + "[schedule]\nevery = 'daily 03:15'\n[hooks]\nafter = 'true'\n"
                 "[retention]\nkeep_last = 3\n")
    assert plain.digest() == more.digest()
    assert set(more.effective()) >= {"schedule", "hooks", "retention"}


# --- [browser] (issue 35) ------------------------------------------------------------------------


def test_browser_defaults_to_auto_with_the_first_browser_found() -> None:
    browser = parse(SITE).browser
    assert browser == BrowserSection()
    assert (browser.mode, browser.executable, browser.tabs, browser.page_timeout) == (
        "auto", None, 2, 30.0)
    assert (browser.scroll, browser.screenshot, browser.restart_pages, browser.max_rss_mb) == (
        10, False, 100, 1024)
    assert parse(SITE).effective()["browser"]["executable"] == ""


def test_browser_values(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "my-chrome"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    config = parse(SITE + "[browser]\nmode = 'always'\nexecutable = 'bin/my-chrome'\n"
                   "tabs = 4\npage_timeout = 5\nscroll = 0\nscreenshot = true\n"
                   "restart_pages = 20\nmax_rss_mb = 512\n", str(tmp_path / "site.toml"))
    assert config.browser == BrowserSection(
        mode="always", executable=str(program), tabs=4, page_timeout=5.0, scroll=0,
        screenshot=True, restart_pages=20, max_rss_mb=512)
    assert parse(SITE + "[browser]\nexecutable = ' sh '\n").browser.executable == "sh"
    assert parse(SITE + "[browser]\nexecutable = ''\n").browser.executable is None


def test_browser_settings_for_the_pool() -> None:
    from mirror.browser.api import BrowserSettings

    section = parse(SITE + "[browser]\ntabs = 3\nscroll = 4\nscreenshot = true\n").browser
    assert section.settings(Path("/usr/bin/chromium"), "mirror/test") == BrowserSettings(
        executable=Path("/usr/bin/chromium"), tabs=3, page_timeout=30.0, scroll=4,
        screenshot=True, restart_pages=100, max_rss_mb=1024, user_agent="mirror/test")


BROWSER_CASES = [
    ("mode = 'sometimes'", "browser.mode",
     "[browser] mode: expected one of 'auto', 'always', 'off', found 'sometimes' (a string)"),
    ("mode = true", "browser.mode",
     "[browser] mode: expected one of 'auto', 'always', 'off', found True (a boolean)"),
    ("executable = 'no-such-browser-here'", "browser.executable",
     "[browser] executable: no command 'no-such-browser-here' on PATH; give the browser's "
     "full path, or \"\" for the first one found"),
    ("executable = '/no/such/chrome'", "browser.executable",
     "[browser] executable: no browser program at /no/such/chrome (not a file, or not "
     "executable)"),
    ("executable = 3", "browser.executable",
     "[browser] executable: expected a browser's program path or command name, such as "
     "'chromium' or '/usr/bin/google-chrome' (\"\" for the first one found), found 3 "
     "(an integer)"),
    ("tabs = 0", "browser.tabs",
     "[browser] tabs: expected an integer from 1 to 32, found 0 (an integer)"),
    ("page_timeout = 0", "browser.page_timeout",
     "[browser] page_timeout: expected a number > 0 and <= 3600, found 0 (an integer)"),
    ("scroll = -1", "browser.scroll",
     "[browser] scroll: expected an integer from 0 to 1,000, found -1 (an integer)"),
    ("screenshot = 'yes'", "browser.screenshot",
     "[browser] screenshot: expected true or false, found 'yes' (a string)"),
    ("max_rss_mb = 10", "browser.max_rss_mb",
     "[browser] max_rss_mb: expected an integer from 64 to 1,000,000, found 10 (an integer)"),
    ("tab = 3", "browser.tab", "[browser] tab: unknown key; did you mean 'tabs'?"),
]


@pytest.mark.parametrize(("line", "key", "message"), BROWSER_CASES,
                         ids=[c[0] for c in BROWSER_CASES])
def test_browser_error_message(line: str, key: str, message: str) -> None:
    exc = error(SITE + f"[browser]\n{line}\n")
    assert (str(exc), exc.key) == (f"site.toml: {message}", key)


def test_digest_leaves_the_browser_program_out(tmp_path: Path) -> None:
    """Where the browser lives differs between machines, as output_dir does; the mode
    shapes the crawl."""
    plain = parse(SITE)
    assert parse(SITE + "[browser]\nexecutable = 'sh'\n").digest() == plain.digest()
    assert parse(SITE + "[browser]\nmode = 'off'\n").digest() != plain.digest()


@pytest.mark.parametrize(("system", "distro", "command"), [
    ("Linux", ("ubuntu", "debian"), "sudo apt install chromium"),
    ("Linux", ("linuxmint", "ubuntu", "debian"), "sudo apt install chromium"),
    ("Linux", ("fedora",), "sudo dnf install chromium"),
    ("Linux", ("rocky", "rhel", "centos", "fedora"), "sudo dnf install chromium"),
    ("Linux", ("arch",), "sudo apt install chromium, or sudo dnf install chromium"),
    ("Darwin", (), "brew install --cask chromium (or install Google Chrome)"),
    ("Windows", (), "winget install Google.Chrome (or Hibbiki.Chromium)"),
])
def test_install_command_by_system(system: str, distro: tuple[str, ...], command: str) -> None:
    assert install_command(system, distro) == command
    assert f"({command}) or set [browser] executable" in enable_advice(system, distro)
