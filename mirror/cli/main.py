"""`mirror`: the parser, built from the registry, and the one place where errors become
exit codes and messages.

Start-up cost: `mirror CMD` imports only the module declaring CMD (cli/registry.py), and
that module imports what CMD runs inside its functions; asyncio, rich, warcio and aiohttp
load only in the commands that use them (tests/test_startup.py keeps it so)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mirror import __version__
from mirror.cli import command as commands
from mirror.cli.command import Command
from mirror.cli.registry import COMMANDS, command, module_commands

#: what names `--help` before the command (argparse takes a long option's prefix)
_HELP = ("-h", "--h", "--he", "--hel", "--help")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of `mirror`. Given the command line, only the command it names gets its
    arguments (only its module is imported); else, and for `mirror --help`, every one."""
    p = argparse.ArgumentParser(
        prog="mirror", description="Archive a website into WARC files and browse it offline."
    )
    p.add_argument("--version", action="version", version=f"mirror {__version__}")
    p.add_argument("--traceback", action="store_true", help="show the full stack on errors")
    # prog given: argparse would build a help formatter (and import shutil) to find it
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="mirror")
    only = None if argv is None else named(argv)
    if only is not None:  # a command line naming a command: the others play no part
        declared: tuple[Command, ...] = (command(only),)
    else:  # the overall --help, and an unknown or missing command (its error lists all)
        declared = tuple(c for m in dict.fromkeys(COMMANDS.values())
                         for c in module_commands(m))
    for one in sorted(declared, key=lambda c: list(COMMANDS).index(c.name)):
        one.declare(sub.add_parser(one.name, help=one.help, description=one.help))
    return p


def named(argv: Sequence[str]) -> str | None:
    """The command the command line names, None when it names none or asks for the
    overall --help (mirror's own options take no value: the first word is the command)."""
    for arg in argv:
        if arg in _HELP:
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return command(args.command).run(args)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - mapped to an exit code
        return exit_code(exc, show_traceback=args.traceback)


def exit_code(exc: BaseException, *, show_traceback: bool) -> int:
    """The one place where an error becomes an exit code, said on stderr: a MirrorError
    carries its own (mirror.errors: a user's mistake 2, an archive another process holds 75,
    ...), ^C is 130, anything else is a bug, 1. Called in the `except` block (the traceback
    is the one being handled)."""
    import os

    from mirror.errors import exit_code_of
    from mirror.model import ExitCode
    from mirror.terminal import say

    code = exit_code_of(exc)
    if code is not ExitCode.INTERNAL:
        for line in exc.lines():  # type: ignore[attr-defined]  # a MirrorError's words
            say(f"mirror: {line}", file=sys.stderr)
        return code
    if isinstance(exc, KeyboardInterrupt):
        print("mirror: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    if isinstance(exc, BrokenPipeError):  # `mirror search ... | head`: the reader has what
        devnull = os.open(os.devnull, os.O_WRONLY)  # it wanted
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return ExitCode.OK
    # the one place internal errors become exit 1
    if show_traceback:
        import traceback

        traceback.print_exc()
    else:
        say(f"mirror: internal error: {type(exc).__name__}: {exc} "
            "(run with --traceback for details)", file=sys.stderr)
    return ExitCode.INTERNAL


def main_entry() -> None:
    commands.OWN_PROCESS = True
    sys.exit(main())
