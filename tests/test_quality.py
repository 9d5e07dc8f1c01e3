"""Code quality gates that run with the tests: the layers and their import directions, no
import cycles, ruff and mypy."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mirror"
#: modules that decide without I/O: no aiohttp, no SQL, no network client, however deep
PURE = ("web.urls", "web.extract", "web.css", "web.codings", "web.rewrite", "web.charset",
        "web.html", "web.http", "run.report", "run.health", "run.changes",
        "explain", "model", "crawl.scope", "crawl.traprules", "crawl.software", "crawl.growth",
        "crawl.history", "crawl.discover",
        "crawl.politeness", "crawl.robots", "replay.textdiff", "replay.pages",
        "schedule.spec", "fleet.duetime", "archive.searchrank")
#: the layers (LAYOUT.md) and what each may import of mirror: packages, and top-level
#: modules; the top level (config, explain, ...) and `cli` may import anything but `cli`,
#: which only `cli` itself and `__main__` import
LAYERS = {
    "web": {"web", "model"},
    "archive": {"archive", "web", "model", "layout", "crashpoints"},
    "crawl": {"crawl", "archive", "web", "model", "layout", "crashpoints", "config", "launch"},
    "replay": {"replay", "archive", "web", "model", "layout", "webapp"},
    "verify": {"verify", "archive", "web", "model", "layout"},
    "demo": {"demo", "web", "webapp", "config"},
    # OS timers and what they show (the wait for a run still going and the hooks are the
    # run's: `config` imports `schedule.spec`, so nothing here imports `config`)
    "schedule": {"schedule", "archive", "model", "layout", "launch"},
    # the life of a run: its turn, the runner (it drives crawl's Crawler), retention and the
    # store after it, hooks, its report and progress file (the report modules themselves
    # import nothing of crawl: test_the_run_report_reads_no_crawl_module)
    "run": {"run", "archive", "crawl", "model", "layout", "config", "schedule",
            "outputdir", "storecmds", "terminal"},
    # the fleet (many sites on PostgreSQL + Procrastinate): registrations, the worker and
    # its jobs, which run `mirror run` as a child process; it restores and pushes archives
    # (archive.storesync) and reads a run's progress.json (run.progressfile)
    "fleet": {"fleet", "archive", "run", "model", "layout", "config", "schedule", "launch"},
    # the library app sits above everything but cli
    "app": {"app", "archive", "web", "model", "layout", "config", "crawl", "replay", "verify",
            "webapp", "run", "explain", "crashpoints", "schedule", "fleet", "launch"},
}


def modules() -> Iterator[str]:
    """Every module of the package, dotted below `mirror` ('crawl.crawler', 'cli')."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            yield ".".join(parts)


