"""Site files a library's users add and edit: new ones, the settings form, atomic writes."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Comment, Item, String, Table, Whitespace
from tomlkit.toml_document import TOMLDocument

from mirror.archive.fsutil import atomic_write_text
from mirror.config import (
    SECTION_NAMES,
    ConfigError,
    CrawlSection,
    RetentionSection,
    ScheduleSection,
    ScopeSection,
    SiteSection,
    config_error,
    maximum_of,
    minimum_of,
    parse_config,
)
from mirror.web.http import REDACTED, SECRET_HEADERS

Kind = Literal["lines", "int", "float", "headers", "text"]
_SECTIONS: dict[str, type] = {"site": SiteSection, "scope": ScopeSection, "crawl": CrawlSection,
                              "schedule": ScheduleSection, "retention": RetentionSection}
_ORDER = SECTION_NAMES  # where config.py checks them, and shows them


@dataclass(frozen=True)
class FormField:
    """One field of the app's settings form."""

    key: str  # "section.key", as in ConfigError.key
    label: str
    help: str
    kind: Kind  # lines: one item per line; headers: one "Name: value" per line
    readonly: bool = False  # shown, never written by apply_form

    @property
    def minimum(self) -> float | None:
        """The least value a number field takes (its input's min), if that value is allowed."""
        least = minimum_of(self.key) if self.kind in ("int", "float") else None
        if least is None or not least[1]:
            return None
        return int(least[0]) if self.kind == "int" else least[0]

    @property
    def maximum(self) -> float | None:
        """The greatest value a number field takes (its input's max)."""
        most = maximum_of(self.key) if self.kind in ("int", "float") else None
        return int(most) if most is not None and self.kind == "int" else most

    def input_type(self, value: str) -> str:
        """"number" for a number field, unless it holds a text a number input would drop."""
        if self.kind not in ("int", "float"):
            return "text"
        try:
            float(value or "0")
        except ValueError:
            return "text"
        return "number"


FORM_FIELDS: tuple[FormField, ...] = (
    FormField("site.name", "Name", "Names the archive's files; chosen when the site was added.",
              "text", readonly=True),
    FormField("site.start_urls", "Start URLs",
              "Where the crawl starts: one absolute http(s) URL per line.", "lines"),
    FormField("scope.hosts", "Other hosts",
              "More hosts whose pages are crawled, one per line (docs.example.com). The start "
              "URLs' hosts always are; images, CSS and scripts come from any host.", "lines"),
    FormField("scope.include", "Only URLs matching",
              "Regular expressions, one per line; if any, a page URL must match one.", "lines"),
    FormField("scope.exclude", "Never URLs matching",
              "Regular expressions, one per line; a matching URL is never fetched.", "lines"),
    FormField("scope.max_depth", "Link depth",
              "Most links followed from a start URL; 0: the start URLs only.", "int"),
    FormField("scope.max_pages", "Pages per run", "Most pages crawled per run; 0: no limit.",
              "int"),
    FormField("crawl.workers", "Parallel requests", "Requests in flight at once, all hosts.",
              "int"),
    FormField("crawl.per_host", "Parallel requests per host",
              "Requests in flight at once to one host.", "int"),
    FormField("crawl.delay", "Delay (seconds)",
              "Seconds between the starts of two requests to one host.", "float"),
    FormField("crawl.user_agent", "User-Agent",
              "Sent with every request; sites appreciate a way to reach you.", "text"),
    FormField("crawl.headers", "Extra request headers",
              f"One 'Name: value' per line. Secret values (Authorization, Cookie) are never "
              f"shown: leave {REDACTED} to keep the saved one.", "headers"),
    FormField("schedule.every", "Schedule",
              'When scheduled runs start, on this computer\'s clock: "hourly", "daily 03:15", '
              '"weekly sun 04:00" or a cron expression ("30 2 * * 1-5"); empty: none. Saving '
              "changes the file; Apply on the site's page (or mirror schedule apply) installs the "
              "timer.", "text"),
    FormField("retention.keep_last", "Keep the last runs",
              "mirror prune (and each scheduled run) keeps the N newest runs; 0: this rule "
              "is off. With all four keep rules at 0 every run is kept.", "int"),
    FormField("retention.keep_daily", "Keep daily runs",
              "The last run of each of the N newest days that have runs; 0: off.", "int"),
    FormField("retention.keep_weekly", "Keep weekly runs",
              "The last run of each of the N newest weeks; 0: off.", "int"),
    FormField("retention.keep_monthly", "Keep monthly runs",
              "The last run of each of the N newest months; 0: off.", "int"),
)
_FIELDS = {f.key: f for f in FORM_FIELDS}


