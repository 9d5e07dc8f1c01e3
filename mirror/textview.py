"""Search results for the terminal and for scripts (`mirror search`, plain or --json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mirror.manifest.texts import Hit
from mirror.replay.textdiff import SAME, DiffPart, diff_terminal
from mirror.terminal import printable, printable_lines

if TYPE_CHECKING:
    from mirror.app.search import Found, Results

#: ANSI styles of a highlighted term on a terminal, and of the dimmed details line
BOLD_YELLOW, DIM, RESET = "\x1b[1;33m", "\x1b[2m", "\x1b[0m"


def highlight(text: str, marks: Sequence[tuple[int, int]], color: bool) -> str:
    """text with its marked spans in bold yellow (color), else as it is; control
    characters escaped (printable)."""
    if not color:
        return printable(text)
    out, at = [], 0
    for start, end in marks:
        out += [printable(text[at:start]), BOLD_YELLOW, printable(text[start:end]), RESET]
        at = end
    return "".join(out) + printable(text[at:])


def render_hits(hits: Sequence[Hit], query: str, *, color: bool, offset: int = 0) -> str:
    """One block per hit: rank and title, then URL, capture time and run, then snippet."""
    if not hits:
        return f"nothing found for {query!r}"
    blocks = []
    for n, hit in enumerate(hits, offset + 1):
        title = highlight(hit.title, hit.title_marks, color) or "(no title)"
        shared = f" · {hit.captures} captures" if hit.captures > 1 else ""
        blocks.append(_block(n, title, hit, shared, color))
    return "\n\n".join(blocks)


def _block(n: int, title: str, hit: Hit, extra: str, color: bool) -> str:
    details = (f"{printable(hit.url)}  ·  {hit.warc_date[:19].replace('T', ' ')} UTC  ·  "
               f"run {hit.run_id}{extra}")
    return (f"{n:>3}. {title}\n     {DIM if color else ''}{details}"
            f"{RESET if color else ''}\n     {highlight(hit.snippet, hit.marks, color)}")


def render_found(results: Results, *, color: bool) -> str:
    """The library's results (`mirror search WORDS`): a total, then a block per page with
    its site's name and how many variants of it were folded under it."""
    if not results.found:
        return f"nothing found for {printable(results.query)!r}"
    pages, sites = results.total, results.sites
    head = (f"{'at least ' if results.at_least else ''}{pages:,} page{'s' if pages != 1 else ''}"
            f" in {sites} site"
            f"{'s' if sites != 1 else ''}, best first"
            + (f" (the first {len(results.found)} shown)" if pages > len(results.found)
               else ""))
    blocks = [head]
    for n, found in enumerate(results.found, 1):
        hit = found.hit
        title = highlight(hit.title, hit.title_marks, color) or "(no title)"
        many = len(found.variants)
        variants = f" · +{many} variant{'s' if many != 1 else ''}" if many else ""
        blocks.append(_block(n, f"[{printable(found.site)}] {title}", hit, variants, color))
    return "\n\n".join(blocks)


def found_json(found: Found) -> dict[str, Any]:
    """A page of the library's results for --json: its hit, site and variants."""
    return {"site": found.site, "site_id": found.site_id, **hit_json(found.hit),
            "variants": list(found.variants)}


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
        pieces = printable_lines(text).split("\n")
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
