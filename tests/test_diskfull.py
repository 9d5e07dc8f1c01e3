"""A full disk, on a real small file system: a tmpfs this test mounts (it runs as root
here). The disk is filled to the last byte at an enumerated step of the run (a crash point's
hook, so the step is reached deterministically), the run stops with exit 6 and says where
and how much is free, nothing is lost (the WARC files read to their last whole record, the
manifest and files agree: `mirror verify`), and a run started once there is space again
resumes and completes, every page stored once.

The places a full disk can hit, and how each is covered:
- a WARC record's append ("append:before"): here;
- the manifest's commit of a group, SQLite on the full disk ("commit:inside"): here;
- index.cdxj at the end of the crawl (after the last "commit:after"): here;
- the manifest's commit that marks the run finished, after the index ("run:before-finish"):
  here;
- the run's report (reports/<run>.json) comes after that commit, which needs room first, so
  it cannot be reached alone: the runner turns any full-disk error of that phase into the
  same stop (mirror/run/runner.py `_raise_if_disk_full`);
- progress.json: a failed write is a warning, never a stop (run/runner.py's ticker).

Fallback: where the test may not mount (not root, EPERM in a container) it is skipped, with
the reason; the WARC append alone is then still covered without a mount by
test_resume.py's FullDisk opener.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import read_records, write_config

from mirror import crashpoints
from mirror.archive.warcread import complete_prefix
from mirror.cli.main import main
from mirror.model import ExitCode

#: the small file system: room for the run, which the test fills at a chosen step
SIZE = 8 * 1024 * 1024
PAGES = 8


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("not root: cannot mount a tmpfs (test_resume.py's FullDisk opener "
                    "covers the WARC append without one)")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs",
                           str(mnt)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); test_resume.py's "
                    "FullDisk opener covers the WARC append without one")
    try:
        yield mnt
    finally:
        done = subprocess.run(["umount", str(mnt)], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr  # no file left open in it


def open_in(folder: Path) -> list[str]:
    """The files under `folder` this process holds a descriptor of."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder) + "/"):
            held.append(target)
    return held


def fill(folder: Path) -> None:
    """Fill the file system holding `folder` to its last byte (a file `filler`)."""
    chunk = b"\0" * 65536
    with open(folder / "filler", "ab", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    assert os.statvfs(folder).f_bavail == 0


def site_of(site: Any) -> None:
    site.page("/", "".join(f'<a href="/p{i}">p{i}</a>' for i in range(PAGES)))
    for i in range(PAGES):  # bytes that do not compress: the records take room
        site.page(f"/p{i}", f"<p>page {i} " + os.urandom(6000).hex() + "</p>")


#: (step, which time it is reached) at which the disk is filled, and what the message names
POINTS = {
    "warc-append": ("append:before", 4, ".warc.gz.open"),
    "manifest-commit": ("commit:inside", 4, "manifest.sqlite3"),
    "index": ("commit:after", PAGES + 1, "archive"),
    "run-finish": ("run:before-finish", 1, "archive"),
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_full_disk_stops_the_run_loses_nothing_and_a_later_run_resumes(
        point: str, small_fs: Path, site_in_thread: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    step, nth, names = POINTS[point]
    site = site_in_thread()
    site_of(site)
    toml = write_config(small_fs, [site.base], crawl={"workers": 1})  # archive/ beside it
    seen = crashpoints.Occurrences()

    def hook(at: str, kind: str) -> None:
        if at == step and seen.next(at, "") == nth:
            fill(small_fs)
    crashpoints.hook = hook
    try:
        code = main(["run", "-q", str(toml)])
    finally:
        crashpoints.hook = None
    err = capsys.readouterr().err
    assert open_in(small_fs) == [], err  # the run closed every file it had there
    assert "--- Logging error ---" not in err, err  # mirror.log's failure: one line
    assert err.count("mirror.log: No space left on device") <= 1, err
    assert seen.counts[step, ""] >= nth, err
    assert code == ExitCode.DISK_FULL, err
    archive = small_fs / "archive"
    said = next(line for line in err.splitlines() if "disk full writing" in line)
    log = (archive / "mirror.log").read_text(errors="replace")
    problems = "\n".join(line for line in log.splitlines() if " INFO " not in line)
    assert f"disk full writing {archive}" in said and names in said, problems
    assert " bytes free; nothing lost; run `mirror run` again when there is space" in said
    records = read_records(archive / "warc")  # every file reads to its last whole record
    for path in (archive / "warc").iterdir():  # no torn record (an .open file too)
        assert complete_prefix(path) == path.stat().st_size, path.name
    verified = main(["verify", str(toml)])
    problems = [line for line in capsys.readouterr().out.splitlines() if ": " in line
                and not line.startswith("verified")]
    # the manifest and the files agree; the index is missing only when never written
    assert verified == ExitCode.OK or problems == [
        "index.cdxj: index-missing: no index; `mirror index` rebuilds it"], problems
    (small_fs / "filler").unlink()  # space again
    assert main(["run", "-q", str(toml)]) == ExitCode.OK, capsys.readouterr().err
    assert main(["verify", str(toml)]) == ExitCode.OK, capsys.readouterr()
    responses = [r for r in read_records(archive / "warc") if r["type"] == "response"]
    urls = sorted(r["uri"] for r in responses)
    assert urls == sorted([site.base] + [f"{site.base}p{i}" for i in range(PAGES)])
    assert len(records) <= len(read_records(archive / "warc"))


def test_a_log_file_on_a_full_disk_says_so_once_in_one_line(
        small_fs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from mirror.run.logfile import RunLogFile

    handler = RunLogFile(small_fs / "mirror.log")
    log = logging.getLogger("test.fulldisk")
    log.addHandler(handler)
    log.propagate = False
    try:
        fill(small_fs)
        for n in range(5):
            try:
                raise OSError(28, "a record with a traceback of its own")
            except OSError:
                log.exception("record %d " + "x" * 5000, n)
    finally:
        log.removeHandler(handler)
        handler.close()
        log.propagate = True
    err = capsys.readouterr().err
    assert err == (f"mirror: cannot write {small_fs / 'mirror.log'}: No space left on device; "
                   "the run's warnings still go here, its other log lines are lost until it "
                   "can\n"), err
    assert open_in(small_fs) == []
