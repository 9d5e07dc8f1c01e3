"""Search results for the terminal and for scripts (`mirror search`, plain or --json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirror.archive.manifest_text import Hit
from mirror.replay.textdiff import SAME, DiffPart, diff_terminal

#: ANSI styles of a highlighted term on a terminal, and of the dimmed details line
BOLD_YELLOW, DIM, RESET = "\x1b[1;33m", "\x1b[2m", "\x1b[0m"


def highlight(text: str, marks: Sequence[tuple[int, int]], color: bool) -> str:
    """text with its marked spans in bold yellow (color), else as it is."""
    if not color:
        return text
    out, at = [], 0
    for start, end in marks:
        out += [text[at:start], BOLD_YELLOW, text[start:end], RESET]
        at = end
    return "".join(out) + text[at:]


def render_hits(hits: Sequence[Hit], query: str, *, color: bool, offset: int = 0) -> str:
    """One block per hit: rank and title, then URL, capture time and run, then snippet."""
    if not hits:
        return f"nothing found for {query!r}"
    blocks = []
    for n, hit in enumerate(hits, offset + 1):
        title = highlight(hit.title, hit.title_marks, color) or "(no title)"
        shared = f" · {hit.captures} captures" if hit.captures > 1 else ""
        details = (f"{hit.url}  ·  {hit.warc_date[:19].replace('T', ' ')} UTC  ·  "
                   f"run {hit.run_id}{shared}")
        blocks.append(f"{n:>3}. {title}\n     {DIM if color else ''}{details}"
                      f"{RESET if color else ''}\n     "
                      f"{highlight(hit.snippet, hit.marks, color)}")
    return "\n\n".join(blocks)


def hit_json(hit: Hit) -> dict[str, Any]:
    """A hit for --json: marks as [start, end) pairs into title and snippet."""
    return {
        "url": hit.url, "title": hit.title, "title_marks": [list(m) for m in hit.title_marks],
        "captured": hit.warc_date, "run": hit.run_id, "status": hit.status,
        "snippet": hit.snippet, "marks": [list(m) for m in hit.marks],
        "score": round(hit.score, 4), "captures": hit.captures,
        "capture_id": hit.capture_id,
    }


def diff_lines(parts: Sequence[DiffPart], *, color: bool, context: int = 1) -> str:
    """A word diff for the terminal: only lines with a change, with `context` lines around
    them, and '…' where lines are left out (like `git diff --word-diff`)."""
    lines: list[list[DiffPart]] = [[]]
    for kind, text in parts:
        pieces = text.split("\n")
        for n, piece in enumerate(pieces):
            if n:
                lines.append([])
            if piece:
                lines[-1].append(DiffPart(kind, piece))
    changed = [i for i, line in enumerate(lines) if any(p.kind != SAME for p in line)]
    shown = sorted({j for i in changed for j in range(i - context, i + context + 1)
                    if 0 <= j < len(lines)})
    out: list[str] = []
    for before, i in zip([-1, *shown], shown, strict=False):
        if i > before + 1:
            out.append("…")
        out.append(diff_terminal(lines[i], color))
    if shown and shown[-1] < len(lines) - 1:
        out.append("…")
    return "\n".join(out)
