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
        "web.html", "web.http", "run.report", "run.health", "run.changes", "run.browsernotes",
        "explain", "model", "crawl.scope", "crawl.traprules", "crawl.software", "crawl.growth",
        "crawl.history", "crawl.discover",
        "crawl.politeness", "crawl.robots", "replay.textdiff", "replay.pages",
        "schedule.spec", "fleet.duetime", "archive.searchrank", "errors")
#: the layers (LAYOUT.md) and what each may import of mirror: packages, and top-level
#: modules; the top level (config, explain, ...) and `cli` may import anything but `cli`,
#: which only `cli` itself and `__main__` import
LAYERS = {
    "web": {"web", "model"},
    "archive": {"archive", "web", "model", "layout", "crashpoints"},
    # a run's state in SQL: the connection layer for both engines, the schema, the reading
    # and writing handles; above the on-disk formats (the worker folder's mark, the ranking)
    "manifest": {"manifest", "archive", "web", "model", "layout", "crashpoints"},
    # object storage: the S3 client, an archive read from a store, push and restore
    "store": {"store", "manifest", "archive", "layout"},
    # between runs: prune and retention, recovery after a crash, text index rebuilds
    "upkeep": {"upkeep", "manifest", "archive", "web", "model", "layout", "crashpoints"},
    # a Chromium-family browser over the DevTools protocol (pages built by scripts): below
    # crawl, which drives it; it knows nothing of the archive
    "browser": {"browser", "model"},
    "crawl": {"crawl", "manifest", "archive", "store", "upkeep", "web", "model", "layout",
              "crashpoints", "config", "launch", "browser"},
    "replay": {"replay", "manifest", "archive", "store", "web", "model", "layout", "webapp"},
    "verify": {"verify", "manifest", "archive", "store", "web", "model", "layout"},
    "demo": {"demo", "web", "webapp", "config"},
    # OS timers and what they show (the wait for a run still going and the hooks are the
    # run's: `config` imports `schedule.spec`, so nothing here imports `config`)
    "schedule": {"schedule", "manifest", "archive", "model", "layout", "launch"},
    # the life of a run: its turn, the runner (it drives crawl's Crawler), retention and the
    # store after it, hooks, its report and progress file (the report modules themselves
    # import nothing of crawl: test_the_run_report_reads_no_crawl_module)
    "run": {"run", "manifest", "archive", "store", "upkeep", "crawl", "model", "layout",
            "config", "schedule", "outputdir", "storecmds", "terminal", "browserconfig",
            "browser"},  # the report says whether a browser is found (browser.find)
    # the fleet (many sites on PostgreSQL + Procrastinate): registrations, the worker and
    # its jobs, which run `mirror run` as a child process; it restores and pushes archives
    # (store.sync) and reads a run's progress.json (run.progressfile)
    "fleet": {"fleet", "manifest", "archive", "store", "run", "model", "layout", "config",
              "schedule", "launch"},
    # the library app sits above everything but cli
    "app": {"app", "manifest", "archive", "web", "model", "layout", "config", "crawl", "replay",
            "verify", "webapp", "run", "explain", "crashpoints", "schedule", "fleet", "launch",
            "browserconfig"},
}
for _allowed in LAYERS.values():  # the exception tree (mirror.errors, over model): everyone's
    _allowed.add("errors")



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
    assert not transitive(module) & {"aiohttp", "sqlite3", "psycopg", "manifest.writer",
                                     "crawl.fetch"}


def test_only_fetch_imports_aiohttp_on_the_crawl_side() -> None:
    crawl_side = [m for m in modules() if m.startswith(("crawl.", "archive.", "web."))
                  or m in ("config", "model")]
    assert {m for m in crawl_side if "aiohttp" in imports(m)} == {"crawl.fetch"}


def test_only_the_manifest_runs_sql() -> None:
    """The manifest's modules talk to the database; manifest.writer and
    manifest.sharedrun through manifest.db, which speaks SQLite and PostgreSQL. Besides the
    manifest, one module keeps scratch tables of its process's own (never the manifest)."""
    assert {m for m in modules() if "sqlite3" in imports(m)} == {
        "manifest.db", "manifest.schema", "manifest.reader", "manifest.texts",
        "manifest.captures",  # sqlite3.Row: captures.all() reads rows by column name
        # a consistent copy of the manifest for an object store: SQLite's backup API, no SQL
        "store.snapshot",
        # temporary databases: an archive's captures and an export's plan in bounded memory
        "archive.scratch"}


#: modules outside manifest/ that send SQL: the fleet's own database (its registrations,
#: runs and workers beside Procrastinate's job tables), not a manifest. Half of it runs on
#: Procrastinate's async connector (tick, records), which manifest.db does not wrap; its
#: connection is manifest.db's (fleet.db.connect)
FLEET_SQL = {"fleet.db", "fleet.registry", "fleet.status", "fleet.commands", "fleet.tick",
             "fleet.records", "fleet.connector"}
#: scratch tables of a process's own, in temporary files: an archive's captures and an
#: export's plan in bounded memory, never the manifest
SCRATCH_SQL = {"archive.scratch"}


