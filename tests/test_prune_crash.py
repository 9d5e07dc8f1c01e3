"""A4: `mirror prune` is crash-safe at every step, enumerated, not sampled.

Three runs of crashsim's site (every kind of capture, several WARC files a run) are pruned
to the last run. The folder is copied at every time the prune reaches one of its crash
points (mirror.crashpoints.PRUNE_STEPS, and index.cdxj's own rename): what a SIGKILL then
leaves. Each copy is restarted the way a user would (`mirror verify`, which finishes or
undoes the prune), and must then be the old archive (before the switch) or the new one
(from it on): `mirror verify`, `warcio check` and the search index pass, every capture
replays through `mirror serve` as in the uncrashed archive of that state, each record is
stored once, and another `mirror prune` reaches the new archive. A real `os._exit` at each
step (MIRROR_CRASH_AT, in a `mirror prune` process) leaves what the copies show, and a
crash in the middle of finishing, or before a `mirror run`, comes out right too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crashsim import (
    PhasedSite,
    Scenario,
    copy_folder,
    replay_all,
    stored_per_run,
    text_index_problems,
    warcio_check,
)

from mirror import crashpoints
from mirror.cli.main import main
from mirror.config import load_config
from mirror.upkeep.prune import finish_interrupted_prune, prune_site
from mirror.upkeep.retention import Retention

ROOT = Path(__file__).resolve().parent.parent
POLICY = Retention(keep_last=1)
OLD, NEW = [1, 2, 3], [3]
#: the steps at which the manifest still holds every run (the switch is not committed)
BEFORE_SWITCH = {"prune:journaled", "prune:written", "prune:switch-inside"}


@dataclass(frozen=True)
class State:
    step: str
    kind: str
    nth: int
    folder: Path

    @property
    def name(self) -> str:
        return f"{self.step}/{self.kind}#{self.nth}"


@dataclass(frozen=True)
class Archive:
    """What an archive shows: its runs, every capture's replay, records per (run, URL)."""

    runs: list[int]
    replayed: dict[Any, Any]
    stored: Counter[tuple[int, str]]

    @classmethod
    async def of(cls, folder: Path) -> Archive:
        archive = folder / "archive"
        with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
            runs = [i for (i,) in db.execute("SELECT id FROM runs ORDER BY id")]
        return cls(runs, await replay_all(archive), stored_per_run(archive))


def prune(folder: Path) -> None:
    prune_site(load_config(folder / "site.toml"), retention=POLICY)


def record(folder: Path, into: Path) -> list[State]:
    """Prune `folder`, copying it at every crash point the prune reaches."""
    states: list[State] = []
    seen = crashpoints.Occurrences()

    def snapshot(step: str, kind: str) -> None:
        nth = seen.next(step, kind)
        copy = into / f"{len(states):03d}"
        copy_folder(folder, copy)
        states.append(State(step, kind, nth, copy))

    crashpoints.hook = snapshot
    try:
        prune(folder)
    finally:
        crashpoints.hook = None
    return states


async def restarted(state_folder: Path, old: Archive, new: Archive) -> list[str]:
    """Restart a crashed folder with `mirror verify`; what is wrong with the result."""
    if code := main(["verify", str(state_folder / "site.toml")]):
        return [f"mirror verify exits {code}"]
    found = [f"warcio check: {why[:300]}"] if (why := warcio_check(state_folder / "archive")) \
        else []
    found += text_index_problems(state_folder / "archive")
    got = await Archive.of(state_folder)
    want = old if got.runs == old.runs else new
    if got != want:
        found.append(f"neither the old nor the new archive: runs {got.runs}, "
                     f"{sorted(set(got.replayed) ^ set(want.replayed))[:4]} differ in what "
                     f"replays, stored {sorted((got.stored - want.stored).items())[:4]}")
    if any((state_folder / "archive" / "warc").glob(".*")):
        found.append("a temporary file is left")
    return found


@pytest.fixture
async def three_runs(make_site, tmp_path: Path) -> tuple[Path, Archive, Archive]:
    """The folder of three runs, what it shows, and what it shows once pruned."""
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    base = scenario.folder("base")
    for phase in (1, 2, 3):
        assert await scenario.run(base, phase) == 0
    pruned = tmp_path / "pruned"
    copy_folder(base, pruned)
    prune(pruned)
    old, new = await Archive.of(base), await Archive.of(pruned)
    assert old.runs == OLD and new.runs == NEW and old.replayed != new.replayed
    return base, old, new


