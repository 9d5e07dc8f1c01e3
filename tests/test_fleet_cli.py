"""`mirror schedule apply | list | remove | run-now --db` against a real PostgreSQL: the
same site files and messages as for OS timers, registrations instead of timers; and the
fleet commands without the fleet extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleetproc import jobs, query, site_file

from mirror.cli.main import main

pytestmark = pytest.mark.slow


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def registered(dsn: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in query(dsn, "SELECT * FROM mirror_fleet_sites")}


def test_apply_registers_scheduled_sites_and_converges(
        tmp_path: Path, pg_dsn: str, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    lib = tmp_path / "library"
    a = site_file(lib, "a", "http://127.0.0.1:9/", s3.url + "/a", every="daily 03:15")
    b = site_file(lib, "b", "http://127.0.0.1:9/", s3.url + "/b", every="hourly")
    site_file(lib, "c", "http://127.0.0.1:9/", s3.url + "/c", every="")  # not scheduled
    code, out, err = run(capsys, "schedule", "apply", str(lib), "--db", pg_dsn)
    assert code == 0, err
    assert "a: in the fleet, daily 03:15 (" in out and "b: in the fleet, hourly (" in out
    assert "c: not scheduled" in out
    rows = registered(pg_dsn)
    assert set(rows) == {"a", "b"}
    assert rows["a"]["toml"] == a.read_text() and rows["a"]["store"] == s3.url + "/a"
    assert rows["a"]["site_file"] == str(a) and rows["b"]["schedule"] == "hourly"

    code, out, _ = run(capsys, "schedule", "apply", str(lib), "--db", pg_dsn)
    assert "a: in the fleet (unchanged)" in out and "b: in the fleet (unchanged)" in out

    a.write_text(a.read_text().replace("daily 03:15", "daily 04:00"))
    code, out, _ = run(capsys, "schedule", "list", str(lib), "--db", pg_dsn)
    assert "out of date: run `mirror schedule apply --db ...`" in out
    assert "last   none yet" in out
    code, out, _ = run(capsys, "schedule", "apply", str(a), "--db", pg_dsn)
    assert code == 0 and "a: in the fleet (updated), daily 04:00" in out
    assert registered(pg_dsn)["a"]["schedule"] == "daily 04:00"

    b.unlink()
    code, out, _ = run(capsys, "schedule", "apply", str(lib), "--db", pg_dsn)
    assert "b: removed from the fleet (its site file is gone)" in out
    site_file(lib, "a", "http://127.0.0.1:9/", s3.url + "/a", every="")
    code, out, _ = run(capsys, "schedule", "apply", str(lib), "--db", pg_dsn)
    assert "a: removed from the fleet (no [schedule] every)" in out
    assert registered(pg_dsn) == {}


def test_apply_refuses_what_a_fleet_cannot_run(
        tmp_path: Path, pg_dsn: str, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    lib = tmp_path / "library"
    site_file(lib, "nostore", "http://127.0.0.1:9/", "", every="hourly")
    site_file(lib, "one", "http://127.0.0.1:9/", s3.url + "/same", every="hourly")
    site_file(lib, "two", "http://127.0.0.1:9/", s3.url + "/same", every="hourly")
    (lib / "broken.toml").write_text("[site]\nname = 'broken'\n")
    code, out, err = run(capsys, "schedule", "apply", str(lib), "--db", pg_dsn)
    assert code == 2
    assert "nostore.toml: a fleet site needs [archive] store = \"s3://bucket/prefix\"" in err
    assert "is the store of the fleet site 'one' too" in err
    assert "broken.toml" in err and "(its registration, if it has one, is left as it is)" in err
    assert set(registered(pg_dsn)) == {"one"}
    # the same name from another site file is refused, the registration stays
    other = site_file(tmp_path / "elsewhere", "one", "http://127.0.0.1:9/", s3.url + "/x")
    code, out, err = run(capsys, "schedule", "apply", str(other), "--db", pg_dsn)
    assert code == 2 and "the fleet has a site named 'one' already, registered from" in err
    assert registered(pg_dsn)["one"]["site_file"] == str(lib / "one.toml")


def test_run_now_queues_one_run_and_remove_cancels_it(
        tmp_path: Path, pg_dsn: str, s3: Any, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "library"
    path = site_file(lib, "a", "http://127.0.0.1:9/", s3.url + "/a")
    monkeypatch.setenv("MIRROR_DB", pg_dsn)  # instead of --db
    assert run(capsys, "schedule", "apply", str(lib))[0] == 0
    code, out, _ = run(capsys, "schedule", "run-now", str(path))
    assert code == 0 and "a: queued a run (job" in out
    code, out, _ = run(capsys, "schedule", "run-now", "a")  # by name
    assert code == 75 and "a: a run is already waiting (job" in out
    waiting, = jobs(pg_dsn, "todo")
    assert waiting["args"]["site"] == "a"
    assert query(pg_dsn, "SELECT queueing_lock, lock FROM procrastinate_jobs "
                         "WHERE id = %s", (waiting["id"],)) == [
        {"queueing_lock": "site:a", "lock": "site:a"}]
    code, out, err = run(capsys, "schedule", "run-now", "nosuch")
    assert code == 2 and "nosuch: not in the fleet" in err
    code, out, _ = run(capsys, "schedule", "remove", str(path))
    assert code == 0 and "a: removed from the fleet (as asked); its waiting run was cancelled" \
        in out
    assert jobs(pg_dsn, "todo") == [] and registered(pg_dsn) == {}


def test_fleet_commands_need_a_database(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIRROR_DB", raising=False)
    code, _, err = run(capsys, "schedule", "run-now", str(tmp_path / "x.toml"))
    assert code == 2 and "needs the fleet's database: --db postgresql://... or $MIRROR_DB" in err
    code, _, err = run(capsys, "worker", "--data", str(tmp_path))
    assert code == 2 and "--db" in err
    code, _, err = run(capsys, "worker", "--db", "postgresql://nobody@127.0.0.1:9/x",
                       "--data", str(tmp_path))
    assert code == 2 and "cannot reach the fleet database nobody@127.0.0.1:9/x" in err


BLOCKED = ("import sys; sys.modules['psycopg'] = None; sys.modules['procrastinate'] = None; "
           "from mirror.cli.main import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("args", [
    ["worker", "--db", "postgresql://x@127.0.0.1:9/x", "--data", "DATA"],
    ["schedule", "list", "--db", "postgresql://x@127.0.0.1:9/x"],
    ["ui", "--db", "postgresql://x@127.0.0.1:9/x", "--no-browser", "LIB"],
])
def test_without_the_fleet_extra_the_fleet_commands_say_what_to_install(
        tmp_path: Path, args: list[str]) -> None:
    args = [a.replace("DATA", str(tmp_path / "d")).replace("LIB", str(tmp_path / "l"))
            for a in args]
    done = subprocess.run([sys.executable, "-c", BLOCKED, *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install 'mirror[fleet]'" in done.stderr


def test_mirror_starts_without_loading_the_fleet() -> None:
    code = ("import sys; import mirror.cli.main; "
            "sys.exit(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('psycopg', 'procrastinate', 'mirror') and m.startswith(('psycopg', "
            "'procrastinate', 'mirror.fleet'))) != [])")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
