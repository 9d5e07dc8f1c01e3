"""J1, the way users start things: from a home holding the default library `~/mirror`, in
the environment cron and systemd give (HOME, PATH=/usr/bin:/bin, LANG; no VIRTUAL_ENV),
every `mirror` that mirror starts -- the app's Run now, a systemd unit's ExecStart, a
crontab line, a fleet run -- runs the installed package and archives the site. Once with
the editable install these tests run in, once with a regular one in a fresh venv. (With
`python -m mirror` the editable install failed them all: ~/mirror, a namespace package
first on sys.path, hid the editable finder's package. A regular install's package came
first on sys.path and passed them even then.)"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import TestSite
from test_schedule import crontab_command
from uiproc import UiProcess, archive_runs, chain_site, post, site_file, until

from mirror.schedule.crontab import TAG

PAGES = 4


@dataclass
class Home:
    """A user's home holding the default library ~/mirror with one site file."""

    path: Path
    site: TestSite
    site_file: Path

    def env(self, **more: str) -> dict[str, str]:
        """What cron gives a job (plus `more`)."""
        return {"HOME": str(self.path), "LOGNAME": "root", "PATH": "/usr/bin:/bin",
                "LANG": "C.UTF-8", **more}

    def run(self, argv: list[str], **more: str) -> subprocess.CompletedProcess[str]:
        """argv from the home, as cron and systemd user units start their jobs."""
        return subprocess.run(argv, cwd=self.path, env=self.env(**more), capture_output=True,
                              text=True, timeout=120)

    @property
    def archive(self) -> Path:
        return self.path / "mirror" / "archive" / "local"

    def assert_archived(self, proc: subprocess.CompletedProcess[str]) -> None:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs = archive_runs(self.archive)
        assert [(r.state, r.exit_code) for r in runs] == [("complete", 0)], proc.stderr
        assert all(self.site.count(f"/p{i}.html") == 1 for i in range(PAGES)), self.site.log


@pytest.fixture
def home(tmp_path: Path, site_in_thread: Callable[[], TestSite]) -> Home:
    path = tmp_path / "home"
    library = path / "mirror"
    library.mkdir(parents=True)
    site = chain_site(site_in_thread(), PAGES)
    file = site_file(library, "local", site.base)
    with file.open("a", encoding="utf-8") as f:
        f.write('\n[schedule]\nevery = "daily 03:15"\n')
    return Home(path, site, file)


async def test_run_now_in_the_app_started_from_home(installed: Path, home: Home) -> None:
    # `cd ~ && mirror ui`: the default library, the app's Run now
    ui = UiProcess.start(home.path / "mirror", command=[str(installed / "mirror"), "ui"],
                         cwd=home.path, env=home.env())
    output = home.path / "mirror" / ".mirror-ui" / "local.out"
    try:
        async with ui.session() as session:
            status, _ = await post(ui, session, "/site/local/run", {})
            assert status == 303
            await until(lambda: _ended(home, output), 60, "the run to end")
    finally:
        assert ui.stop() == 0
    said = output.read_text(encoding="utf-8")
    assert "Error" not in said, said
    runs = archive_runs(home.archive)
    assert [(r.state, r.exit_code) for r in runs] == [("complete", 0)], said


def _ended(home: Home, output: Path) -> bool:
    said = output.read_text(encoding="utf-8") if output.exists() else ""
    runs = archive_runs(home.archive)
    return "Error" in said or bool(runs and runs[-1].state == "complete")


def test_a_systemd_units_execstart_runs_from_home(installed: Path, home: Home) -> None:
    applied = home.run([str(installed / "mirror"), "schedule", "apply", "--timer", "systemd"])
    assert applied.returncode == 0, applied.stderr
    (service,) = (home.path / ".config" / "systemd" / "user").glob("mirror-*.service")
    (line,) = [s for s in service.read_text().splitlines() if s.startswith("ExecStart=")]
    argv = exec_words(line.removeprefix("ExecStart="))
    assert Path(argv[0]).parent == installed  # this install's python, by its absolute path
    # a systemd user service starts in $HOME, in the manager's small environment
    home.assert_archived(home.run(argv))


def exec_words(value: str) -> list[str]:
    """The words of an ExecStart= value as mirror writes it (each double-quoted, with %% and
    $$ for literal % and $)."""
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(value)]


def test_a_crontab_line_runs_from_home_as_cron_runs_it(installed: Path, home: Home,
                                                       tmp_path: Path) -> None:
    command = crontab_command(tmp_path)
    probe = subprocess.run([command, "-l"], capture_output=True, text=True, timeout=30)
    if shutil.which("crontab") is None or (probe.returncode != 0
                                           and "no crontab for" not in probe.stderr):
        pytest.skip(f"no private crontab here (needs root, unshare, cron): {probe.stderr}")
    applied = home.run([str(installed / "mirror"), "schedule", "apply", "--timer", "cron"],
                       MIRROR_CRONTAB=command)
    assert applied.returncode == 0, applied.stderr
    listed = subprocess.run([command, "-l"], capture_output=True, text=True, timeout=30)
    (line,) = [s for s in listed.stdout.splitlines() if TAG in s]
    # cron: `/bin/sh -c COMMAND` from $HOME with HOME, LOGNAME, SHELL and PATH=/usr/bin:/bin
    home.assert_archived(home.run(["/bin/sh", "-c", cron_command(line)], SHELL="/bin/sh"))


def cron_command(line: str) -> str:
    """The command field of a crontab line as cron hands it to the shell: after the five
    time fields (or an @word), up to the first unescaped %, with \\% made %."""
    fields = line.split(None, 1 if line.startswith("@") else 5)
    return re.split(r"(?<!\\)%", fields[-1])[0].replace("\\%", "%")


def test_a_fleet_run_starts_from_home(installed: Path, home: Home, tmp_path: Path) -> None:
    said = subprocess.run(
        [str(installed / "python"), "-c", "import json, sys; from pathlib import Path; "
         "from mirror.fleet.child import run_argv; print(json.dumps(run_argv(Path(sys.argv[1]))))",
         str(home.site_file)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        check=True)
    argv = json.loads(said.stdout)
    assert Path(argv[0]).parent == installed  # this install's python, by its absolute path
    home.assert_archived(home.run(argv))
