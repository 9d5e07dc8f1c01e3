"""The library on the command line: `mirror add`, `mirror remove`, and `mirror status`
without a site file (every site of the library, as the app's home shows them)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mirror.cli.command import LIBRARY, Command
from mirror.errors import UsageError
from mirror.model import ExitCode
from mirror.terminal import printable

if TYPE_CHECKING:
    from mirror.app.library import SiteEntry
    from mirror.app.startpage import Look


class LibraryUsageError(UsageError):
    """A user mistake about the library (cli turns it into exit 2)."""


def _library_folder(args: argparse.Namespace) -> Path:
    from mirror.app.library import default_library

    given = getattr(args, "library", None)
    return given.expanduser() if given else default_library()


def shown(text: object) -> str:
    """Text for a terminal: control characters (an escape sequence in a site file or a
    page title) as \\xNN, so nothing printed can move the cursor or change colours."""
    return printable(text)


# --- add ------------------------------------------------------------------------------------

def cmd_add(args: argparse.Namespace) -> int:
    from mirror.app.newsite import Covered, NameTaken, SiteFileError, add_site
    library = _library_folder(args)
    try:
        path = add_site(library, args.url, args.name, overlap=args.overlap, look=_look)
    except NameTaken as exc:
        again = shlex.join(["mirror", "add", args.url.strip(), "--name", exc.suggestion])
        raise LibraryUsageError(f"{shown(exc)}:\n  {shown(again)}") from None
    except Covered as exc:
        raise LibraryUsageError(f"{shown(exc)}; or add it anyway with --overlap") from None
    except SiteFileError as exc:
        raise LibraryUsageError(shown(exc)) from None
    print(f"wrote {shown(path)}:")
    print(shown_lines(path.read_text(encoding="utf-8")), end="")
    print(f"next: mirror run {shown(path)}   (or open it in `mirror ui {shown(library)}`)")
    return ExitCode.OK


def _look(url: str) -> Look:
    """A look at the start page, said on stdout before the file is shown."""
    from mirror.app.startpage import look_now

    seen = look_now(url)
    if seen.problem:
        print(f"could not look at the start page ({shown(seen.problem)}): writing the "
              "generic site file")
    elif seen.found:
        print(f"the start page looks like {seen.found.software.name} "
              f"({shown(seen.found.evidence)})")
    return seen


def shown_lines(text: str) -> str:
    return "".join(shown(line) + "\n" for line in text.splitlines())


# --- remove -----------------------------------------------------------------------------------

def cmd_remove(args: argparse.Namespace) -> int:
    from mirror.app.library import Library
    from mirror.app.removal import RemovalError, find_site, plan, remove

    library = Library(_library_folder(args).resolve())
    try:
        removal = plan(library, find_site(library, args.name))
        if args.delete_archive and removal.keep_only:
            raise RemovalError(f"the archive is not deleted: {removal.keep_only}; nothing "
                               "was removed")
        if (args.delete_archive and removal.archive is not None and removal.archive.exists()
                and not args.yes and not _confirm(
                    f"delete the site {removal.entry.title!r} and its archive "
                    f"{removal.archive} ({removal.size_text} on disk)? [y/N] ")):
            print("nothing removed", file=sys.stderr)
            return ExitCode.USAGE
        lines = remove(removal, delete_archive=args.delete_archive)
    except RemovalError as exc:
        raise LibraryUsageError(shown(exc)) from None
    for line in lines:
        print(shown(line))
    return ExitCode.OK


def _confirm(question: str, answers: TextIO | None = None) -> bool:
    """Ask on stderr, read a line from stdin: yes only for y/yes (end of input: no)."""
    print(shown(question), end="", file=sys.stderr, flush=True)
    line = (answers or sys.stdin).readline()
    return line.strip().lower() in ("y", "yes")


# --- status of the whole library --------------------------------------------------------------

def cmd_status(args: argparse.Namespace) -> int:
    """Every site of the library: state, last run, pages, size on disk, next scheduled run
    (read by the functions the app's home page uses)."""
    from mirror.app.library import Library

    folder = Path(args.config).expanduser() if args.config else _library_folder(args)
    if not folder.is_dir():
        raise LibraryUsageError(f"{folder}: no library here (`mirror add URL` starts one; "
                                "`mirror status SITE.toml` shows one site)")
    entries = Library(folder).sites()
    if not entries:
        print(f"{shown(folder)}: no site files yet (`mirror add URL` writes one)")
        return ExitCode.OK
    rows = [status_row(e) for e in entries]
    print(f"library {shown(folder)}: {len(rows)} site{'s' if len(rows) != 1 else ''}")
    print(render_table(("site", "state", "last run", "pages", "on disk", "next run"), rows))
    return ExitCode.OK


def status_row(entry: SiteEntry) -> tuple[str, ...]:
    from datetime import datetime

    from mirror.app.status import Reports, schedule_view, site_status
    from mirror.app.views import ago, clock, exit_text
    from mirror.run.report import human_bytes

    if entry.config is None:
        return (entry.id, "broken", str(entry.error), "", "", "")
    status = site_status(entry.config.site.output_dir, Reports())
    state = status.state.value + (f" (pid {status.holder})" if status.holder else "")
    if status.live is not None:
        state += f": {status.live.done} done, {status.live.queued} queued"
    last = status.last
    last_text = status.error or ("" if last is None else (
        f"run {last.id}, {ago(last.finished_at or last.started_at)}, "
        f"{exit_text(last.exit_code)}".rstrip(", ")))
    view = schedule_view(entry.config.schedule.every, status, datetime.now().astimezone())
    next_text = "not scheduled" if view is None else f"{view.every}: {clock(view.next_run)}"
    return (entry.id, state, last_text, str(status.pages), human_bytes(status.disk_bytes),
            next_text)


def render_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell, numbers (pages, bytes) right-aligned; every
    cell shown() first. Pure."""
    cells = [tuple(shown(c) for c in row) for row in [head, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    right = {3, 4}
    return "\n".join(
        "  ".join(c.rjust(w) if i in right else c.ljust(w)
                  for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
        for row in cells)


# --- the declarations ---------------------------------------------------------------------------

def add_arguments(add: argparse.ArgumentParser) -> None:
    add.add_argument("url", help="the site's start URL, e.g. https://example.com/")
    add.add_argument("--library", metavar="DIR", type=Path,
                     help=LIBRARY)
    add.add_argument("--name", metavar="N",
                     help="the site's name: letters, digits, '_' and '-' (default: from the "
                          "URL's host and a port that is not the scheme's, e.g. example-com, "
                          "127-0-0-1-8081)")
    add.add_argument("--overlap", action="store_true",
                     help="add the site even though another site of the library already "
                          "crawls its start URL")


def remove_arguments(remove: argparse.ArgumentParser) -> None:
    remove.add_argument("name", help="the site: its file name without .toml, or its name")
    remove.add_argument("--library", metavar="DIR", type=Path,
                        help=LIBRARY)
    remove.add_argument("--delete-archive", action="store_true",
                        help="delete its archive folder too, after a confirmation naming "
                             "its size")
    remove.add_argument("--yes", action="store_true",
                        help="with --delete-archive: do not ask (for scripts)")


COMMANDS = (
    Command("add", "write a new site file for URL into the library", cmd_add, add_arguments,
            config=None),
    Command("remove", "remove a site from the library: its site file and its timer "
                      "(its archive is kept unless --delete-archive)", cmd_remove,
            remove_arguments, config=None),
)
