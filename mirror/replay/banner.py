"""The frame page: a slim banner about the capture shown, and the archived page in a frame."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from warcio.timeutils import timestamp_to_iso_date

from mirror.replay.captures import Capture
from mirror.replay.exportpages import VIEWPORT, shown_url
from mirror.replay.origins import archived_frame
from mirror.replay.pages import PAGE, attr, history_href, replay_path, shown_time

#: served by this server (pages.FRAME_CSP allows scripts from 'self' only)
BANNER_JS = "/_mirror/banner.js"
#: the banner script asks here what a frame address shows (?path=/<ts>mp_/<url>)
CAPTURE_INFO = "/_mirror/capture"

FRAME_ID = ' id="mirror-frame" name="mirror-frame"'
_STYLE = (
    "html,body{height:100%;margin:0}body{display:flex;flex-direction:column}"
    "#mirror-banner{display:flex;align-items:center;gap:.9em;padding:3px 10px;"
    "font:13px/1.5 system-ui,sans-serif;color:#222;background:#eef1f5;"
    "border-bottom:1px solid #c8ced6;white-space:nowrap;overflow:hidden}"
    "#mirror-banner a{color:#0b57d0;text-decoration:none}"
    "#mirror-banner a:hover{text-decoration:underline}"
    "#mirror-banner a:not([href]){color:#9aa0a6}"
    "#mirror-banner .home{font-weight:600;color:#222}"
    "#mb-url{flex:1 1 auto;min-width:4em;overflow:hidden;text-overflow:ellipsis;color:#444}"
    "#mb-run{background:#dde3ea;border-radius:3px;padding:0 .4em}"
    "#mb-run:empty{display:none}"
    "#mirror-banner input{font:inherit;width:11em;padding:0 .3em;border:1px solid #c8ced6;"
    "border-radius:3px}"
    "#mirror-frame{flex:1 1 auto;width:100%;border:0}"
    # a phone or a narrow window: the address on a line of its own, the rest wraps
    "@media (max-width:900px){#mirror-banner{flex-wrap:wrap;gap:0 .8em;padding:3px 8px}"
    "#mb-url{flex-basis:100%}"
    "#mirror-banner form{flex:1 1 9em}#mirror-banner input{width:100%}}"
)


@dataclass(frozen=True)
class CaptureInfo:
    """What the banner says of one capture."""

    url: str
    timestamp: str  # the capture's own, 14 digits
    status: int | None
    run: int | None  # the run that made it (None: no manifest says)
    previous: str | None  # timestamps of the URL's capture before and after it
    next: str | None
    captures: int  # how many captures the URL has
    title: str | None

    @property
    def iso(self) -> str:
        return str(timestamp_to_iso_date(self.timestamp))

    def top(self) -> str:
        return replay_path(self.timestamp, self.url)

    def frame(self) -> str:
        return replay_path(self.timestamp, self.url, PAGE)

    def as_json(self) -> dict[str, object]:
        """For the banner script, which shows these as text and links."""
        near = {name: replay_path(ts, self.url) if ts else None
                for name, ts in (("previous", self.previous), ("next", self.next))}
        return {"url": self.url, "shown": shown_url(self.url), "timestamp": self.timestamp,
                "time": shown_time(self.timestamp), "iso": self.iso, "run": _run_label(self.run),
                "status": self.status, "top": self.top(), "frame": self.frame(), **near,
                "history": history_href(self.url), "captures": _history_label(self.captures),
                "title": self.title}


def capture_info(caps: Sequence[Capture], cap: Capture, status: int | None, run: int | None,
                 title: str | None) -> CaptureInfo:
    """The banner of `cap`, one of `caps` (its URL's captures, oldest first)."""
    before = [c.timestamp for c in caps if c.timestamp < cap.timestamp]
    after = [c.timestamp for c in caps if c.timestamp > cap.timestamp]
    return CaptureInfo(cap.url, cap.timestamp, status, run, before[-1] if before else None,
                       after[0] if after else None, len(caps), title)


def frame_page(info: CaptureInfo, site_name: str, library: str = "", content: str = "") -> bytes:
    """The banner, then the archived page (its mp_ address) in a frame: from `content`
    (the archived pages' origin, origins.py) in a sandbox, or else from here. With
    `library` (the app's page of the site, when `mirror ui` started this server), the
    banner's first link goes back there."""
    title = info.title or shown_url(info.url)
    back = (f'<a id="mb-library" href="{attr(library)}" target="_top" title="Back to the '
            'site in the mirror library">◀ library</a>' if library else "")
    banner = (
        f'<header id="mirror-banner">{back}<a class="home" href="/" '
        'title="The archive\'s pages">'
        f"{html.escape(site_name)} archive</a>"
        f'<span id="mb-url" title="{attr(info.url)}">{html.escape(shown_url(info.url))}</span>'
        f'<span>captured <time id="mb-time" datetime="{attr(info.iso)}">'
        f"{html.escape(shown_time(info.timestamp))}</time></span>"
        f'<span id="mb-run">{html.escape(_run_label(info.run))}</span>'
        f"{_near('mb-prev', '◀ previous', info.previous, info.url)}"
        f"{_near('mb-next', 'next ▶', info.next, info.url)}"
        f'<a id="mb-history" href="{attr(history_href(info.url))}">'
        f"{html.escape(_history_label(info.captures))}</a>"
        '<form action="/_search" method="get" role="search"><input type="search" name="q" '
        'placeholder="Search the archive" aria-label="Search the archive"></form></header>')
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8">{VIEWPORT}'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f'<script src="{BANNER_JS}" defer></script></head>\n<body>\n{banner}\n'
        f"{archived_frame(content, info.frame(), 'The archived page', FRAME_ID)}"
        "\n</body></html>\n").encode()


def _near(element_id: str, label: str, timestamp: str | None, url: str) -> str:
    href = f' href="{attr(replay_path(timestamp, url))}"' if timestamp else ""
    return f'<a id="{element_id}"{href}>{label}</a>'


def _run_label(run: int | None) -> str:
    return f"run {run}" if run is not None else ""


def _history_label(captures: int) -> str:
    return f"history ({captures} capture{'s' if captures != 1 else ''})"
