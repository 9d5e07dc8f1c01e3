"""Exact adoption: a capture flushed but never committed is recorded at restart with the
very row, links and outcome the normal path commits, for every kind of capture."""

from __future__ import annotations

from pathlib import Path

from crashsim import (
    PHASES,
    CrashState,
    PhasedSite,
    Scenario,
    capture_file,
    copy_folder,
    record_ids,
    row_by_record,
)

#: (run, kind) of every capture group the writer produces in the phased site's three runs
KINDS = {
    (1, "response"), (1, "redirect"), (1, "truncated"), (1, "error"), (1, "robots"),
    (1, "revisit-other-url-same-run"),
    (2, "response"), (2, "not-modified"), (2, "revisit-same-url-earlier-run"),
    (2, "revisit-other-url-earlier-run"), (2, "redirect"), (2, "truncated"), (2, "error"),
    (2, "robots"),
    (3, "not-modified"), (3, "revisit-same-url-earlier-run"), (3, "robots"),
}


def first_before_commit(step: str, kind: str, nth: int) -> bool:
    return step == "commit:before" and nth == 1


async def test_adopted_rows_equal_what_the_normal_path_commits(make_site, tmp_path: Path):
    scenario = Scenario(PhasedSite(await make_site()), tmp_path)
    ref = scenario.folder("ref")
    states: list[CrashState] = []
    after: dict[int, Path] = {}  # the reference archive at the end of each run
    for phase in PHASES:  # stop after the flush of the first capture of each kind
        states += await scenario.record(ref, phase, first_before_commit, tmp_path / "states")
        copy_folder(ref, after.setdefault(phase, tmp_path / f"ref-{phase}"))
    assert KINDS <= {(s.phase, s.kind) for s in states}
    other_file = 0
    for state in states:
        before = record_ids(state.folder / "archive")
        await scenario.finish(state.folder, state.phase, state.phase)  # restart: adopt
        expected = after[state.phase] / "archive"
        adopted = record_ids(state.folder / "archive") & record_ids(expected) - before
        # the capture stopped at, and the captures of its group flushed before it
        assert 1 <= len(adopted) <= scenario.group_size, f"{state.name}: adopted {adopted}"
        for record_id in adopted:
            got = row_by_record(state.folder / "archive", record_id)
            want = row_by_record(expected, record_id)
            differ = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            if "links" in differ:
                differ["links"] = (got["links"] - want["links"], want["links"] - got["links"])
            assert not differ, f"{state.name}: the adopted row differs: {differ}"
            if want["original_id"] is not None:
                other_file += want["filename"] != capture_file(expected, want["original_id"])
    assert other_file, "no adopted revisit had its original in an earlier, closed WARC file"
