"""Start-up cost of the quick commands, kept without timing anything: `mirror check`,
`status` and `runs` load none of the heavy libraries (asyncio, the HTTP stack, rich, warcio,
OpenSSL) nor the crawler, which only `run`, `serve`, `ui` and the like need. The times are
measured by bench/startup.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config

ROOT = Path(__file__).resolve().parent.parent

#: what the quick commands must not import: libraries by top-level name, mirror's own
#: modules by their full name
HEAVY = frozenset({
    "asyncio", "ssl", "hashlib", "aiohttp", "yarl", "multidict", "idna", "rich", "lxml",
    "jinja2", "warcio",
    "mirror.crawl.crawler", "mirror.run.progress", "mirror.archive.index",
    "mirror.archive.warcwriter", "mirror.manifest.writer",
})


def loaded(*args: str) -> set[str]:
    """Every module a fresh `python -X importtime ARGS` imported (checked to exit 0), by
    full name and by top-level name."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and not line.endswith("imported package")}
    return names | {name.partition(".")[0] for name in names}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site file with an archive of one complete run (the bundled demo)."""
    folder = tmp_path_factory.mktemp("startup") / "demo"
    proc = subprocess.run([sys.executable, "-m", "mirror", "demo", str(folder), "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "demo.toml"


@pytest.mark.parametrize("command", ["check", "status", "runs"])
def test_quick_commands_load_no_heavy_module(site: Path, command: str) -> None:
    assert loaded("-m", "mirror", command, str(site)) & HEAVY == set()


@pytest.mark.parametrize(("command", "module"), [("check", "check"), ("status", "runs"),
                                               ("runs", "runs")])
def test_a_command_loads_only_its_own_module_of_the_command_line(site: Path, command: str,
                                                                  module: str) -> None:
    """The registry imports the module declaring the command, not the other commands'
    (importlib.import_module: -X importtime does not list it, sys.modules does)."""
    script = ("import sys; from mirror.cli.main import main; code = main(sys.argv[1:]); "
              "print(*sorted(m for m in sys.modules if m.startswith('mirror.cli.')), "
              "file=sys.stderr); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", script, command, str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.split() == sorted({"mirror.cli.main", "mirror.cli.registry",
                                          "mirror.cli.command", f"mirror.cli.{module}"})


def test_the_import_scan_sees_heavy_modules() -> None:
    """Control for the test above: what a crawl loads is seen, by either name."""
    seen = loaded("-c", "import mirror.crawl.crawler, mirror.run.progress")
    assert {"asyncio", "aiohttp", "rich", "warcio", "mirror.crawl.crawler",
            "mirror.archive.warcwriter"} <= seen


def test_index_keys_are_made_without_importing_requests() -> None:
    """surt imports tldextract (and it requests) at its top but never calls it for a key:
    a stand-in takes its place until an attribute is asked for, which imports it."""
    key = ("from mirror.archive.index import url_key; "
           "assert url_key('http://www.Example.com/a?b=2&a=1') == 'com,example)/a?a=1&b=2'")
    seen = loaded("-c", key)
    assert "surt" in seen and not {"requests", "tldextract.tldextract"} & seen
    later = loaded("-c", key + "; import sys; "
                   "assert sys.modules['surt.handyurl'].tldextract.TLDExtract.__name__ == "
                   "'TLDExtract'; assert 'requests' in sys.modules")
    assert {"requests", "tldextract.tldextract"} <= later


def test_a_parse_helper_loads_no_event_loop_and_no_http_stack() -> None:
    """A helper (python -m mirror.crawl.parsehelper) starts once per crawl and after each
    death: it parses and answers on a pipe, with lxml and none of the crawler's stack. It
    runs here to its end of input (no config: it exits at once)."""
    seen = loaded("-c", "import runpy, sys; sys.stdin = open('/dev/null'); "
                        "runpy.run_module('mirror.crawl.parsehelper', run_name='__main__')")
    assert "lxml" in seen and "mirror.crawl.discover" in seen
    assert not {"asyncio", "ssl", "aiohttp", "warcio", "mirror.crawl.parsepool"} & seen


def test_a_run_without_a_display_loads_no_display_library(tmp_path: Path,
                                                          site_in_thread) -> None:
    """A run that prints no progress display (--quiet, or no terminal: cron, systemd) does
    not load rich, the display's library (16 ms of every scheduled run's start-up)."""
    served = site_in_thread()
    served.page("/", '<a href="/a">a</a>')
    served.page("/a", "a")
    toml = write_config(tmp_path, [served.base])
    seen = loaded("-m", "mirror", "run", str(toml), "--quiet")
    assert "mirror.crawl.crawler" in seen and "rich" not in seen
    assert sorted(served.log) == ["/", "/a"]


def test_version_is_answered_without_loading_the_command_line() -> None:
    """`mirror --version`, by the console script's entry point as pyproject.toml names it:
    the version of the package, with none of the command line's modules loaded."""
    import tomllib

    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["mirror"]
    module, _, function = entry.partition(":")
    script = (f"import sys; sys.argv[1:] = ['--version']; from {module} import {function}; "
              f"{function}()")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (proc.returncode, proc.stdout) == (0, f"mirror {version}\n"), proc.stderr
    seen = loaded("-c", script)
    assert not {"argparse", "mirror.cli", "mirror.config", "aiohttp", "lxml"} & seen
    assert {"argparse", "mirror.cli"} <= loaded("-m", "mirror", "--help")  # the control
