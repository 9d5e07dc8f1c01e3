"""The command line's one registry (mirror/cli/registry.py): each command declared once, by
the module the registry names, with its arguments and its function; `mirror --help` lists
every command with its help; the declaring modules stay cheap to import."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

from mirror.cli.main import build_parser, main, named
from mirror.cli.registry import COMMANDS, command, module_commands

CLI = Path(__file__).resolve().parent.parent / "mirror" / "cli"
#: what a module declaring commands may import at its top: the standard library's light
#: modules, the declarations, and what every command prints with
LIGHT = {"__future__", "argparse", "os", "sys", "time", "pathlib", "typing", "importlib",
         "collections.abc", "contextlib", "mirror", "mirror.cli", "mirror.cli.command",
         "mirror.cli.registry", "mirror.model", "mirror.errors", "mirror.terminal", "shlex",
         # the export command's arguments are the exporters' registry (about 4 ms: the
         # registry imports each format's writer only when it writes)
         "mirror.replay.exporters"}


def test_each_command_is_declared_once_by_the_module_the_registry_names() -> None:
    declared: dict[str, str] = {}
    for module in sorted(set(COMMANDS.values())):
        for one in module_commands(module):
            assert one.name not in declared, (one.name, module, declared.get(one.name))
            declared[one.name] = module
    assert declared == COMMANDS
    assert {p.stem for p in CLI.glob("*.py")} - set(COMMANDS.values()) == {
        "__init__", "main", "registry", "command",
        "bar"}  # the progress bar export and verify show (imported when they run)


def help_of(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == 0
    return out.getvalue()


def test_the_overall_help_lists_every_command_with_its_help() -> None:
    text = " ".join(help_of("--help").split())
    listed = re.findall(r"^    ([a-z][a-z-]*) ", help_of("--help"), re.M)
    assert listed == list(COMMANDS)  # the registry's order
    for name in COMMANDS:
        assert f"{name} {' '.join(command(name).help.split())}" in text, name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_has_its_help(name: str) -> None:
    text = help_of(name, "--help")
    assert text.startswith(f"usage: mirror {name} ")
    assert " ".join(command(name).help.split()) in " ".join(text.split())


def test_a_command_line_builds_its_own_command_only() -> None:
    assert named(["--traceback", "status", "x.toml"]) == "status"
    assert named(["--he", "status"]) is None and named(["nosuch"]) is None
    full, one = build_parser(), build_parser(["verify", "site.toml"])
    assert full.parse_args(["verify", "site.toml", "--db", "postgresql://x/y"]).db
    assert one.parse_args(["verify", "site.toml", "--db", "postgresql://x/y"]).db
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        one.parse_args(["run", "site.toml", "--quiet"])  # `run` has no arguments here


@pytest.mark.parametrize("module", sorted(set(COMMANDS.values()) | {"main", "registry",
                                                                      "command"}))
def test_declaring_modules_import_only_light_modules_at_their_top(module: str) -> None:
    tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module)
    assert top <= LIGHT, top - LIGHT
