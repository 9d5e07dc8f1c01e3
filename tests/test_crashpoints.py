"""R2 / C1: crash points enumerated, not sampled.

For every durability step x every kind of capture (and every file rotation, index and report
write) in a first run, an incremental run and a run resumed after a crash, and for every time
each is reached (or the first MIRROR_CRASH_OCCURRENCES times): the archive as the disk holds
it at that moment is restarted and the runs are finished; then `mirror verify` and `warcio
check` pass, every URL is stored exactly once per run, nothing committed is fetched again,
and `mirror serve` replays every URL at every run as an uncrashed crawl does.

Captures are committed in groups of three here (crashsim.GROUP_SIZE; groups also end when
the frontier runs dry, before a rotation and with robots.txt), so crash states include
several flushed captures of one group waiting for their commit ("group:between", and a
torn record after them at "append:between"), and a group's transaction left open
("group:inside"): start-up adopts every capture of such a group, in order.

About 350 crash states in about 40 s; bench/crashpoints.py runs the sweep and times it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from crashsim import (
    GROUP_SIZE,
    CrashState,
    PhasedSite,
    Scenario,
    committed,
    copy_folder,
    problems,
    replay_all,
    run_states,
    torn,
    uncommitted,
)

from mirror import crashpoints

#: `mirror run` with the group commit of the enumeration (crashsim.GROUP_SIZE, no time bound)
GROUPED = ("import math; from mirror.crawl import store; store.GROUP_SIZE = %d; "
           "store.GROUP_WAIT = math.inf; from mirror.cli.main import main_entry; main_entry()")
OCCURRENCES = int(os.environ.get("MIRROR_CRASH_OCCURRENCES") or 1 << 30)  # default: all
ROOT = Path(__file__).resolve().parent.parent


def first(n: int):  # noqa: ANN201 - a keep() for Scenario.record
    return lambda step, kind, nth: nth <= n


async def enumerate_states(scenario: Scenario, ref: Path, work: Path,
                           occurrences: int) -> list[CrashState]:
    """Crash states of run 1, of the incremental run 2, and of run 2 resumed after a crash:
    after the flush of its first revisit (recovery adopts it), and the same with a torn
    record after it (what a kill in the middle of a large write leaves: recovery cuts it).
    The reference goes on to run 3."""
    states = await scenario.record(ref, 1, first(occurrences), work / "run1")
    states += await scenario.record(ref, 2, first(occurrences), work / "run2")
    adopting = next(s for s in states if s.phase == 2 and s.step == "commit:before"
                    and s.kind.startswith("revisit"))
    for keep, name in ((first(occurrences), "adopting"), (recovery_steps, "cutting")):
        resumed = work / name
        copy_folder(adopting.folder, resumed)
        if name == "cutting":
            tear(resumed)
        states += [CrashState(s.phase, s.step, f"resumed ({name}) {s.kind}", s.nth, s.folder)
                   for s in await scenario.record(resumed, 2, keep, work / f"run2-{name}")]
    assert await scenario.run(ref, 3) == 0
    return states


def tear(folder: Path) -> None:
    """Append the first bytes of a record to the .open file: a write cut short."""
    [path] = (folder / "archive" / "warc").glob("*.open")
    data = path.read_bytes()
    with open(path, "ab") as f:
        f.write(data[:60])
    assert torn(folder)


def recovery_steps(step: str, kind: str, nth: int) -> bool:
    return step.startswith("recover:")


async def check_state(scenario: Scenario, state: CrashState,
                      reference: dict) -> list[str]:
    """Restart the crash state, finish its run and run 3; what is wrong with the result."""
    before = committed(state.folder)
    requests = await scenario.finish(state.folder, state.phase, 3)
    base = scenario.site.site.base
    refetched = sorted({base + p.lstrip("/") for p in requests} & before)
    return await problems(state.folder / "archive", reference, refetched)


async def test_every_crash_point_restarts_to_the_uncrashed_archive(make_site, tmp_path):
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    ref = scenario.folder("ref")
    states = await enumerate_states(scenario, ref, tmp_path, OCCURRENCES)
    reference = await replay_all(ref / "archive")
    assert run_states(ref) == ["complete"] * 3
    with_text = {url.rsplit("/", 1)[1] for (run, url), r in reference.items() if r[3]}
    assert with_text == {"", "a", "new", "dup1", "dup2", "dup3", "noval", "etag"}
    failures = {}
    lost: Counter[str] = Counter()  # step -> states with two or more captures to adopt
    for state in states:
        if len(uncommitted(state.folder)) >= 2:
            lost[state.step] += 1
        if found := await check_state(scenario, state, reference):
            failures[state.name] = found
    steps = Counter(s.step for s in states)
    print(f"\n{len(states)} crash states restarted ({len({(s.phase, s.kind) for s in states})}"
          f" run x kind pairs): " + ", ".join(f"{k} {n}" for k, n in steps.items()))
    print(f"{sum(lost.values())} of them with a lost group of two or more captures: "
          + ", ".join(f"{k} {n}" for k, n in lost.items()))
    assert set(steps) == set(crashpoints.STEPS), \
        f"steps never reached: {set(crashpoints.STEPS) - set(steps)}"
    for step in ("group:between", "append:between", "group:inside", "commit:inside"):
        assert lost[step], f"no crash at {step} with two captures of one group flushed"
    assert not failures, "\n".join(f"{name}:\n  " + "\n  ".join(found[:6])
                                   for name, found in list(failures.items())[:10])


@pytest.mark.parametrize("spec", ["commit:before/revisit-other-url-earlier-run",
                                  "append:between/not-modified", "commit:inside/redirect#2",
                                  "rotate:before-rename/file#3", "group:inside/group#2",
                                  "group:between#2"])
async def test_a_real_exit_at_a_crash_point_leaves_what_the_copy_shows(
        make_site, tmp_path, spec: str):
    """The copy taken in-process is what a killed process leaves: `mirror run` stopped by
    MIRROR_CRASH_AT (os._exit) restarts to the same archive as the enumeration expects."""
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    ref = scenario.folder("ref")
    for phase in (1, 2, 3):
        await scenario.run(ref, phase)
    reference = await replay_all(ref / "archive")
    case = scenario.folder("case")
    await scenario.run(case, 1)
    scenario.site.phase = 2
    env = {**os.environ, crashpoints.ENV: spec, "PYTHONPATH": str(ROOT)}
    proc = await _mirror_run(case, env)
    assert proc == crashpoints.EXIT_STATUS, f"{spec}: not reached (exit {proc})"
    state = CrashState(2, spec, "", 1, case)
    assert await check_state(scenario, state, reference) == []


async def _mirror_run(folder: Path, env: dict[str, str]) -> int:
    import asyncio

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", GROUPED % GROUP_SIZE, "run", str(folder / "site.toml"), "--quiet",
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return await asyncio.wait_for(proc.wait(), 60)
