"""A URL's history page and the compare view of two of its captures (HTML, from their data)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from warcio.timeutils import timestamp_to_iso_date

from mirror.manifest.texts import PageCapture
from mirror.model import PageText
from mirror.replay.captures import Capture
from mirror.replay.exportpages import shown_url
from mirror.replay.origins import archived_frame
from mirror.replay.pages import (
    PAGE,
    attr,
    history_href,
    replay_path,
    run_timestamp,
    shown_time,
)
from mirror.replay.textdiff import DiffPart, Fold, diff_html, diff_stats, folded, word_diff

NO_TEXT = ("has no text to compare: it is not an HTML page, or it was archived before the "
           "text index existed (<code>mirror index --search SITE.toml</code> builds it)")


@dataclass(frozen=True)
class HistoryRow:
    """One capture in a URL's history."""

    timestamp: str  # 14 digits
    date: str  # ISO 8601, as the archive has it
    run: int | None
    status: int | None
    size: int  # payload bytes (record bytes when only the index is there)
    kind: str  # response | revisit | not-modified
    changed: bool  # differs from the capture before it
    capture_id: int | None = None  # in the manifest: what /_compare takes


def manifest_rows(captures: Sequence[PageCapture]) -> list[HistoryRow]:
    return [HistoryRow(run_timestamp(c.warc_date) or "", c.warc_date, c.run_id, c.status,
                       c.payload_length, c.record_type, c.changed, c.capture_id)
            for c in captures]


def index_rows(caps: Sequence[Capture], originals: Sequence[tuple[int | None, str]]
               ) -> list[HistoryRow]:
    """Rows from the index alone (an archive without a manifest); `originals` is each
    capture's (status, payload digest) as it replays."""
    rows, before = [], None
    for cap, (status, digest) in zip(caps, originals, strict=True):
        rows.append(HistoryRow(cap.timestamp, timestamp_to_iso_date(cap.timestamp), None,
                               status, cap.length, "revisit" if cap.is_revisit else "response",
                               (status, digest) != before))
        before = (status, digest)
    return rows


def capture_at_run(captures: Sequence[PageCapture], run: int) -> PageCapture | None:
    """The newest capture made in or before `run` (captures oldest first)."""
    made = [c for c in captures if c.run_id <= run]
    return made[-1] if made else None


def newest_first(rows: Sequence[HistoryRow]) -> list[tuple[HistoryRow, HistoryRow | None]]:
    """Each row (newest first) with the one before it in time (None for the first)."""
    ordered = list(reversed(rows))
    return [(row, ordered[i + 1] if i + 1 < len(ordered) else None)
            for i, row in enumerate(ordered)]


def compared_ids(row: HistoryRow, earlier: HistoryRow | None) -> tuple[int, int] | None:
    """The capture ids comparing a changed row with the one before it, when both have one."""
    if row.changed and earlier and earlier.capture_id and row.capture_id is not None:
        return earlier.capture_id, row.capture_id
    return None


def history_html(url: str, rows: Sequence[HistoryRow]) -> str:
    """Newest first, each linking to its replay; two radio columns pick a comparison."""
    comparable = sum(r.capture_id is not None for r in rows) >= 2
    body = [f"<h1>History of {html.escape(shown_url(url))}</h1>",
            f"<p>{len(rows)} capture{'s' if len(rows) != 1 else ''}, newest first. "
            '<a href="/">All pages</a></p>']
    if comparable:
        body.append('<form method="get" action="/_compare">')
    head = "<th>from</th><th>to</th>" if comparable else ""
    body.append(f'<div class="scroll"><table><tr>{head}<th>captured</th><th>run</th>'
                "<th>status</th><th>bytes</th><th>record</th><th>content</th></tr>")
    for i, (row, earlier) in enumerate(newest_first(rows)):
        body.append(_history_row(url, row, i, earlier, comparable))
    body.append("</table></div>")
    if comparable:
        body.append("<p><button>Compare the two</button></p></form>")
    return "\n".join(body)


def _history_row(url: str, row: HistoryRow, i: int, earlier: HistoryRow | None,
                 comparable: bool) -> str:
    picks = ""
    if comparable:
        picks = "".join(
            f'<td>{_radio(name, row.capture_id, checked)}</td>'
            for name, checked in (("a", i == 1), ("b", i == 0)))
    content = "changed" if row.changed else "same as before"
    ids = compared_ids(row, earlier)
    if row.changed and earlier is None:
        content = "first"
    elif ids:
        href = "/_compare?" + urlencode({"a": ids[0], "b": ids[1]})
        content = f'<a href="{attr(href)}">changed</a>'
    return (f"<tr>{picks}<td><a href=\"{attr(replay_path(row.timestamp, url))}\">"
            f"{html.escape(shown_time(row.timestamp))}</a></td><td>{row.run or ''}</td>"
            f'<td class="n">{row.status or ""}</td><td class="n">{row.size:,}</td>'
            f"<td>{html.escape(row.kind)}</td><td>{content}</td></tr>")


