"""A run killed while pages are loaded in the browser resumes exactly: the crash points of a
render (crashpoints.BROWSER_STEPS) enumerated, and each capture's own steps while the
browser's requisites are stored, on the SPA fixture (tests/spasite.py).

Each crash state (the archive folder as the disk holds it at that step, copied by a hook:
what SIGKILL leaves, see tests/crashsim.py) is restarted with `mirror run`; then every URL is
stored exactly once, the stored URLs are the uncrashed run's, and `mirror verify` passes
(a URL taken by its cache key: a page load's `?_=<now>` is another than the uncrashed run's,
for the same resource).
One real `mirror run` killed at a render's crash point (os._exit) checks the copy's claim.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import spasite
from crashsim import copy_folder, stored_per_run, verify
from test_browser_capture import CHROMIUM, run, site_file

from mirror import crashpoints
from mirror.crawl.browserfetch import without_cache_buster
from mirror.model import ExitCode

pytestmark = [pytest.mark.browser]
if CHROMIUM is None:
    pytestmark.append(pytest.mark.skip(reason="no Chromium-family browser installed"))
ROOT = Path(__file__).resolve().parent.parent
#: the steps enumerated: the render's, and those of the captures stored during a render
WATCHED = frozenset(crashpoints.BROWSER_STEPS) | {"append:between", "commit:before"}


def on_disk(folder: Path) -> str:
    """A digest of what the disk holds of `folder` (what copy_folder copies)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()
                       and not p.name.endswith("-shm")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


async def record(folder: Path, base: str, into: Path) -> list[tuple[str, Path]]:
    """One uncrashed run of `folder`, copied at every crash point of WATCHED reached while a
    render is under way. A point whose disk is the same as the point's before (nothing
    written between them: a render answered from the archive) is the same crash state:
    kept once, under both names."""
    states: list[tuple[str, Path]] = []
    rendering = [0]
    seen = crashpoints.Occurrences()
    last = [""]

    def snapshot(step: str, kind: str) -> None:
        if step == "render:before":
            rendering[0] += 1
        if step in WATCHED and (rendering[0] or step.startswith("render:")):
            name = f"{step}/{kind} #{seen.next(step, kind)}"
            digest = on_disk(folder)
            if digest == last[0]:
                states[-1] = (f"{states[-1][0]} = {name}", states[-1][1])
            else:
                last[0] = digest
                copy = into / f"{len(states):03d}"
                copy_folder(folder, copy)
                states.append((name, copy))
        if step == "render:after":
            rendering[0] -= 1

    crashpoints.hook = snapshot
    try:
        await run(folder, base, "auto")
    finally:
        crashpoints.hook = None
        crashpoints.label = ""
    return states


async def test_every_render_crash_point_resumes_exactly(tmp_path: Path) -> None:
    # two app pages (one of JSON, one of routes: four renders) reach every point; the site
    # lives as long as the test may (a server gone mid-way fails the restarts' URLs)
    with spasite.serve(plain=1, apps=2, lifetime=1800) as site:
        ref = tmp_path / "ref"
        ref.mkdir()
        site_file(ref, site.base, "auto", delay=0)
        states = await record(ref, site.base, tmp_path / "states")
        reference = set(stored(ref / "archive"))
        steps = {part.split(" #")[0].split("/")[0] for name, _ in states
                 for part in name.split(" = ")}
        assert set(crashpoints.BROWSER_STEPS) <= steps
        failures = []
        for name, folder in states:
            result = await run(folder, site.base, "auto", check=False)
            found = [] if result.exit_code == ExitCode.OK else [f"exit {result.exit_code}"]
            counts = stored(folder / "archive")
            found += [f"stored {n} times: {u}" for u, n in counts.items() if n != 1]
            if set(counts) != reference:
                found.append(f"stored URLs differ: {sorted(set(counts) ^ reference)}")
            found += verify(folder / "archive")
            failures += [f"{name}: {f}" for f in found]
    assert failures == []


def stored(archive: Path) -> Counter[tuple[int, str]]:
    """(run, URL by its cache key) -> response and revisit records."""
    out: Counter[tuple[int, str]] = Counter()
    for (run_id, url), n in stored_per_run(archive).items():
        out[run_id, without_cache_buster(url)] += n
    return out


def browsers_under(folder: Path) -> set[int]:
    """The processes whose command line names `folder` (the browser's profile is made in
    $TMPDIR, which the test points there)."""
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(folder).encode() in cmdline and b"user-data-dir" in cmdline:
                out.add(int(pid))
    return out


async def test_a_real_kill_during_a_render_resumes_and_leaves_no_browser(
        tmp_path: Path) -> None:
    # the browser's profile is made in TMPDIR when its path is short (launch.py): there,
    # its processes are told from any other test's by their command line
    temp = Path(tempfile.mkdtemp(prefix="mb", dir="/tmp"))
    try:
        with spasite.serve(plain=1, apps=3) as site:
            site_file(tmp_path, site.base, "auto", delay=0)
            left = await killed_run(tmp_path, temp)
            await run(tmp_path, site.base, "auto")
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    counts = stored(tmp_path / "archive")
    assert [u for u, n in counts.items() if n != 1] == []
    assert {p for p in site.app_paths()} <= {"/" + u.split("/", 3)[3] for _, u in counts}
    assert verify(tmp_path / "archive") == []
    assert left == set(), f"the browser outlived a killed mirror ({len(left)} processes, 10 s)"


async def killed_run(folder: Path, temp: Path) -> set[int]:
    """`mirror run` of `folder` killed (os._exit, as by SIGKILL) at its second requisite
    stored during a render; the browser processes still there 10 s later (then killed)."""
    env = {**os.environ, crashpoints.ENV: "render:requisite#2", "PYTHONPATH": str(ROOT),
           "TMPDIR": str(temp)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", str(folder / "site.toml"), "--quiet",
        cwd=folder, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(proc.wait(), 120) == crashpoints.EXIT_STATUS
    for _ in range(100):  # the kernel kills the browser with mirror (PR_SET_PDEATHSIG),
        left = browsers_under(temp)  # and its other processes follow
        if not left:
            break
        await asyncio.sleep(0.1)
    for pid in left:  # ours: stopped by their ids
        os.kill(pid, 9)
    return left
