"""mirror's exception tree: every exception mirror defines derives from `MirrorError`, which
carries the exit code a command ends with when the exception reaches the command line (the
one map from an error to an exit code: `exc.exit_code`, its words `exc.exit_code.meaning`).

Classes that callers also catch as a builtin (ValueError, ...) keep it as a second base.
Those that never reach the command line (caught where they happen: a fetch that failed, a
record that cannot be read) keep the default, INTERNAL: what the command line made of them
if one escaped. Pure: imported from every layer, so it imports nothing but `model`.
"""

from __future__ import annotations

from typing import ClassVar

from mirror.model import ExitCode


class MirrorError(Exception):
    """Something mirror says went wrong; `exit_code` is what a command then ends with."""

    exit_code: ClassVar[ExitCode] = ExitCode.INTERNAL

    def lines(self) -> list[str]:
        """What the command line prints of it, one line each (after "mirror: ")."""
        return [str(self)]


class UsageError(MirrorError):
    """A user mistake outside the site file (a bad path, argument or address): exit 2."""

    exit_code = ExitCode.USAGE


class LockedError(MirrorError):
    """Another process holds what this one needs (the archive's lock, the wait for it)."""

    exit_code = ExitCode.LOCKED


class Interrupted(MirrorError):
    """The run was told to stop (SIGINT/SIGTERM): the next one resumes it."""

    exit_code = ExitCode.INTERRUPTED


def exit_code_of(exc: BaseException) -> ExitCode:
    """The exit code a command ends with when `exc` reaches the command line."""
    return exc.exit_code if isinstance(exc, MirrorError) else ExitCode.INTERNAL