def declared_name(text: str) -> str:
    """The [site] name a site file's text declares; "" when it declares none it can read."""
    try:
        name = tomllib.loads(text.removeprefix("\ufeff"))["site"]["name"]
    except (tomllib.TOMLDecodeError, RecursionError, KeyError, TypeError):
        return ""
    return name if isinstance(name, str) else ""


# --- the settings form ----------------------------------------------------------------------


def form_values(text: str, path: Path | None = None) -> dict[str, str]:
    """What the form shows for each of FORM_FIELDS: the file's values (defaults for absent
    keys) as strings, secret header values as REDACTED. ConfigError if text is not TOML."""
    raw = _load(text, path or Path("site.toml"))
    return {f.key: _show(f.kind, _current(raw, f.key), redact=True) for f in FORM_FIELDS}


def apply_form(text: str, path: Path, values: dict[str, str]) -> str:
    """The site file `text` with the form's values set: comments, order and other keys kept,
    keys whose value did not change left alone (an absent key stays absent), read-only
    fields ignored. Raises ConfigError, its .errors each naming its field, if the
    result is invalid."""
    text = text.removeprefix("\ufeff")
    raw = _load(text, path)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(path, None, f"cannot edit: {exc}") from exc
    if unknown := set(values) - set(_FIELDS):
        raise ValueError(f"not in FORM_FIELDS: {', '.join(sorted(unknown))}")
    errors: list[ConfigError] = []
    for field in FORM_FIELDS:
        if field.key in values and not field.readonly:
            current = _current(raw, field.key)
            try:
                new = _convert(field, values[field.key], current, path)
            except ConfigError as exc:  # the other fields are still checked
                errors.append(exc)
                continue
            if not _same(new, current):
                _set(doc, field.key, new, text, path)
    new_text = tomlkit.dumps(doc)
    if "\r\n" in text:  # the lines tomlkit added end as the file's do
        new_text = re.sub(r"(?<!\r)\n", "\r\n", new_text)
    unread = {error.key for error in errors}  # their own message says it better
    errors += [error for error in problems(new_text, path) if error.key not in unread]
    if errors:
        raise config_error(errors)
    return new_text


def problems(text: str, path: Path) -> list[ConfigError]:
    """Every problem of a site file's text, as `mirror check` finds them; [] for none."""
    try:
        parse_config(text.removeprefix("\ufeff"), path)
    except ConfigError as exc:
        return exc.errors
    return []


def _load(text: str, path: Path) -> dict[str, Any]:
    text = text.removeprefix("\ufeff")  # as load_config reads it
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        parse_config(text, path)  # raises the ConfigError with line and column
        raise


def _current(raw: dict[str, Any], key: str) -> Any:
    """The raw TOML value of `key`, or its default in the same shape; None if required."""
    section, name = key.split(".")
    table = raw.get(section)
    if isinstance(table, dict) and name in table:
        return table[name]
    default = next(f.default for f in fields(_SECTIONS[section]) if f.name == name)
    if default is MISSING:
        return None
    if default is None:  # [schedule] every: "" is none in the file
        return ""
    if isinstance(default, tuple):
        return dict(default) if _FIELDS[key].kind == "headers" else list(default)
    return default


def _show(kind: Kind, value: Any, *, redact: bool) -> str:
    if value is None:
        return ""
    if kind == "headers" and isinstance(value, dict):
        return "\n".join(f"{n}: {REDACTED if redact and n.lower() in SECRET_HEADERS else v}"
                         for n, v in value.items())
    if kind == "lines" and isinstance(value, list):
        return "\n".join(map(str, value))
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return str(float(value))  # `delay = 2` shows as the form writes it: 2.0
    return str(value)


