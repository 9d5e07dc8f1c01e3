"""Export formats as plug-ins. Each format is one module of this package holding `EXPORTER`,
an `Exporter`: its name, its destination flag, its options declared as data, and `write`.
`mirror export`'s arguments (mirror.cli.export) and the app's Export section
(mirror.app.exportforms) are built from `exporters()`, in the order of the modules' names;
`register` adds a format that lives elsewhere.

Loaded by every command (the parser is built whole): a format module imports what it writes
with inside `write`, not at its top."""

from __future__ import annotations

import functools
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from mirror.errors import UsageError
from mirror.model import WorkProgress

if TYPE_CHECKING:
    from mirror.replay.captures import CaptureIndex

#: what an exporter's `write` takes: progress(done, total), steps named by model.work_stage
Progress = WorkProgress


class ExportFailed(UsageError):
    """What the user can mend: an option's value, a destination that cannot be used, an
    archive with nothing to export. The command line exits 2 with it; the app's job fails
    with it."""


@dataclass(frozen=True)
class Option:
    """One setting of a format: `--NAME` on the command line, a field of the app's form.
    Several formats may take the same option (the same object, or an equal one)."""

    name: str
    #: the command line's help; "{formats}" stands for the flags of the formats taking it
    help: str
    label: str  # the app's field
    kind: type = str  # str: a value (empty: not given); bool: a flag
    metavar: str = "TEXT"
    #: what is wrong with a value given, or None
    check: Callable[[str], str | None] | None = field(default=None, compare=False)

    def problem(self, value: Any) -> str | None:
        return self.check(value) if self.check is not None and value else None


def _timestamp_problem(value: str) -> str | None:
    if value.isdigit() and len(value) <= 14:
        return None
    return "expected 1 to 14 digits (YYYYmmddHHMMSS)"


#: the options that more than one built-in format takes
AT = Option("at", "export the site as it was then (1-14 digits, YYYYmmddHHMMSS)",
            "As it was at", metavar="TIMESTAMP",
            check=_timestamp_problem)
FORCE = Option("force", "replace a file at {formats} that mirror did not write",
               "Replace a file mirror did not write", kind=bool)


@dataclass(frozen=True)
class Settings:
    """What a format is told besides the archive and the destination."""

    site: str  # the site's name
    start_urls: tuple[str, ...]
    values: Mapping[str, Any] = field(default_factory=dict)  # option name → value given

    def get(self, name: str) -> Any:
        """The option's value, None (or False) when not given."""
        return self.values.get(name) or None


class Result(Protocol):
    def summary(self) -> str:
        """One line: what was written, where, and how to open it."""
        ...


class Exporter(ABC):
    """One export format."""

    name: ClassVar[str]  # in the app's form ("kind") and the job's label
    shown: ClassVar[str]  # "WACZ": in the app's button and job
    flag: ClassVar[str]  # `--FLAG DEST` chooses the format on the command line
    metavar: ClassVar[str] = "FILE"
    help: ClassVar[str]  # of the flag
    label: ClassVar[str]  # the app's destination field
    suffix: ClassVar[str] = ""  # the app's default destination: exports/<site><suffix>
    options: ClassVar[tuple[Option, ...]] = ()
    #: why it takes no such option, said when one is given with this format alone
    declines: ClassVar[Mapping[str, str]] = {}

    @abstractmethod
    def write(self, archive: CaptureIndex, dest: Path, settings: Settings,
              progress: Progress | None = None) -> Result:
        """Write the archive at `dest`; ExportFailed for what the user can mend."""


_registered: list[Exporter] = []


@functools.cache
def _builtin() -> tuple[Exporter, ...]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    # __import__, not importlib.import_module: -X importtime (tests/test_startup.py) sees it
    return tuple(__import__(f"{__name__}.{name}", fromlist=["EXPORTER"]).EXPORTER
                 for name in names)


def exporters() -> tuple[Exporter, ...]:
    """Every format: this package's, then those registered."""
    return (*_builtin(), *_registered)


def register(exporter: Exporter) -> None:
    """Add a format living outside this package (before the parser or the app is built)."""
    problem = clash(exporter, exporters())
    if problem:
        raise ValueError(f"cannot register the {exporter.name} exporter: {problem}")
    _registered.append(exporter)


def unregister(exporter: Exporter) -> None:
    _registered.remove(exporter)


def clash(new: Exporter, known: tuple[Exporter, ...]) -> str | None:
    """Why `new` cannot stand beside `known` (a name or flag taken, an option declared
    otherwise), or None."""
    declared = options_of(known)
    flags = {e.flag for e in known} | set(declared) | {"config", "from-store", "help"}
    if new.name in {e.name for e in known} or new.flag in flags:
        return f"the name {new.name!r} or the flag --{new.flag} is taken"
    for option in new.options:
        if option.name in flags - set(declared):
            return f"its option --{option.name} is a flag already"
        if option.name in declared and declared[option.name][0] != option:
            return f"its option --{option.name} differs from the one declared before"
    return None


def options_of(known: tuple[Exporter, ...]) -> dict[str, tuple[Option, list[Exporter]]]:
    """Every option once, in the order formats declare them, with the formats taking it."""
    found: dict[str, tuple[Option, list[Exporter]]] = {}
    for exporter in known:
        for option in exporter.options:
            found.setdefault(option.name, (option, []))[1].append(exporter)
    return found


def either(items: list[str]) -> str:
    """'a', 'a or b', 'a, b or c': the formats, or their flags, in a message."""
    return " or ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def by_name(name: str) -> Exporter | None:
    return next((e for e in exporters() if e.name == name), None)
