"""Code quality gates that run with the tests: architecture boundaries, ruff and mypy."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE = ("urls", "scope", "extract", "css", "codings", "report", "rewrite", "history", "explain",
        "politeness", "robots")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io_libraries(module: str) -> None:
    assert not imported_modules(ROOT / "mirror" / f"{module}.py") & {"aiohttp", "sqlite3"}


def test_only_fetch_imports_aiohttp_on_the_crawl_side() -> None:
    crawl_side = set(PURE) | {"archive", "manifest", "frontier", "index", "crawler", "config"}
    users = {m for m in crawl_side if "aiohttp" in imported_modules(ROOT / "mirror" / f"{m}.py")}
    assert users == set()
    assert "aiohttp" in imported_modules(ROOT / "mirror" / "fetch.py")


def test_only_manifest_runs_sql() -> None:
    users = {p.stem for p in (ROOT / "mirror").glob("*.py") if "sqlite3" in imported_modules(p)}
    assert users == {"manifest"}


@pytest.mark.parametrize("tool", [["ruff", "check", "mirror", "tests", "bench"],
                                  ["mypy", "mirror"]], ids=["ruff", "mypy"])
def test_linters_are_clean(tool: list[str]) -> None:
    exe = Path(sys.executable).parent / tool[0]
    if not exe.exists() and shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} not installed (pip install -e '.[test]')")
    cmd = [str(exe) if exe.exists() else tool[0], *tool[1:]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
