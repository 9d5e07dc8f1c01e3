"""The README and docs/ARCHITECTURE.md stay true: every config key is in its reference table,
every command listed; every package and module named in the architecture, its layer table
the quality test's."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from mirror.cli.registry import COMMANDS
from mirror.config import SiteConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def config_keys() -> set[str]:
    cfg = load_config(ROOT / "config" / "minimal.toml")
    return {f"[{section.name}] {key.name}"
            for section in fields(SiteConfig) if section.name != "path"
            for key in fields(getattr(cfg, section.name))}


def test_every_config_key_has_a_row_in_the_readme_table() -> None:
    rows = set(re.findall(r"^\| `(\[\w+\] \w+)` \|", README, re.M))
    assert rows == config_keys()


def test_every_config_key_is_in_the_example_file() -> None:
    example = (ROOT / "config" / "example.toml").read_text(encoding="utf-8")
    for key in config_keys():
        name = key.split("] ")[1]
        assert re.search(rf"^#? ?{name} = ", example, re.M), key


def test_every_command_is_in_the_readme() -> None:
    for command in COMMANDS:
        assert re.search(rf"^mirror {command}\b", README, re.M), command


def test_the_readme_exit_code_table_is_exit_code() -> None:
    """README's table has a row for each ExitCode, and only those, each starting with the
    code's meaning (the words the app, the fleet and `mirror list` show)."""
    from mirror.model import ExitCode

    section = README.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M))
    assert sorted(map(int, rows)) == sorted(ExitCode)
    for code in ExitCode:
        assert rows[str(int(code))].startswith(code.meaning), code


ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_the_architecture_names_every_package_and_top_level_module() -> None:
    """docs/ARCHITECTURE.md names each package as `pkg/` (`replay/exporters/`) and each
    top-level module as `name.py`: a new one is described there too."""
    package = ROOT / "mirror"
    packages = {f"`{init.parent.relative_to(package).as_posix()}/`"
                for init in package.rglob("__init__.py") if init.parent != package}
    top = {f"`{path.name}`" for path in package.glob("*.py")}
    assert len(packages) > 10 and "`__main__.py`" in top  # control: the scan sees them
    assert sorted(n for n in packages | top if n not in ARCHITECTURE) == []


def test_the_architectures_layer_table_is_the_quality_tests() -> None:
    """Each layer of tests/test_quality.py's LAYERS has its row in the layer table, listing
    what it may import (besides itself and `errors`), and no other layer has one."""
    from tests.test_quality import LAYERS

    section = ARCHITECTURE.split("\n### Layers\n", 1)[1].split("\n### ", 1)[0]
    rows = {layer: set(filter(None, re.split(r",\s*", allowed.strip())))
            for layer, allowed in re.findall(r"^\| `(\w+)` \| ([^|]*) \|$", section, re.M)}
    assert rows == {layer: allowed - {layer, "errors"} for layer, allowed in LAYERS.items()}
