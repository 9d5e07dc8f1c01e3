"""`mirror ui` (the library app) and `mirror demo` (the bundled site, mirrored into the
library)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mirror.cli import command as commands
from mirror.cli.command import LIBRARY, LIBRARY_DEFAULT, Command, fleet_db, serving
from mirror.errors import UsageError


def ui_arguments(ui: argparse.ArgumentParser) -> None:
    ui.add_argument("library", nargs="?", type=Path,
                    help=f"a folder of site files (default: {LIBRARY_DEFAULT})")
    ui.add_argument("--host",
                    help="address to bind (127.0.0.1; another one requires the printed token "
                         "from other machines too; with --lan: instead of the LAN address)")
    ui.add_argument("--lan", action="store_true",
                    help="read-only on the local network, for a phone: bind this machine's "
                         "LAN address, print the address with a token and its QR code; no "
                         "run, stop, verify, export or edit (no browser opened here)")
    ui.add_argument("--port", type=int,
                    help="port to bind (default: the last start's when free, else a free one)")
    ui.add_argument("--no-browser", action="store_true", help="do not open a browser")
    ui.add_argument("--db", metavar="DSN",
                    help="also show the fleet of this PostgreSQL database (its workers, runs "
                         "and queue; default: $MIRROR_DB; needs mirror[fleet])")


def cmd_ui(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.app.library import default_library
    from mirror.app.ui import serve_library

    folder = (args.library or default_library()).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: not a folder (a library is a folder of site files)")
    host, lan = serving(args, "the library and its archives")
    db = fleet_db(args.db, needed=False)
    try:
        return asyncio.run(serve_library(folder, host=host, port=args.port,
                                         open_browser=not args.no_browser,
                                         say=lambda text: print(text, flush=True), lan=lan,
                                         db=db))
    except OSError as exc:  # the port is taken, the address is not ours
        where = host if args.port is None else f"{host}:{args.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc


def demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("dir", nargs="?", type=Path,
                      help=LIBRARY)
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.app.library import default_library
    from mirror.demo import SITE_FILE, run_demo
    from mirror.run.runner import crawl_async

    folder = (args.dir or default_library()).expanduser().resolve()
    code = asyncio.run(run_demo(folder, lambda cfg: crawl_async(
        cfg, quiet=args.quiet, verbose=False, settle_gc=commands.OWN_PROCESS)))
    print(f"archive: {folder / 'archive' / 'demo'}")
    print(f"browse it offline: mirror serve {folder / SITE_FILE}")
    print(f"see it in the library: mirror ui{f' {folder}' if args.dir else ''}")
    return code


COMMANDS = (
    Command("ui", "the library app: every site, its runs and reports, in the browser",
            cmd_ui, ui_arguments, config=None),
    Command("demo", "serve the bundled demo site on 127.0.0.1 and mirror it into the "
                    "library (demo.toml, archive/demo)", cmd_demo, demo_arguments,
            config=None),
)
