"""New site files: a name from the URL, a commented file of the defaults, and adding it to
a library (refused when the name is taken or another site's scope covers the URL)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import tomlkit

from mirror.errors import UsageError

if TYPE_CHECKING:
    from mirror.app.startpage import Look

from mirror.app.sitefile import apply_form, declared_name, toml_string
from mirror.config import CrawlSection, ScopeSection, parse_config
from mirror.crawl.software import site_file_comment
from mirror.web.urls import InvalidURL, host_of, site_key


class SiteFileError(UsageError):
    """A site file that cannot be added; str(exc) names the file and what to do."""


class NameTaken(SiteFileError):
    """Another site of the library has the name; `suggestion` is a free one."""

    def __init__(self, message: str, suggestion: str) -> None:
        super().__init__(message)
        self.suggestion = suggestion


class Covered(SiteFileError):
    """Another site of the library already crawls the start URL; `site` is its id."""

    def __init__(self, message: str, site: str) -> None:
        super().__init__(message)
        self.site = site



def site_name(url: str) -> str:
    """A name from the URL's host and port, valid for [site] name and as a site id:
    "https://www.Example.com/" -> "example-com" (punycode for other scripts),
    "http://127.0.0.1:8081/" -> "127-0-0-1-8081" (a scheme's default port is left out);
    "site" when the URL has no host."""
    try:
        key = site_key(url.strip())
    except InvalidURL:
        key = ""
    host = host_of(url.strip())
    port = key[len(host):].lstrip(":") if key.startswith(host) else ""
    named = "-".join(p for p in (host.removeprefix("www.").strip("[]"), port) if p)
    return re.sub(r"[^a-z0-9-]+", "-", named).strip("-") or "site"


_TEMPLATE = """\
# A site for mirror. `mirror check` this file to see every setting with its value;
# the README's configuration reference explains them all.

[site]
# Names the archive's WARC files: letters, digits, "_" and "-".
name = {name}
# Where the crawl starts: absolute http(s) URLs.
start_urls = {start_urls}
# The archive folder, relative to this file's folder. Default: "archive/<name>".
{output_dir}

[scope]
# More hosts to crawl as part of the site, e.g. ["docs.example.com", "cdn.example.com"];
# the start URLs' hosts always are, and images, CSS and scripts come from any host.
hosts = []
# Regular expressions; if any are given, a page URL must match one of them.
# include = [{include}]
# A URL matching any of these regular expressions is never fetched.
# exclude = ['/logout', '[?&]sort=']
# Most links followed from a start URL (0: the start URLs only).
max_depth = {max_depth}
{software}
[crawl]
# Requests in flight at once: over all hosts, and to one host.
workers = {workers}
per_host = {per_host}
# Seconds between two requests to one host; raise it to go easy on a small server.
delay = {delay}
# The User-Agent header; sites appreciate a way to reach you, for example:
# user_agent = "{user_agent} (+mailto:you@example.com)"
"""


def new_site_text(url: str, name: str | None = None, output_dir: str | None = None,
                  seen: Look | None = None) -> str:
    """A commented site file for `url`; ConfigError (key "site.start_urls", "site.name")
    for a bad URL or name. Without output_dir the archive goes to "archive/<name>" beside
    the file, the config default, and the key is shown commented out. `seen`: what a look
    at the start page recognised, written as comments in [scope] (None: not looked)."""
    name = site_name(url) if name is None else name
    return _site_text(url, name, output_dir, Path(f"{name}.toml"), seen)


def _site_text(url: str, name: str, output_dir: str | None, path: Path,
               seen: Look | None = None) -> str:
    url = url.strip()
    parse_config(f"[site]\nname = {_toml(name)}\nstart_urls = {_toml([url])}\n", path)
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()
    scope, crawl = ScopeSection(), CrawlSection()
    text = _TEMPLATE.format(
        name=_toml(name), start_urls=_toml([url]),
        output_dir=(f"output_dir = {_toml(output_dir)}" if output_dir is not None
                    else f"# output_dir = {_toml(f'archive/{name}')}"),
        include=toml_string(f"^{re.escape(origin)}/blog/").as_string(),
        max_depth=scope.max_depth, workers=crawl.workers, per_host=crawl.per_host,
        delay=_toml(crawl.delay), user_agent=crawl.user_agent,
        software="" if seen is None else "\n".join(
            site_file_comment(seen.found, seen.problem)) + "\n")
    parse_config(text, path)
    return text


def _toml(value: object) -> str:
    return tomlkit.item(value).as_string()


def add_site(library: Path, url: str, name: str | None = None,
             values: dict[str, str] | None = None, *, overlap: bool = False,
             look: Callable[[str], Look] | None = None) -> Path:
    """Write `<library>/<name>.toml` for `url`, with the settings form's `values` applied
    and, once the file is known to be valid and free, what `look` (startpage.look_now)
    recognised at the start page as comments; return its path. ConfigError (its key naming
    the field) for a bad URL, name or value, Covered when another site's scope crawls `url`
    (unless `overlap`), NameTaken when the name is taken, SiteFileError when the file cannot
    be written."""
    name = site_name(url) if name is None else name
    path = library / f"{name}.toml"
    text = _site_text(url, name, None, path)  # validates the name before it makes a path
    if values:
        text = apply_form(text, path, values)
    if not overlap:
        _refuse_covered(library, url)
    taken = _taken_names(library)
    if name.casefold() in taken:
        suggestion = free_name(name, set(taken))
        raise NameTaken(f"{taken[name.casefold()]}: a site named {name!r} is in the library "
                        f"already; choose another name, e.g. {suggestion}", suggestion)
    if look is not None:
        text = _site_text(url, name, None, path, look(url.strip()))
        text = apply_form(text, path, values) if values else text
    try:
        library.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if isinstance(exc, FileExistsError) and exc.filename == str(path):
            suggestion = free_name(name, set(_taken_names(library)))
            raise NameTaken(f"{path}: a site file of that name exists already; choose "
                            f"another name, e.g. {suggestion}", suggestion) from None
        raise SiteFileError(f"{exc.filename or path}: cannot write: {exc.strerror or exc}") \
            from exc
    return path


def _taken_names(library: Path) -> dict[str, Path]:
    """The library's site names and file names, casefolded, with the file of each."""
    taken: dict[str, Path] = {}
    for other in sorted(library.glob("*.toml")):
        taken.setdefault(other.stem.casefold(), other)
        if declared := _declared_name(other):
            taken.setdefault(declared.casefold(), other)
    return taken


def free_name(name: str, taken: set[str]) -> str:
    """`name-2`, `name-3`, ...: the first whose casefold is not in `taken`."""
    return next(f"{name}-{n}" for n in range(2, len(taken) + 3)
                if f"{name}-{n}".casefold() not in taken)


def _refuse_covered(library: Path, url: str) -> None:
    from mirror.app.library import Library
    from mirror.app.overlap import covering

    entries = Library(library).sites()
    site = covering(url, [(e.id, e.config) for e in entries if e.config is not None])
    if site is not None:
        raise Covered(f"{url.strip()}: the site {site!r} ({library / f'{site}.toml'}) covers "
                      "this URL already (its scope crawls it); open that site, or narrow its "
                      "scope ([scope] include, exclude) first", site)


def _declared_name(path: Path) -> str:
    try:
        return declared_name(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError):
        return ""
