"""`mirror export`: its arguments and its run, both made from the exporters' registry
(mirror.replay.exporters); a format's flag, options and checks come with its module, so a
new format is one new module there and nothing here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mirror.cli.command import ADDRESS, FROM_STORE, SHARED_DB, Command
from mirror.model import ExitCode
from mirror.replay.exporters import (
    Exporter,
    ExportFailed,
    Option,
    Settings,
    either,
    exporters,
    options_of,
)


def export_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the archive is read from, then each format's flag and options."""
    parser.add_argument("--from-store", action="store_true", help=FROM_STORE)
    parser.add_argument("--db", metavar="DSN", help=SHARED_DB)
    add_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Each format's `--FLAG DEST`, each followed by those of its options not added yet."""
    known = exporters()
    takers = {name: owners for name, (_, owners) in options_of(known).items()}
    added: set[str] = set()
    for exporter in known:
        parser.add_argument(f"--{exporter.flag}", metavar=exporter.metavar, type=Path,
                            help=exporter.help)
        for option in exporter.options:
            if option.name not in added:
                added.add(option.name)
                _add_option(parser, option, takers[option.name])


def _add_option(parser: argparse.ArgumentParser, option: Option, owners: list[Exporter]) -> None:
    flags = [f"--{e.flag}" for e in owners]
    text = option.help.replace("{formats}", "/".join(flags))
    text = f"with {flags[0]}: {text}" if len(owners) == 1 else text
    if option.kind is bool:
        parser.add_argument(f"--{option.name}", action="store_true", help=text)
    else:
        parser.add_argument(f"--{option.name}", metavar=option.metavar, help=text)


def _dest(exporter: Exporter) -> str:
    return f"--{exporter.flag} {exporter.metavar}"


def chosen(args: argparse.Namespace) -> list[Exporter]:
    return [e for e in exporters() if getattr(args, e.flag, None)]


def check_args(args: argparse.Namespace) -> None:
    """A format is chosen; each option given goes with a format chosen and has a good value
    (a flag given alone changes nothing, and is let be)."""
    known, picked = exporters(), chosen(args)
    declared = options_of(known)
    if not picked:
        shared = [f"--{o.name} {o.metavar} with {either([f'--{e.flag}' for e in owners])}"
                  for o, owners in declared.values() if o.kind is not bool and len(owners) > 1]
        extra = f" ({'; '.join(shared)})" if shared else ""
        raise ExportFailed(f"export needs {either([_dest(e) for e in known])}{extra}")
    for option, owners in declared.values():
        value = getattr(args, option.name)
        if not value:
            continue
        if option.kind is not bool and not set(map(id, owners)) & set(map(id, picked)):
            notes = [e.declines[option.name] for e in picked if option.name in e.declines]
            why = f" ({'; '.join(notes)})" if notes else ""
            raise ExportFailed(f"--{option.name} goes with "
                               f"{either([_dest(e) for e in owners])}{why}")
        if problem := option.problem(value):
            raise ExportFailed(f"--{option.name} {value!r}: {problem}")


def values(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in options_of(exporters())}


def cmd_export(args: argparse.Namespace) -> int:
    from mirror.archive.damage import tally
    from mirror.storecmds import reading

    check_args(args)
    source = reading(args)  # the site file's folder, or a store (--from-store, s3://...)
    try:
        with tally() as damaged:
            for line in _export(source, args):
                print(line)
    finally:
        source.close()
    if damaged.count:  # written, without what could not be read
        print(f"mirror: damaged places left out, above: {damaged.count}", file=sys.stderr)
        return ExitCode.DAMAGED
    return ExitCode.OK


def _export(source: Any, args: argparse.Namespace) -> list[str]:
    """Each chosen format's export, with a progress bar on a terminal; their summaries."""
    from mirror.cli.bar import Bar
    from mirror.replay.captures import CaptureIndex

    done = []
    with Bar("export") as bar:
        bar.stage("reading the index")
        archive = CaptureIndex.load(source.where, source.ignore_query)
        if not archive.captures:
            raise ExportFailed(f"{source.label}: no captures to export")
        settings = Settings(source.name, source.start_urls, values(args))
        for exporter in chosen(args):
            bar.what = f"export --{exporter.flag}"
            done.append(exporter.write(archive, getattr(args, exporter.flag), settings,
                                       bar).summary())
    return done


COMMANDS = (
    Command("export", "write the archive as a folder that opens from file://, or a WACZ",
            cmd_export, export_arguments, config=ADDRESS),
)