def _sql_calls(module: str) -> list[str]:
    """`x.execute(`, `x.executemany(`, `x.executescript(` calls in a module, by line."""
    tree = ast.parse(source(module).read_text(encoding="utf-8"))
    return [f"{module}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany", "executescript")]


def test_no_sql_outside_the_manifest() -> None:
    """SQL is sent by the manifest's package alone: the rest of mirror asks its parts (a
    new engine is a db adapter and the contract suite, tests/test_manifest_contract.py)."""
    outside = [m for m in modules() if not m.startswith("manifest.")
               and m not in FLEET_SQL | SCRATCH_SQL]
    assert [call for m in outside for call in _sql_calls(m)] == []
    assert _sql_calls("manifest.reader") and all(_sql_calls(m) for m in FLEET_SQL)  # control


def test_only_the_manifests_connection_imports_psycopg() -> None:
    """PostgreSQL: manifest.db alone on the archive, crawl, replay and verify side (the
    fleet's own modules talk to Procrastinate's tables), and only inside the function
    that opens a PostgreSQL manifest: the desktop install has no psycopg."""
    assert {m for m in modules() if "psycopg" in imports(m)
            and not m.startswith("fleet.")} == {"manifest.db"}
    top = ast.parse(source("manifest.db").read_text(encoding="utf-8")).body
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
    assert {"sqlite3", "aiohttp", "manifest.writer"} <= transitive("crawl.crawler")
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
    """obstore is imported by store.objstore alone (its errors are translated there), and
    there only inside functions; the crawler loads its uploads only when a store is set
    (tests/test_store_crawl.py checks a run without one loads neither)."""
    assert {m for m in modules() if "obstore" in imports(m)} == {"store.objstore"}
    assert "obstore" not in _top_level("store.objstore")
    assert not {"crawl.uploads", "store.sync", "store.objstore"} & _top_level(
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
    assert {m for m in modules() if "psycopg" in imports(m)} - {"manifest.db"} <= {
        m for m in modules() if m.startswith("fleet.")}
    for module in (m for m in modules() if m.startswith("fleet")):
        assert not _top_level(module) & {"psycopg", "procrastinate", "psycopg.rows"}, module
        assert not {i for i in imports(module) if i.startswith("crawl.")}, module


#: exception classes that are not below MirrorError (none: every error mirror raises says
#: its exit code)
NOT_YET_BELOW_MIRROR_ERROR: set[str] = set()


def exception_classes() -> Iterator[type[BaseException]]:
    """Every exception class defined in mirror (every module imported: the extras too)."""
    import importlib
    import inspect

    for module in modules():
        loaded = importlib.import_module(f"mirror.{module}")
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == loaded.__name__:
                yield cls


def test_every_exception_is_a_mirror_error_with_its_exit_code() -> None:
    """One exception tree (mirror.errors): each class says the exit code a command ends
    with when it reaches the command line."""
    from mirror.errors import MirrorError
    from mirror.model import ExitCode

    found = list(exception_classes())
    outside = {f"{c.__module__}.{c.__qualname__}" for c in found
               if not issubclass(c, MirrorError)}
    assert outside == NOT_YET_BELOW_MIRROR_ERROR
    assert len(found) > 40  # control: the scan does see mirror's exceptions
    for cls in found:
        if issubclass(cls, MirrorError):
            assert isinstance(cls.exit_code, ExitCode), cls


def test_record_type_facts_have_one_home() -> None:
    """The WARC record types are model.RecordType; which of them are captures, and the
    index's mime for a revisit, are each written once."""
    def assigns(module: str, name: str) -> bool:
        tree = ast.parse(source(module).read_text(encoding="utf-8"))
        return any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets) for n in tree.body)

    homes = {name: [m for m in modules() if assigns(m, name)]
             for name in ("CAPTURE_TYPES", "REVISIT_MIME")}
    assert homes == {"CAPTURE_TYPES": ["model"], "REVISIT_MIME": ["archive.index"]}


MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300

#: modules and classes over the limits: none (issue 34 split the last ones, the manifest's
#: reader, writer and schema); a room that grows past its limit is split, not listed here
NOT_YET_SPLIT: set[str] = set()


def sizes() -> dict[str, int]:
    """Lines of every module ('app.server') and of every class in it ('app.server.LibraryApp',
    its decorators and docstring included)."""
    out: dict[str, int] = {}
    for module in modules():
        text = source(module).read_text(encoding="utf-8")
        out[module] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out[f"{module}.{node.name}"] = (node.end_lineno or node.lineno) - first + 1
    return out


def test_no_module_over_500_lines_and_no_class_over_300() -> None:
    found, whole = sizes(), set(modules())
    over = {name for name, lines in found.items()
            if lines > (MAX_MODULE_LINES if name in whole else MAX_CLASS_LINES)}
    assert over == NOT_YET_SPLIT, {name: found.get(name) for name in over ^ NOT_YET_SPLIT}
    # control: the scan measures classes as well as modules
    assert 150 < found["app.server.LibraryApp"] <= MAX_CLASS_LINES
