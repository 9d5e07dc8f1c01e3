"""`mirror serve` (a replay server on 127.0.0.1, or read-only on the LAN) and `mirror
export` (a folder that opens from file://, a WACZ, a ZIM)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mirror.cli.command import ADDRESS, FROM_STORE, Command, UsageError, serving
from mirror.model import ExitCode


def serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--from-store", action="store_true", help=FROM_STORE)
    serve.add_argument("--host", help="address to bind (127.0.0.1; with --lan: instead of the "
                                      "LAN address)")
    serve.add_argument("--lan", action="store_true",
                       help="serve read-only on the local network, for a phone: bind this "
                            "machine's LAN address, print the address with a token and its QR "
                            "code; only browsers that opened it get in")
    serve.add_argument("--port", type=int, default=8080, help="port to bind (8080; 0: any)")


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.layout import ArchiveLayout
    from mirror.replay.serve import Site, serve_forever
    from mirror.storecmds import reading

    source = reading(args)  # the site file's folder, or a store (--from-store, s3://...)
    if isinstance(source.where, Path) and not ArchiveLayout(source.where).warc.is_dir():
        raise UsageError(f"{source.where}: no archive (has `mirror run` run yet?)")
    site = Site(source.name, source.ignore_query, source.start_urls)
    host, lan = serving(args, "the archive")
    try:
        return asyncio.run(serve_forever(source.where, site, host=host, port=args.port,
                                         lan=lan))
    except OSError as exc:  # the port is taken, the address is not ours
        where = host if args.port is None else f"{host}:{args.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    finally:
        source.close()


def export_arguments(export: argparse.ArgumentParser) -> None:
    export.add_argument("--from-store", action="store_true", help=FROM_STORE)
    export.add_argument("--to", metavar="DIR", type=Path, help="folder to write")
    export.add_argument("--at", metavar="TIMESTAMP",
                        help="export the site as it was then (1-14 digits, YYYYmmddHHMMSS)")
    export.add_argument("--wacz", metavar="FILE", type=Path, help="WACZ file to write")
    export.add_argument("--force", action="store_true",
                        help="replace a file at --wacz/--zim that mirror did not write")
    export.add_argument("--zim", metavar="FILE", type=Path,
                        help="ZIM file to write, for Kiwix readers (needs mirror[zim])")
    for name, what in (("title", "its title (default: the main page's, cut at 30 characters)"),
                       ("description", "its description (default: the main page's meta "
                                       "description, cut at 80 characters)"),
                       ("language", "the language of its pages and its search, e.g. en, fra, "
                                    "pt-BR (default: the main page's lang, else English)"),
                       ("publisher", "who made the file (default: mirror)")):
        export.add_argument(f"--{name}", metavar="TEXT", help=f"with --zim: {what}")


def cmd_export(args: argparse.Namespace) -> int:
    from mirror.archive.damage import tally
    from mirror.replay.captures import CaptureIndex
    from mirror.replay.destination import DestinationError
    from mirror.storecmds import reading

    _check_export_args(args)
    source = reading(args)  # the site file's folder, or a store (--from-store, s3://...)
    try:
        with tally() as damaged:
            archive = CaptureIndex.load(source.where, source.ignore_query)
            code = _export(args, source, archive)
    except DestinationError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        source.close()
    if damaged.count:  # written, without what could not be read
        print(f"mirror: damaged places left out, above: {damaged.count}", file=sys.stderr)
        return ExitCode.DAMAGED
    return code


def _export(args: argparse.Namespace, source: Any, archive: Any) -> int:
    from mirror.replay.export import ExportError, export_folder
    from mirror.replay.wacz import write_wacz

    if not archive.captures:
        raise UsageError(f"{source.label}: no captures to export")
    if args.to:
        try:
            done = export_folder(archive, args.to, args.at)
        except ExportError as exc:
            raise UsageError(str(exc)) from exc
        print(f"exported {done.files} files ({done.pages} pages, {done.redirects} redirects) "
              f"in {done.seconds:.1f}s: open {args.to / 'index.html'}")
    if args.wacz:
        packed = write_wacz(archive, args.wacz, title=source.name,
                            start_urls=source.start_urls, force=args.force)
        print(f"wrote {packed.path} ({packed.warc_files} WARC files, {packed.captures} "
              f"captures, {packed.pages} pages, {packed.bytes:,} bytes)")
    if args.zim:
        from mirror.replay.zim import ZimError, summary, write_zim

        try:
            written = write_zim(archive, args.zim, site_name=source.name,
                                start_urls=source.start_urls, at=args.at, title=args.title,
                                description=args.description, language=args.language,
                                publisher=args.publisher, force=args.force)
        except ZimError as exc:
            raise UsageError(str(exc)) from exc
        print(f"{summary(written)} in {written.seconds:.1f}s")
    return ExitCode.OK


def _check_export_args(args: argparse.Namespace) -> None:
    if not (args.to or args.wacz or args.zim):
        raise UsageError("export needs --to DIR, --wacz FILE or --zim FILE "
                         "(--at TIMESTAMP with --to or --zim)")
    if args.at and not (args.to or args.zim):
        raise UsageError("--at goes with --to DIR or --zim FILE (a WACZ holds every run)")
    if args.at and not (args.at.isdigit() and len(args.at) <= 14):
        raise UsageError(f"--at {args.at!r}: expected 1 to 14 digits (YYYYmmddHHMMSS)")
    given = [n for n in ("title", "description", "language", "publisher") if getattr(args, n)]
    if given and not args.zim:
        raise UsageError(f"--{given[0]} goes with --zim FILE")



COMMANDS = (
    Command("serve", "browse the archive offline: a replay server on 127.0.0.1", cmd_serve,
            serve_arguments, config=ADDRESS),
    Command("export", "write the archive as a folder that opens from file://, or a WACZ",
            cmd_export, export_arguments, config=ADDRESS),
)