def source(module: str) -> Path:
    path = PACKAGE.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imports(module: str) -> set[str]:
    """What a module imports, type-only and function-local imports included: mirror's own
    modules dotted below `mirror` (an imported name that is a module counts as one), other
    libraries by their top-level name."""
    out: set[str] = set()
    known = set(modules())
    for node in ast.walk(ast.parse(source(module).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                name = a.name.removeprefix("mirror.")
                out.add(name if a.name.startswith("mirror.") else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "mirror" or node.module.startswith("mirror."):
                base = node.module.removeprefix("mirror").removeprefix(".")
                subs = {f"{base}.{a.name}".lstrip(".") for a in node.names}
                out |= (subs & known) or ({base} if base else set())
            else:
                out.add(node.module.split(".")[0])
    return out - {""}


def transitive(module: str) -> set[str]:
    """Every module and library `mirror.<module>` loads, through mirror's own modules."""
    own = set(modules())
    seen, todo, libraries = set(), [module], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in imports(name):
            (todo.append if imported in own else libraries.add)(imported)
    return libraries | seen


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_load_no_io_libraries(module: str) -> None:
    assert not transitive(module) & {"aiohttp", "sqlite3", "psycopg", "archive.manifest",
                                     "crawl.fetch"}


def test_only_fetch_imports_aiohttp_on_the_crawl_side() -> None:
    crawl_side = [m for m in modules() if m.startswith(("crawl.", "archive.", "web."))
                  or m in ("config", "model")]
    assert {m for m in crawl_side if "aiohttp" in imports(m)} == {"crawl.fetch"}


def test_only_the_manifest_runs_sql() -> None:
    """The manifest's modules talk to the database; archive.manifest and
    archive.manifest_fleet through archive.sqldb, which speaks SQLite and PostgreSQL."""
    assert {m for m in modules() if "sqlite3" in imports(m)} == {
        "archive.sqldb", "archive.manifest_schema", "archive.manifest_queries",
        "archive.manifest_text",
        # a consistent copy of the manifest for an object store: SQLite's backup API, no SQL
        "archive.snapshot"}


def test_only_the_manifests_connection_imports_psycopg() -> None:
    """PostgreSQL: archive.sqldb alone on the archive, crawl, replay and verify side (the
    fleet's own modules talk to Procrastinate's tables), and only inside the function
    that opens a PostgreSQL manifest: the desktop install has no psycopg."""
    assert {m for m in modules() if "psycopg" in imports(m)
            and not m.startswith("fleet.")} == {"archive.sqldb"}
    top = ast.parse(source("archive.sqldb").read_text(encoding="utf-8")).body
    assert not any(isinstance(n, ast.Import | ast.ImportFrom) and "psycopg" in ast.dump(n)
                   for n in top)


def test_layers_import_only_downwards() -> None:
    wrong = []
    for module in modules():
        layer = module.split(".")[0] if "." in module else None
        for imported in imports(module) & set(modules()):
            target = imported.split(".")[0]
            if (target == "cli" and layer != "cli" and module != "__main__") or (
                    layer and layer != "cli" and target not in LAYERS[layer]):
                wrong.append(f"{module} -> {imported}")
    assert wrong == []


def test_the_run_report_reads_no_crawl_module() -> None:
    """The report, its numbers and what changed between runs are the read side of a run:
    they import nothing from the write side (crawl/)."""
    report = [m for m in modules() if m in ("run.report", "run.runreport", "run.changes",
                                            "run.health")]
    assert len(report) == 4
    assert {f"{m} -> {i}" for m in report for i in imports(m) if i.startswith("crawl")} == set()


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over mirror's own imports (type-only and
    function-local ones included): every component is a single module."""
    graph = {m: sorted(imports(m) & set(modules()) - {m}) for m in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                cycles.append(sorted([node, *component]))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []


def test_the_import_scan_sees_through_the_package() -> None:
    """Control for the rules above: the crawler does reach SQL and the network, and a
    package's imports are seen whichever way they are spelled."""
    assert {"sqlite3", "aiohttp", "archive.manifest"} <= transitive("crawl.crawler")
    assert "archive.index" in imports("cli.upkeep")  # `from mirror.archive import index`
    assert "web.http" in imports("crawl.discover")  # `from mirror.web.http import ...`


@pytest.mark.parametrize("tool", [["ruff", "check", "mirror", "tests", "bench"],
                                  ["mypy", "mirror"]], ids=["ruff", "mypy"])
def test_linters_are_clean(tool: list[str]) -> None:
    exe = Path(sys.executable).parent / tool[0]
    if not exe.exists() and shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} not installed (pip install -e '.[test,dev]')")
    cmd = [str(exe) if exe.exists() else tool[0], *tool[1:]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_only_objstore_talks_to_object_storage() -> None:
    """obstore is imported by archive.objstore alone (its errors are translated there), and
    there only inside functions; the crawler loads its uploads only when a store is set
    (tests/test_store_crawl.py checks a run without one loads neither)."""
    assert {m for m in modules() if "obstore" in imports(m)} == {"archive.objstore"}
    assert "obstore" not in _top_level("archive.objstore")
    assert not {"crawl.uploads", "archive.storesync", "archive.objstore"} & _top_level(
        "crawl.crawler")


def _top_level(module: str) -> set[str]:
    """What `module` imports at its top level (not inside functions nor TYPE_CHECKING)."""
    out: set[str] = set()
    for node in ast.parse(source(module).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            out |= {a.name.removeprefix("mirror.") for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.removeprefix("mirror."))
    return out


def test_the_fleet_loads_postgresql_only_when_used() -> None:
    """psycopg and procrastinate (the fleet extra) are imported by the fleet's modules
    alone, and there only inside functions (or for type checking): `mirror` without the
    extra starts, and its fleet commands say what to install (tests/test_fleet_cli.py).
    The fleet imports nothing of the crawl (a run's progress.json is run.progressfile's)."""
    users = {m for m in modules() if "procrastinate" in imports(m)}
    assert users and {m.split(".")[0] for m in users} == {"fleet"}, users
    # psycopg: the fleet, and the PostgreSQL manifest's connection (the test above)
    assert {m for m in modules() if "psycopg" in imports(m)} - {"archive.sqldb"} <= {
        m for m in modules() if m.startswith("fleet.")}
    for module in (m for m in modules() if m.startswith("fleet")):
        assert not _top_level(module) & {"psycopg", "procrastinate", "psycopg.rows"}, module
        assert not {i for i in imports(module) if i.startswith("crawl.")}, module
