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
        "discover", "model", "politeness", "robots")


def imported_modules(path: Path, full: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name if full else a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module if full else node.module.split(".")[0])
    return names


def transitive_imports(module: str) -> set[str]:
    """Every module `mirror.<module>` loads, through the package's own modules too."""
    seen, todo, out = set(), [module], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in imported_modules(ROOT / "mirror" / f"{name}.py", full=True):
            if imported.startswith("mirror."):
                todo.append(imported.split(".")[1])
            elif imported != "mirror":
                out.add(imported.split(".")[0])
    return out | {f"mirror.{m}" for m in seen}


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_load_no_io_libraries(module: str) -> None:
    loaded = transitive_imports(module)
    assert not loaded & {"aiohttp", "sqlite3", "mirror.manifest", "mirror.fetch"}


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


def test_the_import_scan_sees_through_the_package() -> None:
    """Control for the purity test: the crawler does reach SQL and the network."""
    assert {"sqlite3", "aiohttp", "mirror.manifest"} <= transitive_imports("crawler")
