"""The frozen records that pass between the manifest, the crawler and the pure stages."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import NamedTuple


class UrlState(StrEnum):
    """A URL in a run (manifest urls.state; the machine: archive/manifest_schema.py)."""

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class RunState(StrEnum):
    """A run (manifest runs.state)."""

    RUNNING = "running"
    COMPLETE = "complete"
    LIMIT = "limit"
    INTERRUPTED = "interrupted"
    ABANDONED = "abandoned"


#: the states of a run that the next `mirror run` resumes
UNFINISHED = frozenset({RunState.RUNNING, RunState.INTERRUPTED})


class Mode(StrEnum):
    """How a URL is crawled."""

    PAGE = "page"  # fetched, and its links followed
    REQUISITE = "requisite"  # fetched for a page's display, only its own requisites followed


class Via(StrEnum):
    """How a URL was found."""

    START = "start"
    LINK = "link"
    REQUISITE = "requisite"
    REDIRECT = "redirect"
    ROBOTS = "robots"  # a robots.txt, fetched by the robots gate only
    SITEMAP = "sitemap"  # named by a robots.txt or a sitemap index, or /sitemap.xml


class LinkKind(StrEnum):
    """What a link is to the page that has it."""

    LINK = "link"  # navigation: followed within scope and depth
    REQUISITE = "requisite"  # needed to render the page: fetched with it
    REDIRECT = "redirect"  # a 3xx's Location


@dataclass(frozen=True)
class Run:
    id: int
    started_at: str
    finished_at: str | None
    state: str
    config_digest: str
    exit_code: int | None


@dataclass(frozen=True)
class UrlItem:
    """A leased URL with what the crawler needs to fetch it."""

    id: int
    url: str
    site: str
    depth: int
    redirects_left: int
    mode: str
    tries: int
    via: str = Via.LINK  # how it was found (Via)


@dataclass(frozen=True)
class NewUrl:
    """A discovered URL after normalisation and the scope decision."""

    url: str
    site: str
    depth: int
    redirects_left: int
    mode: str  # page | requisite | "" when skipped
    via: str
    kind: str  # link kind from the referrer: link | requisite | redirect
    skip_reason: str | None = None
    lastmod: str | None = None  # a page's <lastmod> in the sitemap that lists it, as written


@dataclass(frozen=True)
class CaptureRow:
    warc_date: str
    record_id: str
    filename: str
    offset: int
    length: int
    req_offset: int
    req_length: int
    status: int
    mime: str
    payload_digest: str
    payload_length: int
    etag: str | None
    last_modified: str | None
    location: str | None
    truncated: str | None
    record_type: str = "response"  # response | revisit | not-modified
    original_id: int | None = None  # for revisits: the capture holding the payload


@dataclass(frozen=True)
class Original:
    """A capture whose record holds a payload, as a revisit refers to it."""

    id: int
    url: str
    warc_date: str
    record_id: str
    payload_digest: str
    filename: str
    offset: int
    mime: str
    status: int
    run_id: int


@dataclass(frozen=True)
class Previous:
    """The latest capture of a URL in an earlier run: validators and where its payload is."""

    status: int
    etag: str | None
    last_modified: str | None
    truncated: str | None
    original: Original


@dataclass(frozen=True)
class Progress:
    """A crawl's live numbers at one moment (`Crawler.progress()`), for a progress display
    and the archive's progress.json. Counts are this process's, except `queued`."""

    run_id: int
    done: int  # URLs stored (any status, 4xx too)
    queued: int  # URLs of the run still to fetch: pending, waiting for a retry, in flight
    failed: int  # URLs given up on
    retried: int  # tries that failed and will be tried again
    bytes: int  # body bytes stored
    elapsed: float  # seconds this process has worked
    held_back: int  # hosts held back by a 429/503 backoff or a long robots.txt Crawl-delay


class ExitCode(IntEnum):
    """How `mirror` ends (README: exit codes)."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    FAILED_URLS = 3
    LIMIT = 4
    DAMAGED = 65  # `mirror verify` found problems (sysexits EX_DATAERR)
    LOCKED = 75
    INTERRUPTED = 130


class PageText(NamedTuple):
    """A page's title and visible text (extract.visible_text), for search and diffs."""

    title: str | None
    body: str | None


class Discovered(NamedTuple):
    """What discovery found in a stored response: where it redirects, the URLs it leads
    to, a note on the page (why it may need a browser to archive), and its text, if any
    (same parse as its links)."""

    target: str | None
    links: list[NewUrl]
    note: str | None = None
    text: PageText | None = None


NOTHING = Discovered(None, [])
