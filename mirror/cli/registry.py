"""Every command of `mirror`, in the order `mirror --help` lists them, and the module of
mirror.cli that declares it (its arguments and its function). `mirror CMD` imports that
module only; `mirror --help` imports them all, for their one-line helps."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirror.cli.command import Command

COMMANDS = {
    "ui": "app", "add": "library", "remove": "library", "check": "check", "run": "run",
    "schedule": "schedule", "worker": "schedule", "index": "upkeep", "search": "search",
    "status": "runs", "verify": "verify", "push": "store", "restore": "store",
    "prune": "upkeep", "explain": "check", "runs": "runs", "diff": "runs", "serve": "replay",
    "export": "export", "demo": "app",
}


def module_commands(module: str) -> tuple[Command, ...]:
    """The commands mirror.cli.<module> declares (its COMMANDS)."""
    declared: tuple[Command, ...] = importlib.import_module(f"mirror.cli.{module}").COMMANDS
    return declared


def command(name: str) -> Command:
    """The declaration of `mirror NAME` (KeyError: no such command)."""
    return next(c for c in module_commands(COMMANDS[name]) if c.name == name)