def _radio(name: str, capture_id: int | None, checked: bool) -> str:
    if capture_id is None:
        return ""
    label = "compare from" if name == "a" else "compare to"
    return (f'<input type="radio" name="{name}" value="{capture_id}" aria-label="{label}"'
            f'{" checked" if checked else ""}>')


@dataclass(frozen=True)
class Side:
    """One capture in a comparison."""

    capture_id: int
    url: str
    date: str
    run: int | None
    text: PageText | None

    @property
    def timestamp(self) -> str:
        return run_timestamp(self.date) or ""

    @property
    def shown(self) -> str:
        return shown_time(self.timestamp) if self.timestamp else self.date


def compare_html(old: Side, new: Side, whole: bool = False, content: str = "") -> str:
    """The word diff of the two captures' texts (the changed passages, or the `whole`
    text), then the two pages side by side (framed from `content`, the archived pages'
    origin, when there is one)."""
    same_url = old.url == new.url
    head = (f"<h1>Changes to {html.escape(shown_url(new.url))}</h1>" if same_url else
            f"<h1>{html.escape(shown_url(old.url))} and {html.escape(shown_url(new.url))}</h1>")
    sides = (f"<p>From {_side_link(old, not same_url)} to {_side_link(new, not same_url)}. "
             f'<a href="{attr(history_href(new.url))}">History</a></p>')
    switch = "/_compare?" + urlencode({"a": old.capture_id, "b": new.capture_id,
                                       **({} if whole else {"whole": "1"})})
    return head + sides + _text_diff(old, new, whole, switch) + _frames(old, new, content)


@dataclass(frozen=True)
class TextDiff:
    """The comparison of two captures' texts, ready to show."""

    missing: tuple[Side, ...]  # captures without a text (then nothing else is set)
    title_html: str = ""  # the title's diff, when the titles differ
    added: int = 0  # words
    removed: int = 0
    body_html: str = ""  # the text's diff: its changed passages, or the whole text
    folded: bool = False  # some unchanged lines were left out


def text_diff(old: Side, new: Side, whole: bool = False) -> TextDiff:
    """The word diff of two captures' texts; unless `whole`, unchanged runs of lines
    folded (textdiff.folded)."""
    missing = tuple(s for s in (old, new) if s.text is None)
    if old.text is None or new.text is None:
        return TextDiff(missing)
    title = ""
    if (old.text.title or "") != (new.text.title or ""):
        title = diff_html(word_diff(old.text.title or "", new.text.title or ""))
    parts = word_diff(old.text.body or "", new.text.body or "")
    added, removed = diff_stats(parts)
    shown: Sequence[DiffPart | Fold] = parts if whole else folded(parts)
    return TextDiff((), title, added, removed, diff_html(shown),
                    any(isinstance(p, Fold) for p in shown))


def _text_diff(old: Side, new: Side, whole: bool, switch: str) -> str:
    diff = text_diff(old, new, whole)
    if diff.missing:
        which = " and ".join(f"the capture of {html.escape(s.shown)}" for s in diff.missing)
        return f'<p class="note">Cannot compare the text: {which} {NO_TEXT}.</p>'
    out = []
    if diff.title_html:
        out.append(f'<p>Title: <span class="diff">{diff.title_html}</span></p>')
    if not diff.added and not diff.removed and not out:
        out.append("<p>The text is the same.</p>")
    else:
        out.append(f'<p class="stats">{diff.added} word{"s" if diff.added != 1 else ""} '
                   f"added, {diff.removed} removed.</p>")
    if whole or diff.folded:
        label = "Only the changed passages" if whole else "The whole text"
        out.append(f'<p><a href="{attr(switch)}">{label}</a></p>')
    out.append(f'<div class="diff">{diff.body_html}</div>')
    return "".join(out)


def _frames(old: Side, new: Side, content: str) -> str:
    frames = "".join(
        f'<figure><figcaption>{html.escape(s.shown)}</figcaption>'
        f"{archived_frame(content, replay_path(s.timestamp, s.url, PAGE), s.date)}"
        "</figure>" for s in (old, new))
    return f'<h2>Side by side</h2><div class="frames">{frames}</div>'


def _side_link(side: Side, with_url: bool) -> str:
    what = f"{shown_url(side.url)} at " if with_url else ""
    run = f" (run {side.run})" if side.run is not None else ""
    return (f'<a href="{attr(replay_path(side.timestamp, side.url))}">'
            f"{html.escape(what + side.shown)}</a>{run}")


#: added to the page's style: the diff keeps its lines; the frames share the width
COMPARE_STYLE = (
    "html body{max-width:none}.diff{white-space:pre-wrap;overflow-wrap:anywhere;"
    "border:1px solid #ddd;padding:.75em;background:#fafafa}"
    "ins{background:#c8f7c5;text-decoration:none}del{background:#fbd0d0}del+ins{margin-left:.3em}"
    ".frames{display:flex;gap:1em}.frames figure{flex:1;margin:0}"
    ".frames iframe{width:100%;height:70vh;border:1px solid #ccc}.note{color:#8a4b00}"
    ".fold{color:#666;font-style:italic;background:#eee}"
    "@media (max-width:640px){.frames{flex-direction:column}}"  # a phone: one above the other
)