def _convert(field: FormField, typed: str, current: Any, path: Path) -> Any:
    """The form string as a TOML value; a string parse_config will reject when it does not
    read as the field's kind, so that the message is config.py's own."""
    text = typed.strip()
    section, name = field.key.split(".")
    if field.kind in ("int", "float") and not text:
        raise ConfigError(path, field.key, f"[{section}] {name}: expected a number, found an "
                          "empty field")
    if field.kind == "lines":
        return [line.strip() for line in typed.splitlines() if line.strip()]
    if field.kind in ("int", "float"):  # "2.5" for an int: "found 2.5 (a float)"
        numbers: tuple[type[float], ...] = (int, float) if field.kind == "int" else (float,)
        for number in numbers:
            try:
                return number(text)
            except ValueError:
                pass
    if field.kind != "headers":
        return text
    saved = {n.lower(): v for n, v in current.items()} if isinstance(current, dict) else {}
    headers: dict[str, str] = {}
    for row, line in enumerate(typed.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = (part.strip() for part in line.partition(":"))
        if not colon:
            raise ConfigError(path, field.key, f"[crawl] headers: line {row}: expected "
                              "'Name: value'")
        if (same := [n for n in headers if n.lower() == name.lower()]):
            raise ConfigError(path, field.key, f"[crawl] headers: header {name!r} is set "
                              f"twice (also as {same[0]!r}); header names ignore case")
        if value == REDACTED and name.lower() in SECRET_HEADERS:
            if name.lower() not in saved:
                raise ConfigError(path, field.key, f"[crawl] headers.{name}: there is no saved "
                                  f"value to keep; type the value in place of {REDACTED}")
            value = saved[name.lower()]
        headers[name] = value
    return headers


def _same(new: Any, old: Any) -> bool:
    if isinstance(new, float) and isinstance(old, int) and not isinstance(old, bool):
        old = float(old)  # `delay = 2` stays as written
    if isinstance(new, dict) and isinstance(old, dict):
        return list(new.items()) == list(old.items())
    return type(new) is type(old) and bool(new == old)


def toml_string(text: str) -> String:
    """A literal 'string' when that spares backslashes (regular expressions), else "basic"."""
    return tomlkit.string(text, literal="\\" in text and "'" not in text and text.isprintable())


def _item(name: str, value: Any, old: object) -> Item:
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(toml_string(s) for s in value)
        return array.multiline(len(name) + len(array.as_string()) > 90)
    if isinstance(value, dict):
        table = tomlkit.table() if isinstance(old, Table) else tomlkit.inline_table()
        for header, text in value.items():
            table[header] = toml_string(text)
        return table
    return toml_string(value) if isinstance(value, str) else tomlkit.item(value)


def _set(doc: TOMLDocument, key: str, value: Any, text: str, path: Path) -> None:
    section, name = key.split(".")
    table = doc[section] if section in doc else _add_section(doc, section)
    if not isinstance(table, dict):
        parse_config(text, path)  # "[crawl]: expected a table, found ..."
        raise ConfigError(path, section, f"[{section}]: expected a table")
    item = _item(name, value, table.get(name))
    if name in table or not isinstance(table, Table) or table.is_super_table():
        table[name] = item
        return
    body = table.value.body
    # Under a commented-out example of the key ("# include = [...]"), else after the last
    # key: the comments at the end of a table are those of the next table's header.
    spot = next((i for i, (k, v) in enumerate(body) if isinstance(v, Comment)
                 and re.match(rf"#\s*{re.escape(name)}\s*=", v.as_string().strip())), None)
    if spot is None:
        spot = max((i for i, (k, v) in enumerate(body)
                    if k is not None and not isinstance(v, Table | AoT)), default=-1)
    if spot + 1 < len(body):
        table.value._insert_at(spot + 1, name, item)
    else:
        table.append(name, item)


def _add_section(doc: TOMLDocument, section: str) -> Table:
    """A new empty [section], placed in config.py's order: before the first later section
    present, taking along the comments just above that section's header."""
    table = tomlkit.table()
    later = _ORDER[_ORDER.index(section) + 1:]
    spot = next((i for i, (k, _) in enumerate(doc.body) if k is not None and k.key in later),
                None)
    if spot is None:  # at the end, after one blank line
        end = doc.as_string()
        if end and not end.endswith("\n\n"):
            table.trivia.indent = "\n" if end.endswith("\n") else "\n\n"
        doc.append(section, table)
        return table
    last, moved = doc.body[spot - 1][1] if spot else None, []
    if isinstance(last, Table):
        body = last.value.body
        last_key = max((i for i, (k, _) in enumerate(body) if k is not None), default=-1)
        first = next((i for i in range(last_key + 1, len(body))
                      if isinstance(body[i][1], Comment)), len(body))
        moved = [item for _, item in body[first:] if isinstance(item, Comment | Whitespace)]
        del body[first:]
        last = body[-1][1] if body else None
    if moved or "\n" not in doc.body[spot][1].trivia.indent:
        table.add(Whitespace("\n"))  # the blank line before the next section
    for item in moved:
        table.add(item)
    if spot and not (isinstance(last, Whitespace) and last.as_string().endswith("\n")):
        table.trivia.indent = "\n"
    doc._insert_at(spot, section, table)
    return table


# --- writing ------------------------------------------------------------------------------


def write_site_file(path: Path, text: str) -> None:
    """Replace the file (through a symlink) so that a reader sees the old text or the new,
    never a part; its mode is kept."""
    atomic_write_text(Path(os.path.realpath(path)), text, keep_mode=True)
