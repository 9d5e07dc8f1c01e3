"""`mirror push` and `mirror restore`: an archive and its [archive] store (mirror.storecmds)."""

from __future__ import annotations

import argparse

from mirror.cli.command import Command


def push_arguments(push: argparse.ArgumentParser) -> None:
    push.add_argument("--force", action="store_true",
                      help="replace a snapshot in the store that another archive folder made")
    push.add_argument("--db", metavar="DSN",
                      help="the folder is a worker's of a run shared through this PostgreSQL "
                           "database (`mirror run --db`): upload that worker's files the "
                           "database says are not uploaded")


def restore_arguments(restore: argparse.ArgumentParser) -> None:
    restore.add_argument("--force", action="store_true",
                         help="replace the folder's manifest when it has one (its WARC files "
                              "the snapshot does not name are moved aside)")


def cmd_push(args: argparse.Namespace) -> int:
    from mirror.storecmds import cmd_push as push

    return push(args)


def cmd_restore(args: argparse.Namespace) -> int:
    from mirror.storecmds import cmd_restore as restore

    return restore(args)


COMMANDS = (
    Command("push", "upload to the [archive] store what it lacks: closed WARC files, the "
                    "index, a manifest snapshot", cmd_push, push_arguments),
    Command("restore", "rebuild the site's archive folder from its [archive] store's "
                       "latest snapshot", cmd_restore, restore_arguments),
)
