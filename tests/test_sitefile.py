"""Tests for mirror.app.sitefile: new site files, the settings form's edits, atomic writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.app.newsite import (
    Covered,
    NameTaken,
    SiteFileError,
    add_site,
    free_name,
    new_site_text,
    site_name,
)
from mirror.app.sitefile import (
    FORM_FIELDS,
    apply_form,
    form_values,
    write_site_file,
)
from mirror.config import ConfigError, CrawlSection, ScopeSection, load_config, parse_config
from mirror.web.http import REDACTED

SITE = Path("site.toml")
MINIMAL = '[site]\nname = "ex"\nstart_urls = ["https://example.com/"]\n'
HAND = """\
# My blog, archived nightly.
[site]
name = "blog"  # do not rename: the WARC files carry it
start_urls = [
    "https://blog.example.org/",  # the front page
    "https://blog.example.org/archive/",
]

[scope]
exclude = [
    # the calendar is endless
    '/calendar/',
]
max_depth = 5

# Be gentle: a small server.
[crawl]
workers = 16  # all hosts
delay = 2
timeout = 30.0

[archive]
durability = "power"
"""


def edit(text: str, **values: str) -> str:
    return apply_form(text, SITE, {key.replace("__", "."): v for key, v in values.items()})


def error(text: str, values: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        apply_form(text, SITE, values)
    return info.value


# --- new site files -----------------------------------------------------------------------


def test_new_site_text_is_valid_with_the_config_defaults(tmp_path: Path) -> None:
    text = new_site_text("https://www.Example.com/docs/")
    config = parse_config(text, tmp_path / "example-com.toml")
    assert config.site.name == "example-com"
    assert config.site.start_urls == ("https://www.Example.com/docs/",)
    assert config.site.output_dir == tmp_path / "archive" / "example-com"
    assert config.scope == ScopeSection()
    assert config.crawl == CrawlSection()
    assert "# output_dir = \"archive/example-com\"\n" in text
    assert "# include = ['^https://www\\.example\\.com/blog/']\n" in text
    assert "\nworkers = 16\nper_host = 4\n" in text and "\ndelay = 0.0\n" in text


def test_new_site_text_round_trips_through_the_form() -> None:
    text = new_site_text("https://example.com/", name="ex", output_dir="/srv/ex")
    values = form_values(text)
    assert values["site.name"] == "ex"
    assert values["site.start_urls"] == "https://example.com/"
    assert (values["crawl.workers"], values["crawl.delay"]) == ("16", "0.0")
    assert values["crawl.user_agent"] == CrawlSection().user_agent
    assert apply_form(text, SITE, values) == text
    assert parse_config(text, SITE).site.output_dir == Path("/srv/ex")


@pytest.mark.parametrize(("url", "name"), [
    ("https://www.Example.com/a?b", "example-com"),
    ("http://localhost:8080/", "localhost-8080"),
    ("https://example.com:443/", "example-com"),
    ("http://[::1]:8081/", "1-8081"),
    ("https://bücher.de/", "xn--bcher-kva-de"),
    ("http://127.0.0.1/", "127-0-0-1"),
    ("https://www2.example.co.uk/", "www2-example-co-uk"),
    ("not a url", "site"),
])
def test_site_name_is_a_valid_name(url: str, name: str) -> None:
    assert site_name(url) == name


@pytest.mark.parametrize(("url", "name", "key"), [
    ("example.com", None, "site.start_urls"),
    ("ftp://example.com/", None, "site.start_urls"),
    ("https://exa mple.com/", None, "site.start_urls"),
    ("", None, "site.start_urls"),
    ("https://example.com/", "my site", "site.name"),
    ("https://example.com/", "../x", "site.name"),
])
def test_new_site_text_rejects_through_parse_config(url: str, name: str | None,
                                                     key: str) -> None:
    with pytest.raises(ConfigError) as info:
        new_site_text(url, name)
    assert info.value.key == key


def test_new_site_text_message_is_config_style() -> None:
    with pytest.raises(ConfigError) as info:
        new_site_text("example.com")
    assert str(info.value) == (
        "site.toml: [site] start_urls[0]: expected an absolute http(s) URL such as "
        "'https://example.com/', found 'example.com' (a string)")


# --- add_site -----------------------------------------------------------------------------


def test_add_site_writes_a_valid_file(tmp_path: Path) -> None:
    library = tmp_path / "lib" / "rary"
    path = add_site(library, " https://www.example.com/ ")
    assert path == library / "example-com.toml"
    assert path.read_text(encoding="utf-8") == new_site_text("https://www.example.com/")
    config = load_config(path)
    assert config.site.start_urls == ("https://www.example.com/",)
    assert config.site.output_dir == library / "archive" / "example-com"
    assert [p.name for p in library.iterdir()] == ["example-com.toml"]


def test_add_site_with_a_name(tmp_path: Path) -> None:
    path = add_site(tmp_path, "https://example.com/", name="Docs_2")
    assert path == tmp_path / "Docs_2.toml"
    assert load_config(path).site.name == "Docs_2"


def test_add_site_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "example-com.toml"
    path.write_text("# mine\n")
    with pytest.raises(NameTaken, match=f"^{path}: a site named 'example-com' is in"):
        add_site(tmp_path, "https://example.com/")
    assert path.read_text() == "# mine\n"


def test_add_site_refuses_a_name_another_file_uses(tmp_path: Path) -> None:
    (tmp_path / "old.toml").write_text(MINIMAL.replace('"ex"', '"Example-com"')
                                       .replace("example.com", "old.example"))
    (tmp_path / "broken.toml").write_text("[site\n")
    old = tmp_path / "old.toml"
    with pytest.raises(SiteFileError, match=f"^{old}: a site named 'example-com' is in the "
                       "library already; choose another name, e.g. example-com-2$"):
        add_site(tmp_path, "https://example.com/")
    assert add_site(tmp_path, "https://example.com/", "other").name == "other.toml"


def test_a_second_site_on_the_same_host_gets_its_port_in_its_name(tmp_path: Path) -> None:
    first = add_site(tmp_path, "http://127.0.0.1:8081/")
    second = add_site(tmp_path, "http://127.0.0.1:8082/")
    assert (first.stem, second.stem) == ("127-0-0-1-8081", "127-0-0-1-8082")
    with pytest.raises(NameTaken) as info:  # not covered: another path, another depth
        add_site(tmp_path, "http://127.0.0.1:8082/", "127-0-0-1-8081", overlap=True)
    assert info.value.suggestion == "127-0-0-1-8081-2"


def test_free_name_skips_the_taken_ones() -> None:
    assert free_name("ex", {"ex"}) == "ex-2"
    assert free_name("ex", {"ex", "ex-2", "ex-3"}) == "ex-4"
    assert free_name("Ex", {"ex", "ex-2"}) == "Ex-3"


def test_add_site_refuses_a_url_another_site_covers(tmp_path: Path) -> None:
    (tmp_path / "docs.toml").write_text(
        '[site]\nname = "docs"\nstart_urls = ["https://example.com/docs/"]\n'
        "[scope]\nexclude = ['/private/']\nhosts = ['cdn.example.com']\n")
    for covered in ("https://example.com/", "https://www.example.com/blog/a",
                    "https://cdn.example.com/x", "https://EXAMPLE.com/docs/#top"):
        with pytest.raises(Covered, match=r"^\S+: the site 'docs' \(.*docs\.toml\) covers "
                                          r"this URL already") as info:
            add_site(tmp_path, covered)
        assert info.value.site == "docs"
    for free in ("https://example.com/private/", "https://example.org/",
                 "https://example.com:8443/"):
        assert add_site(tmp_path, free).exists()
    path = add_site(tmp_path, "https://example.com/docs/", "again", overlap=True)
    assert path.name == "again.toml"


def test_a_site_that_follows_no_link_covers_its_start_urls_only(tmp_path: Path) -> None:
    (tmp_path / "one.toml").write_text(
        '[site]\nname = "one"\nstart_urls = ["https://example.com/a"]\n'
        "[scope]\nmax_depth = 0\n")
    with pytest.raises(Covered):
        add_site(tmp_path, "https://example.com/a")
    assert add_site(tmp_path, "https://example.com/b").exists()


def test_add_site_rejects_a_bad_url_or_name_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        add_site(tmp_path / "lib", "example.com")
    assert info.value.key == "site.start_urls"
    assert info.value.path == tmp_path / "lib" / "site.toml"
    with pytest.raises(ConfigError) as info:
        add_site(tmp_path / "lib", "https://example.com/", "../evil")
    assert info.value.key == "site.name"
    assert list(tmp_path.iterdir()) == []


def test_add_site_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "lib").write_text("a file, not a folder")
    with pytest.raises(SiteFileError, match="cannot write"):
        add_site(tmp_path / "lib", "https://example.com/")


# --- apply_form: only what changed, comments and order kept -------------------------------


def test_an_unchanged_form_leaves_the_text_alone() -> None:
    for text in (HAND, MINIMAL):
        assert apply_form(text, SITE, form_values(text)) == text


def test_a_changed_value_keeps_comments_and_order() -> None:
    assert edit(HAND, crawl__workers="8") == HAND.replace(
        "workers = 16  # all hosts\n", "workers = 8  # all hosts\n")
    assert edit(HAND, scope__max_depth=" 0 ") == HAND.replace("max_depth = 5", "max_depth = 0")
    assert edit(HAND, crawl__delay="2.0") == HAND  # 2 and 2.0 are the same delay


def test_a_list_is_rewritten_in_place() -> None:
    new = edit(HAND, scope__exclude="/calendar/\n\n  \\?replytocom=  \n")
    assert new == HAND.replace(
        "exclude = [\n    # the calendar is endless\n    '/calendar/',\n]\n",
        "exclude = [\"/calendar/\", '\\?replytocom=']\n")
    assert parse_config(new, SITE).scope.exclude == ("/calendar/", r"\?replytocom=")
    urls = "\n".join(f"https://blog.example.org/{n}/" for n in range(4))
    new = edit(HAND, site__start_urls=urls)
    assert "start_urls = [\n    \"https://blog.example.org/0/\",\n" in new
    assert parse_config(new, SITE).site.start_urls == tuple(urls.split("\n"))


def test_a_missing_key_goes_after_the_last_key_of_its_section() -> None:
    new = edit(HAND, scope__hosts="cdn.example.org", crawl__per_host="2")
    assert new == HAND.replace("max_depth = 5\n", 'max_depth = 5\nhosts = ["cdn.example.org"]\n') \
        .replace("timeout = 30.0\n", "timeout = 30.0\nper_host = 2\n")


def test_a_missing_key_goes_under_its_commented_example() -> None:
    text = new_site_text("https://example.com/")
    new = edit(text, scope__include="^https://example\\.com/docs/")
    assert ("# include = ['^https://example\\.com/blog/']\n"
            "include = ['^https://example\\.com/docs/']\n"
            "# A URL matching") in new


def test_values_equal_to_the_defaults_are_not_written() -> None:
    assert edit(MINIMAL, crawl__workers="16", crawl__delay="0", scope__hosts="\n",
                crawl__headers="", crawl__user_agent=CrawlSection().user_agent) == MINIMAL


def test_a_missing_section_is_added_in_config_order() -> None:
    assert edit(MINIMAL, crawl__workers="4", scope__max_pages="9") == MINIMAL + (
        "\n[scope]\nmax_pages = 9\n\n[crawl]\nworkers = 4\n")
    text = MINIMAL + "\n# Be gentle.\n[crawl]\nworkers = 2\n"
    assert edit(text, scope__max_depth="1") == MINIMAL + (
        "\n[scope]\nmax_depth = 1\n\n# Be gentle.\n[crawl]\nworkers = 2\n")
    for gap in ("", "\n"):
        assert edit(MINIMAL + gap + "[crawl]\n", scope__max_depth="1") == MINIMAL + (
            "\n[scope]\nmax_depth = 1\n\n[crawl]\n")
    no_newline = MINIMAL.rstrip("\n")
    assert edit(no_newline, scope__max_depth="1") == MINIMAL + "\n[scope]\nmax_depth = 1\n"


def test_line_endings_and_byte_order_mark() -> None:
    crlf = MINIMAL.replace("\n", "\r\n")
    assert edit(crlf, crawl__workers="2") == crlf + "\r\n[crawl]\r\nworkers = 2\r\n"
    assert form_values("\ufeff" + MINIMAL)["site.name"] == "ex"
    assert edit("\ufeff" + MINIMAL, crawl__workers="2") == MINIMAL + "\n[crawl]\nworkers = 2\n"


def test_read_only_fields_are_not_written_and_unknown_keys_are_refused() -> None:
    assert edit(MINIMAL, site__name="renamed") == MINIMAL
    with pytest.raises(ValueError, match="crawl.timeout"):
        edit(MINIMAL, crawl__timeout="3")


# --- apply_form: errors name the field ----------------------------------------------------


@pytest.mark.parametrize(("values", "key", "message"), [
    ({"crawl.workers": "abc"}, "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found 'abc' (a string)"),
    ({"crawl.workers": "2.5"}, "crawl.workers",
     "[crawl] workers: expected an integer from 1 to 1,000, found 2.5 (a float)"),
    ({"scope.max_pages": ""}, "scope.max_pages",
     "[scope] max_pages: expected a number, found an empty field"),
    ({"schedule.every": "daily 25:00"}, "schedule.every",
     "[schedule] every: invalid schedule 'daily 25:00': the hour must be 0-23, found 25"),
    ({"retention.keep_daily": "-7"}, "retention.keep_daily",
     "[retention] keep_daily: expected an integer from 0 to 100,000, found -7 (an integer)"),
    ({"crawl.delay": "soon"}, "crawl.delay",
     "[crawl] delay: expected a number from 0 to 3600, found 'soon' (a string)"),
    ({"scope.include": "ok\n("}, "scope.include",
     "[scope] include[1]: invalid regular expression: "
     "missing ), unterminated subpattern at position 0"),
    ({"site.start_urls": "https://example.com/\nexample.org"}, "site.start_urls",
     "[site] start_urls[1]: expected an absolute http(s) URL such as 'https://example.com/', "
     "found 'example.org' (a string)"),
    ({"site.start_urls": " \n"}, "site.start_urls",
     "[site] start_urls: expected a non-empty array of URLs, found [] (an array)"),
    ({"scope.hosts": "https://cdn.example.com/"}, "scope.hosts",
     "[scope] hosts[0]: expected a host name such as 'cdn.example.com', "
     "found 'https://cdn.example.com/' (a string)"),
    ({"crawl.user_agent": " "}, "crawl.user_agent",
     "[crawl] user_agent: expected a non-empty string without control characters"
     " (a tab is allowed), found '' (a string)"),
    ({"crawl.headers": "Accept: text/html\nno colon here"}, "crawl.headers",
     "[crawl] headers: line 2: expected 'Name: value'"),
    ({"crawl.headers": "X-A: 1\nx-a: 2"}, "crawl.headers",
     "[crawl] headers: header 'x-a' is set twice (also as 'X-A'); header names ignore case"),
    ({"crawl.headers": "Bad Name: 1"}, "crawl.headers",
     "[crawl] headers: invalid header name 'Bad Name'; expected an HTTP token "
     "(letters, digits and !#$%&'*+-.^_`|~)"),
    ({"crawl.headers": "User-Agent: x"}, "crawl.headers",
     "[crawl] headers.User-Agent: set the User-Agent with [crawl] user_agent"),
])
def test_a_bad_value_names_its_field(values: dict[str, str], key: str, message: str) -> None:
    exc = error(HAND, values)
    assert (exc.key, str(exc)) == (key, f"site.toml: {message}")


def test_every_bad_field_is_reported_at_once() -> None:
    exc = error(HAND, {"site.start_urls": "blog.example.org", "crawl.workers": "0",
                       "scope.include": "(", "crawl.headers": "no colon",
                       "schedule.every": "sometimes", "crawl.delay": "2"})
    assert [e.key for e in exc.errors] == ["crawl.headers", "site.start_urls", "scope.include",
                                           "crawl.workers", "schedule.every"]
    assert exc.errors[-1].detail.startswith("[schedule] every: expected \"hourly\"")
    assert str(exc).count("site.toml: ") == 5


def test_a_problem_of_the_file_outside_the_form_is_reported_with_the_fields() -> None:
    exc = error(HAND + "[crawl]\n", {"crawl.workers": "0"})  # a table defined twice
    assert exc.key is None and "invalid TOML" in str(exc)
    exc = error(HAND.replace("timeout = 30.0", "timeout = 30.0\nworker = 3"),
                {"crawl.workers": "0"})
    assert [(e.key, e.hint) for e in exc.errors] == [
        ("crawl.worker", "did you mean 'workers'?"), ("crawl.workers", "")]


def test_schedule_and_retention_are_written_in_their_sections() -> None:
    text = HAND + "\n[hooks]\n# tell me\nafter = \"true\"\n"
    assert edit(text, schedule__every="", retention__keep_last="0") == text  # defaults
    new = edit(text, schedule__every="daily 03:15", retention__keep_daily="7")
    assert new == HAND + ('\n[schedule]\nevery = "daily 03:15"\n\n[hooks]\n# tell me\n'
                          'after = "true"\n\n[retention]\nkeep_daily = 7\n')
    config = parse_config(new, SITE)
    assert config.schedule.every is not None and config.schedule.every.text == "daily 03:15"
    assert config.retention.keep_daily == 7
    assert form_values(new)["schedule.every"] == "daily 03:15"
    assert edit(new, schedule__every="") == new.replace('every = "daily 03:15"', 'every = ""')


def test_number_fields_know_their_least_value() -> None:
    fields = {f.key: f for f in FORM_FIELDS}
    assert fields["crawl.workers"].minimum == 1 and fields["scope.max_pages"].minimum == 0
    assert fields["crawl.delay"].minimum == 0.0 and fields["retention.keep_last"].minimum == 0
    assert fields["crawl.user_agent"].minimum is None
    assert fields["crawl.workers"].maximum == 1000 and fields["crawl.delay"].maximum == 3600
    assert fields["crawl.user_agent"].maximum is None
    assert [fields["crawl.workers"].input_type(v) for v in ("16", "", "2.5", "many")] == [
        "number", "number", "number", "text"]
    assert fields["schedule.every"].input_type("7") == "text"


def test_a_file_that_is_not_toml() -> None:
    with pytest.raises(ConfigError) as info:
        form_values("[site\n")
    assert info.value.key is None and "line 1" in str(info.value)
    assert error("[site\n", {"crawl.workers": "2"}).key is None


# --- secret headers -----------------------------------------------------------------------

SECRET = "Bearer s3cr3t-t0ken"
WITH_SECRET = MINIMAL + f'\n[crawl.headers]\nAuthorization = "{SECRET}"\nAccept = "text/html"\n'


def test_secret_header_values_are_never_shown() -> None:
    values = form_values(WITH_SECRET)
    assert values["crawl.headers"] == f"Authorization: {REDACTED}\nAccept: text/html"
    assert SECRET not in repr(values)
    assert apply_form(WITH_SECRET, SITE, values) == WITH_SECRET
    exc = error(WITH_SECRET, {**values, "crawl.workers": "0"})
    assert SECRET not in str(exc)


def test_the_redacted_marker_keeps_the_saved_secret() -> None:
    new = edit(WITH_SECRET, crawl__headers=f"Accept: */*\nauthorization: {REDACTED}\nX-B: 1")
    assert new == MINIMAL + (f'\n[crawl.headers]\nAccept = "*/*"\nauthorization = "{SECRET}"\n'
                             'X-B = "1"\n')
    assert SECRET not in form_values(new)["crawl.headers"]
    new = edit(WITH_SECRET, crawl__headers="Authorization: Basic bmV3")
    assert parse_config(new, SITE).crawl.headers == (("Authorization", "Basic bmV3"),)
    assert edit(WITH_SECRET, crawl__headers="") == MINIMAL + "\n[crawl.headers]\n"


def test_the_redacted_marker_needs_a_saved_secret() -> None:
    exc = error(MINIMAL, {"crawl.headers": f"Cookie: {REDACTED}"})
    assert (exc.key, str(exc)) == ("crawl.headers", "site.toml: [crawl] headers.Cookie: there is "
                                   f"no saved value to keep; type the value in place of {REDACTED}")


def test_headers_written_inline_stay_inline() -> None:
    text = MINIMAL + '[crawl]\nheaders = { Cookie = "a=1" }\n'
    assert edit(text, crawl__headers=f"Cookie: {REDACTED}\nX-Y: 2") == MINIMAL + (
        '[crawl]\nheaders = {Cookie = "a=1", X-Y = "2"}\n')


# --- the property: what the form sends is what it shows next --------------------------------

_LINE = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
                min_size=1, max_size=12).filter(lambda s: s.strip() == s)
_HOST = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8})?\.(com|org|example)", fullmatch=True)
_REGEX = st.one_of(st.sampled_from([r"^https://a\.com/", "/it's/", r"it's\d", r"\d+\?x=", "é/ü"]),
                   st.from_regex(r"[a-z/]{1,6}", fullmatch=True))
_TOKEN = st.from_regex(r"X-[A-Za-z0-9]{1,8}", fullmatch=True)


def _lines(items: st.SearchStrategy[str], min_size: int = 0) -> st.SearchStrategy[str]:
    return st.lists(items, min_size=min_size, max_size=3).map("\n".join)


def _headers(pairs: list[tuple[str, str]]) -> str:
    unique = {name.lower(): (name, value) for name, value in pairs}
    return "\n".join(f"{name}: {value}" for name, value in unique.values())


_VALUES = st.fixed_dictionaries({
    "site.start_urls": _lines(_HOST.map(lambda h: f"https://{h}/"), min_size=1),
    "scope.hosts": _lines(_HOST),
    "scope.include": _lines(_REGEX),
    "scope.exclude": _lines(_REGEX),
    "scope.max_depth": st.integers(0, 99).map(str),
    "scope.max_pages": st.integers(0, 10**9).map(str),
    "crawl.workers": st.integers(1, 64).map(str),
    "crawl.per_host": st.integers(1, 64).map(str),
    "crawl.delay": st.floats(0, 3600, allow_nan=False, allow_infinity=False).map(str),
    "crawl.user_agent": _LINE,
    "crawl.headers": st.lists(st.tuples(_TOKEN, _LINE), max_size=3).map(_headers),
    "schedule.every": st.sampled_from(["", "hourly", "daily 03:15", "weekly sun 04:00",
                                       "30 2 * * 1-5"]),
    **{f"retention.keep_{rule}": st.integers(0, 99).map(str)
       for rule in ("last", "daily", "weekly", "monthly")},
})


@settings(max_examples=60, deadline=None)
@given(text=st.sampled_from([MINIMAL, HAND, new_site_text("https://example.com/")]),
       values=_VALUES)
def test_the_form_shows_what_it_sent(text: str, values: dict[str, str]) -> None:
    assert {f.key for f in FORM_FIELDS} == {*values, "site.name"}
    new = apply_form(text, SITE, values)
    assert form_values(new) == {**values, "site.name": form_values(text)["site.name"]}
    assert apply_form(new, SITE, values) == new


# --- write_site_file ----------------------------------------------------------------------


def test_write_site_file_replaces_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text("old")
    path.chmod(0o640)
    write_site_file(path, MINIMAL)
    assert path.read_text() == MINIMAL
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.toml"]


def test_write_site_file_new_file_and_symlink(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_site_file(tmp_path / "new.toml", "x = 1\r\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "new.toml").read_bytes() == b"x = 1\r\n"
    assert stat.S_IMODE((tmp_path / "new.toml").stat().st_mode) == 0o644
    (tmp_path / "link.toml").symlink_to("new.toml")
    write_site_file(tmp_path / "link.toml", MINIMAL)
    assert (tmp_path / "link.toml").is_symlink()
    assert (tmp_path / "new.toml").read_text() == MINIMAL


def test_write_site_file_leaves_no_temporary_file_on_failure(tmp_path: Path) -> None:
    (tmp_path / "a.toml").mkdir()  # os.replace cannot put a file over a folder
    with pytest.raises(OSError):
        write_site_file(tmp_path / "a.toml", MINIMAL)
    assert [p.name for p in tmp_path.iterdir()] == ["a.toml"]