async def test_every_prune_crash_point_restarts_to_the_old_or_the_new_archive(
        three_runs, tmp_path):
    base, old, new = three_runs
    work = tmp_path / "work"
    copy_folder(base, work)
    states = record(work, tmp_path / "states")
    steps = Counter(s.step for s in states)
    print(f"\n{len(states)} prune crash states: " + ", ".join(f"{k} {n}" for k, n in
                                                             steps.items()))
    assert set(crashpoints.PRUNE_STEPS) | {"file:before-rename"} == set(steps)
    assert steps["prune:written"] >= 2 and steps["prune:deleted"] >= 2  # several files
    failures = {}
    for state in states:
        found = await restarted(state.folder, old, new)
        runs = (await Archive.of(state.folder)).runs
        if runs != (OLD if state.step in BEFORE_SWITCH else NEW):
            found.append(f"runs {runs} after a crash at {state.step}")
        prune(state.folder)  # the prune a user runs again ends in the new archive
        if await Archive.of(state.folder) != new:
            found.append("pruning again does not reach the pruned archive")
        if found:
            failures[state.name] = found
    assert not failures, "\n".join(f"{n}: {f}" for n, f in list(failures.items())[:10])


async def test_a_crash_while_finishing_a_prune_is_finished_too(three_runs, tmp_path):
    """The steps after the switch are done again by recovery; crash there as well."""
    base, old, new = three_runs
    switched = next(s for s in record(_copy(base, tmp_path / "w"), tmp_path / "s")
                    if s.step == "prune:switched")
    seen = crashpoints.Occurrences()
    states: list[Path] = []

    def snapshot(step: str, kind: str) -> None:
        seen.next(step, kind)
        states.append(tmp_path / f"again-{len(states):03d}")
        copy_folder(switched.folder, states[-1])

    crashpoints.hook = snapshot
    try:
        assert finish_interrupted_prune(switched.folder / "archive") is not None
    finally:
        crashpoints.hook = None
    assert {step for step, _ in seen.counts} >= {"prune:renamed", "prune:indexed",
                                                   "prune:deleted"}
    for folder in states:
        assert await restarted(folder, old, new) == []
        assert (await Archive.of(folder)).runs == NEW


async def test_the_next_mirror_run_finishes_or_undoes_a_prune(make_site, tmp_path):
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    base = scenario.folder("base")
    for phase in (1, 2, 3):
        assert await scenario.run(base, phase) == 0
    states = {s.step: s for s in record(_copy(base, tmp_path / "w"), tmp_path / "s")}
    for step, runs in (("prune:written", [1, 2, 3, 4]), ("prune:renamed", [3, 4])):
        folder = states[step].folder
        assert await scenario.run(folder, 3) == 0
        assert (await Archive.of(folder)).runs == runs, step
        assert main(["verify", str(folder / "site.toml")]) == 0


@pytest.mark.parametrize("spec", [*crashpoints.PRUNE_STEPS, "prune:written#2",
                                  "prune:deleted#3", "file:before-rename/index.cdxj"])
async def test_a_real_exit_at_a_prune_crash_point(three_runs, tmp_path, spec):
    """`mirror prune` stopped by MIRROR_CRASH_AT (os._exit: what SIGKILL leaves) restarts
    to the old or the new archive, as the copies above say."""
    base, old, new = three_runs
    case = _copy(base, tmp_path / "case")
    env = {**os.environ, crashpoints.ENV: spec, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "prune", str(case / "site.toml"), "--keep-last", "1",
        cwd=case, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == crashpoints.EXIT_STATUS, f"{spec}: exit {proc.returncode}: {err!r}"
    assert await restarted(case, old, new) == []
    step = spec.partition("#")[0].partition("/")[0]
    assert (await Archive.of(case)).runs == (OLD if step in BEFORE_SWITCH else NEW)


def _copy(src: Path, dst: Path) -> Path:
    copy_folder(src, dst)
    return dst
