"""Word-level diff of two page texts, and its renderings: HTML, terminal, counts (pure)."""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

SAME, ADDED, REMOVED = "same", "added", "removed"
#: a word, or the whitespace between words: kept as tokens of their own, so that a change
#: of words is marked without the spaces around it, and a changed line break shows
_TOKEN = re.compile(r"\s+|\S+")
_GREEN, _RED, _RESET = "\x1b[32m", "\x1b[31m", "\x1b[0m"


class DiffPart(NamedTuple):
    """A run of text that both sides share (same), or only the new (added) or old (removed)."""

    kind: str
    text: str


def word_diff(old: str, new: str) -> list[DiffPart]:
    """The parts that turn `old` into `new`: the same and removed parts joined give `old`,
    the same and added parts joined give `new`. Lines are matched first and only blocks of
    changed lines are compared word by word, so long texts with few changes stay fast."""
    return _merged(_tidied(_line_parts(old, new)))


def _line_parts(old: str, new: str) -> Iterator[DiffPart]:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            yield DiffPart(SAME, "".join(a[i1:i2]))
        elif tag == "replace":
            yield from _word_parts("".join(a[i1:i2]), "".join(b[j1:j2]))
        else:
            yield DiffPart(REMOVED, "".join(a[i1:i2]))
            yield DiffPart(ADDED, "".join(b[j1:j2]))


def _word_parts(old: str, new: str) -> Iterator[DiffPart]:
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            yield DiffPart(SAME, "".join(a[i1:i2]))
        else:
            yield DiffPart(REMOVED, "".join(a[i1:i2]))
            yield DiffPart(ADDED, "".join(b[j1:j2]))


def _opcodes(a: list[str], b: list[str]) -> Sequence[tuple[str, int, int, int, int]]:
    # autojunk: a token in more than 1% of a long text (a space, 'the') cannot start a
    # match, only extend one; without it a text of 100,000 characters takes minutes
    return difflib.SequenceMatcher(None, a, b, autojunk=True).get_opcodes()


def _tidied(parts: Iterable[DiffPart]) -> Iterator[DiffPart]:
    """Whitespace alone that is the same between two changes joins them: one change
    ("quick brown" -> "slow red") reads better than two with a space between."""
    pending = [p for p in parts if p.text]
    for i, part in enumerate(pending):
        between = 0 < i < len(pending) - 1 and pending[i - 1].kind != SAME \
            and pending[i + 1].kind != SAME
        if part.kind == SAME and between and not part.text.strip():
            yield DiffPart(REMOVED, part.text)
            yield DiffPart(ADDED, part.text)
        else:
            yield part


def _merged(parts: Iterable[DiffPart]) -> list[DiffPart]:
    """Each run of changes as one removed part then one added part; same parts joined."""
    out: list[DiffPart] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for kind, texts in ((REMOVED, removed), (ADDED, added)):
            if texts:
                out.append(DiffPart(kind, "".join(texts)))
                texts.clear()

    for part in parts:
        if part.kind == SAME:
            flush()
            if out and out[-1].kind == SAME:
                out[-1] = DiffPart(SAME, out[-1].text + part.text)
            else:
                out.append(part)
        else:
            (removed if part.kind == REMOVED else added).append(part.text)
    flush()
    return out


def diff_html(parts: Iterable[DiffPart]) -> str:
    """The diff as escaped HTML text: added words in <ins>, removed ones in <del> (show it
    with white-space: pre-wrap to keep the lines)."""
    tags = {ADDED: ("<ins>", "</ins>"), REMOVED: ("<del>", "</del>"), SAME: ("", "")}
    return "".join(f"{tags[kind][0]}{html.escape(text)}{tags[kind][1]}"
                   for kind, text in parts)


def diff_terminal(parts: Iterable[DiffPart], color: bool) -> str:
    """The diff for a terminal: added in green and removed in red, or without color as
    `git diff --word-diff=plain` writes it: {+added+} and [-removed-]."""
    if color:
        marks = {ADDED: (_GREEN, _RESET), REMOVED: (_RED, _RESET), SAME: ("", "")}
    else:
        marks = {ADDED: ("{+", "+}"), REMOVED: ("[-", "-]"), SAME: ("", "")}
    return "".join(f"{marks[kind][0]}{text}{marks[kind][1]}" for kind, text in parts)


def diff_stats(parts: Iterable[DiffPart]) -> tuple[int, int]:
    """(words added, words removed)."""
    counts = {ADDED: 0, REMOVED: 0, SAME: 0}
    for kind, text in parts:
        counts[kind] += len(text.split())
    return counts[ADDED], counts[REMOVED]
