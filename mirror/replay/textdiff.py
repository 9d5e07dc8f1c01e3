"""Word-level diff of two page texts, and its renderings: HTML, terminal, counts (pure)."""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

SAME, ADDED, REMOVED = "same", "added", "removed"
#: lines of unchanged text kept on each side of a change when the rest is folded
CONTEXT = 3
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


class Fold(NamedTuple):
    """A run of unchanged lines left out of a folded diff."""

    lines: int

    @property
    def label(self) -> str:
        return f"… {self.lines} unchanged line{'s' if self.lines != 1 else ''}"


def folded(parts: Sequence[DiffPart], context: int = CONTEXT) -> list[DiffPart | Fold]:
    """The changed passages of a diff, each with `context` unchanged lines before and after
    it; the unchanged lines between them (and before the first, after the last) become a
    Fold, unless it would hide fewer than two lines. A diff with no change is one Fold."""
    out: list[DiffPart | Fold] = []
    for i, part in enumerate(parts):
        if part.kind != SAME:
            out.append(part)
            continue
        lines = part.text.splitlines(keepends=True)
        # a change that ends mid-line: the rest of its line is not context; likewise the
        # start of the line where the next change begins
        head = 0 if i == 0 else context + (not parts[i - 1].text.endswith("\n"))
        tail = 0 if i == len(parts) - 1 else context + (not part.text.endswith("\n"))
        hidden = len(lines) - head - tail
        if hidden < 2:
            out.append(part)
            continue
        if head:
            out.append(DiffPart(SAME, "".join(lines[:head])))
        out.append(Fold(hidden))
        if tail:
            out.append(DiffPart(SAME, "".join(lines[-tail:])))
    return out


def diff_html(parts: Iterable[DiffPart | Fold]) -> str:
    """The diff as escaped HTML text: added words in <ins>, removed ones in <del>, folded
    lines as a line of their own (show it with white-space: pre-wrap to keep the lines)."""
    tags = {ADDED: ("<ins>", "</ins>"), REMOVED: ("<del>", "</del>"), SAME: ("", "")}
    return "".join(
        f'<span class="fold">{html.escape(part.label)}</span>\n' if isinstance(part, Fold)
        else f"{tags[part.kind][0]}{html.escape(part.text)}{tags[part.kind][1]}"
        for part in parts)


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
