"""The word diff of two page texts (mirror/replay/textdiff.py): its laws and renderings."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from mirror.replay.textdiff import (
    ADDED,
    REMOVED,
    SAME,
    DiffPart,
    Fold,
    diff_html,
    diff_stats,
    diff_terminal,
    folded,
    word_diff,
)

#: texts made of a few words, spaces and line breaks, so that the two sides share a lot
WORDS = st.sampled_from(["the", "quick", "brown", "fox", "<b>", "&amp;", "café", "a", "zz"])
SPACES = st.sampled_from([" ", "  ", "\n", " \n", "\t"])
TEXT = st.lists(st.one_of(WORDS, SPACES), max_size=40).map("".join)

OLD = "Intro\nthe quick brown fox jumps\nend"
NEW = "Intro\nthe slow brown fox jumps\nend"


def side(parts: list[DiffPart], kind: str) -> str:
    return "".join(p.text for p in parts if p.kind in (SAME, kind))


@given(TEXT, TEXT)
def test_the_parts_give_back_both_texts(old: str, new: str) -> None:
    parts = word_diff(old, new)
    assert side(parts, REMOVED) == old
    assert side(parts, ADDED) == new


@given(TEXT, TEXT)
def test_parts_are_merged_and_never_empty(old: str, new: str) -> None:
    parts = word_diff(old, new)
    assert all(p.text for p in parts)
    kinds = [p.kind for p in parts]
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False))
    # a change is one removed part then one added part, never the other way round
    assert all((a, b) != (ADDED, REMOVED) for a, b in zip(kinds, kinds[1:], strict=False))


@given(TEXT)
def test_a_text_against_itself_is_all_same(text: str) -> None:
    assert word_diff(text, text) == ([DiffPart(SAME, text)] if text else [])


def test_one_changed_word_is_exactly_that_word() -> None:
    assert word_diff(OLD, NEW) == [
        DiffPart(SAME, "Intro\nthe "), DiffPart(REMOVED, "quick"), DiffPart(ADDED, "slow"),
        DiffPart(SAME, " brown fox jumps\nend")]


def test_neighbouring_changes_read_as_one() -> None:
    assert word_diff("the quick brown fox", "the slow red fox") == [
        DiffPart(SAME, "the "), DiffPart(REMOVED, "quick brown"),
        DiffPart(ADDED, "slow red"), DiffPart(SAME, " fox")]


def test_added_and_removed_lines() -> None:
    parts = word_diff("one\ntwo\nthree\n", "one\nthree\nfour\n")
    assert parts == [DiffPart(SAME, "one\n"), DiffPart(REMOVED, "two\n"),
                     DiffPart(SAME, "three\n"), DiffPart(ADDED, "four\n")]
    assert diff_stats(parts) == (1, 1)


def test_a_moved_line_break_is_a_change() -> None:
    parts = word_diff("a b\nc", "a\nb c")
    assert side(parts, REMOVED) == "a b\nc" and side(parts, ADDED) == "a\nb c"
    assert {p.kind for p in parts} == {SAME, ADDED, REMOVED}


def test_renderings() -> None:
    parts = word_diff("x <b> & y", "x <i> & y z")
    assert diff_html(parts) == "x <del>&lt;b&gt;</del><ins>&lt;i&gt;</ins> &amp; y<ins> z</ins>"
    assert diff_terminal(parts, color=False) == "x [-<b>-]{+<i>+} & y{+ z+}"
    assert diff_terminal(parts, color=True) == (
        "x \x1b[31m<b>\x1b[0m\x1b[32m<i>\x1b[0m & y\x1b[32m z\x1b[0m")
    assert diff_stats(parts) == (2, 1)
    assert diff_html([]) == diff_terminal([], True) == "" and diff_stats([]) == (0, 0)


def test_empty_sides() -> None:
    assert word_diff("", "") == []
    assert word_diff("", "new words") == [DiffPart(ADDED, "new words")]
    assert word_diff("old words", "") == [DiffPart(REMOVED, "old words")]


def test_long_texts_finish() -> None:
    """100,000 characters on one line, and in lines, mostly alike and wholly different."""
    rnd = random.Random(7)
    vocabulary = ["".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, 9)))
                  for _ in range(800)]

    def text(separator: str) -> str:
        words = [rnd.choice(vocabulary) for _ in range(17_000)]
        return separator.join(words)[:100_000]

    for sep in (" ", "\n"):
        old, other = text(sep), text(sep)
        edited = sep.join("CHANGED" if w == vocabulary[5] else w for w in old.split(sep))
        for new in (edited, other):
            parts = word_diff(old, new)
            assert side(parts, REMOVED) == old and side(parts, ADDED) == new


# -- the folded view: changed passages with a few lines around them ---------------------------


def numbered(n: int, changed: dict[int, str] | None = None) -> str:
    return "".join(f"{(changed or {}).get(i, f'line {i}')}\n" for i in range(n))


def test_unchanged_runs_fold_to_a_count_with_context_around_each_change() -> None:
    old = numbered(100)
    new = numbered(100, {10: "line ten", 80: "line eighty"})
    out = folded(word_diff(old, new), context=3)
    assert [p.lines for p in out if isinstance(p, Fold)] == [7, 63, 16]
    shown = diff_html(out)
    assert shown.startswith('<span class="fold">… 7 unchanged lines</span>\nline 7\nline 8\n'
                            "line 9\nline <del>10</del><ins>ten</ins>\nline 11\nline 12\n"
                            'line 13\n<span class="fold">… 63 unchanged lines</span>\n'
                            "line 77\n")
    assert shown.endswith("line 83\n" '<span class="fold">… 16 unchanged lines</span>\n')
    assert "line 14\n" not in shown and "line 76\n" not in shown


def test_nothing_is_folded_that_would_hide_fewer_than_two_lines() -> None:
    old, new = numbered(9), numbered(9, {1: "one", 8: "eight"})
    parts = word_diff(old, new)
    assert folded(parts, context=3) == parts  # 6 lines between: 3 + 3, nothing to hide
    assert [p for p in folded(parts, context=2) if isinstance(p, Fold)] == [Fold(2)]
    assert folded(word_diff(numbered(1), numbered(1))) == [DiffPart(SAME, "line 0\n")]
    assert folded(word_diff(numbered(50), numbered(50))) == [Fold(50)]
    assert Fold(1).label == "… 1 unchanged line"


@given(TEXT, TEXT, st.integers(min_value=0, max_value=4))
def test_folding_keeps_every_change_and_counts_every_hidden_line(old: str, new: str,
                                                                 context: int) -> None:
    parts = word_diff(old, new)
    out = folded(parts, context)
    assert [p for p in out if not isinstance(p, Fold) and p.kind != SAME] == [
        p for p in parts if p.kind != SAME]
    same_lines = sum(len(p.text.splitlines()) for p in parts if p.kind == SAME)
    kept = sum(len(p.text.splitlines()) for p in out if not isinstance(p, Fold)
               and p.kind == SAME)
    assert kept + sum(p.lines for p in out if isinstance(p, Fold)) == same_lines
