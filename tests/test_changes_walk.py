"""The report's comparison of two runs (run/changes.py) walks both runs by URL and keeps at
most `keep` URLs of a kind: it must classify every URL as the comparison of two dicts did
(the oracle below, the code it replaced), for any two runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.run.changes import GONE_STATUSES, KINDS, compare_walks

URLS = st.sampled_from([f"http://h.test/{c}" for c in "aAbBéz_-"])
SEEN = st.tuples(URLS, st.sampled_from([200, 301, 304, 404, 410, 500]),
                 st.sampled_from(["sha1:A", "sha1:B"]))


def oracle(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]],
           complete: bool, failed: set[str], queued: set[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {kind: [] for kind in KINDS}
    waiting = set() if complete else queued - before.keys() - after.keys()
    for url in sorted(before.keys() | after.keys() | waiting):
        old, new = before.get(url), after.get(url)
        if url in waiting:
            out["pending"].append(url)
        elif old is None:
            out["new"].append(url)
        elif old[0] in GONE_STATUSES and (new is None or new[0] in GONE_STATUSES):
            continue
        elif new is None and url in failed:
            continue
        elif new is None:
            out["gone" if complete else "pending"].append(url)
        elif new[0] in GONE_STATUSES:
            out["gone"].append(url)
        elif new[0] == 304 or new == old:
            out["unchanged"].append(url)
        else:
            out["changed"].append(url)
    return out


def walk(seen: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    return sorted(seen, key=lambda s: s[0])  # stable: a URL's captures in their order


@settings(max_examples=400, deadline=None)
@given(st.lists(SEEN, max_size=12), st.lists(SEEN, max_size=12), st.booleans(),
       st.sets(URLS, max_size=3), st.sets(URLS, max_size=4), st.integers(0, 3))
def test_walking_two_runs_classifies_as_two_dicts_did(
        before: list[tuple[str, int, str]], after: list[tuple[str, int, str]], complete: bool,
        failed: set[str], queued: set[str], keep: int) -> None:
    expected = oracle({u: (s, d) for u, s, d in walk(before)},
                      {u: (s, d) for u, s, d in walk(after)}, complete, failed, queued)
    whole = compare_walks(walk(before), walk(after), complete=complete, failed=failed,
                          queued=queued)
    assert {kind: getattr(whole, kind) for kind in KINDS} == expected
    cut = compare_walks(walk(before), walk(after), complete=complete, failed=failed,
                        queued=queued, keep=keep)
    assert {kind: getattr(cut, kind) for kind in KINDS} == {
        kind: urls[:keep] for kind, urls in expected.items()}
    assert cut.counts() == {kind: len(urls) for kind, urls in expected.items()}
