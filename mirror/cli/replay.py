"""`mirror serve`: a replay server on 127.0.0.1, or read-only on the LAN."""

from __future__ import annotations

import argparse
from pathlib import Path

from mirror.cli.command import ADDRESS, FROM_STORE, SHARED_DB, Command, serving
from mirror.errors import UsageError


def serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--from-store", action="store_true", help=FROM_STORE)
    serve.add_argument("--db", metavar="DSN", help=SHARED_DB)
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


COMMANDS = (
    Command("serve", "browse the archive offline: a replay server on 127.0.0.1", cmd_serve,
            serve_arguments, config=ADDRESS),
)
