"""The frozen records that pass between the manifest, the crawler and the pure stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import IO, NamedTuple


class UrlState(StrEnum):
    """A URL in a run (manifest urls.state; the machine: manifest/schema.py)."""

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


class RecordType(StrEnum):
    """A WARC record's WARC-Type (WARC 1.1, section 6). A str: compares with what is read
    from a file. A capture's record_type in the manifest may also be "not-modified" (a
    manifest kind, not a WARC type: CaptureRow)."""

    WARCINFO = "warcinfo"
    RESPONSE = "response"
    RESOURCE = "resource"
    REQUEST = "request"
    METADATA = "metadata"
    REVISIT = "revisit"
    CONVERSION = "conversion"
    CONTINUATION = "continuation"


#: the records that are captures: a response, or a revisit of an earlier one
CAPTURE_TYPES = frozenset({RecordType.RESPONSE, RecordType.REVISIT})


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
    BROWSER = "browser"  # asked for by a page loaded in the browser (crawl/browserfetch.py)


#: the rule of the URLs sitemaps listed past the run's [scope] max_sitemap_urls, and of the
#: sitemaps not read once it was spent
SITEMAP_BUDGET = "sitemap-budget"


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


class NewUrl(NamedTuple):
    """A discovered URL after normalisation and the scope decision. A named tuple, not a
    dataclass: a page's links cross the helper pipe as plain tuples (parsehelper), and a
    tuple is rebuilt five times quicker than a frozen dataclass."""

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


# --- a crawl shared by several workers (manifest.schema: the lease state machine) ---------

@dataclass(frozen=True)
class HostLease:
    """A host slot leased by one worker: it alone fetches from the slot until `until`
    (database time, ms since the epoch) or until it releases it. `owner` and `epoch` fence
    what it writes under the lease (Manifest.captures.commit(..., lease=))."""

    host_id: int  # hosts.id
    site: str
    slot: int
    owner: str
    epoch: int
    acquired: int  # database time (ms) when it was leased
    until: int  # database time (ms) when it expires (then another worker may take it)


@dataclass(frozen=True)
class HostRow:
    """A host slot as the manifest holds it (times: database ms since the epoch)."""

    id: int
    site: str
    slot: int
    next_fetch_at: int
    block_until: int
    lease_owner: str | None
    lease_epoch: int
    lease_until: int


@dataclass(frozen=True)
class Worker:
    """A worker of a shared run (times: database ms since the epoch)."""

    id: str
    run_id: int
    started: int
    alive: int  # its last heartbeat
    silent: int  # ms since then, by the database's clock


@dataclass(frozen=True)
class FileRow:
    """A WARC file a worker writes: open -> closed -> uploaded, or lost."""

    name: str
    worker: str
    state: str  # open | closed | uploaded | lost
    size: int | None
    sha256: str | None


class Joined(NamedTuple):
    """The run a worker works on (Manifest.join_or_start_run): `started` when it made it."""

    run_id: int
    started: bool


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
    UPLOAD_PENDING = 5  # the archive is complete here; some files are not in its store yet
    DISK_FULL = 6  # the disk filled up: the run stopped, nothing lost; run again with space
    DAMAGED = 65  # `mirror verify` found problems (sysexits EX_DATAERR)
    LOCKED = 75
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        """What the code says, in a few words for a person ('some URLs failed'): the app,
        the fleet and `mirror list` show it; README's exit code table starts from it."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "complete", ExitCode.INTERNAL: "internal error",
    ExitCode.USAGE: "bad config or usage", ExitCode.FAILED_URLS: "some URLs failed",
    ExitCode.LIMIT: "stopped at a limit", ExitCode.DAMAGED: "damage found",
    ExitCode.UPLOAD_PENDING: "uploads pending", ExitCode.DISK_FULL: "disk full",
    ExitCode.LOCKED: "archive locked", ExitCode.INTERRUPTED: "interrupted",
}


def exit_meaning(code: int) -> str | None:
    """ExitCode.meaning for any exit status (None for one mirror does not end with)."""
    try:
        return ExitCode(code).meaning
    except ValueError:
        return None


#: the exit codes of a run that made a snapshot: complete, some URLs failed, a limit
#: reached, or any of these with uploads to its store still pending (`mirror push`)
SNAPSHOT_CODES = frozenset({ExitCode.OK, ExitCode.FAILED_URLS, ExitCode.LIMIT,
                            ExitCode.UPLOAD_PENDING})
#: the exit codes of a run that did not fail: a snapshot, or interrupted (the next resumes)
ENDED_WELL = SNAPSHOT_CODES | {ExitCode.INTERRUPTED}


class PageText(NamedTuple):
    """A page's title and visible text (extract.visible_text), for search and diffs."""

    title: str | None
    body: str | None


class Discovered(NamedTuple):
    """What discovery found in a stored response: where it redirects, the URLs it leads
    to, a note on the page (why it may need a browser to archive, or, starting with
    PARSE_BUDGET, why its links were partly or not read), and its text, if any (same parse
    as its links), and the robots directives it carries (web.robotsmeta: "noindex",
    "nofollow" or "noindex,nofollow"; None when none, or [scope] meta_robots is off)."""

    target: str | None
    links: list[NewUrl]
    note: str | None = None
    text: PageText | None = None
    robots: str | None = None


NOTHING = Discovered(None, [])

#: how the error of a URL failed with its host begins ("host unreachable: connection refused")
UNREACHABLE = "host unreachable"

#: the rule a page over its parse budget (time, nesting, size) is flagged under: its note
#: starts with it, and its links were partly or not extracted
PARSE_BUDGET = "parse-budget"
#: the rule a link is skipped under when the page it is on says nofollow (web.robotsmeta)
META_ROBOTS = "meta-robots"


@dataclass(frozen=True)
class RobotsCounts:
    """How many of a run's stored pages (2xx) said noindex and nofollow (meta robots,
    X-Robots-Tag), of how many; the same for its start pages (depth 0: the start URLs and
    where they redirect); and how many said nofollow but not noindex: content pages whose
    links the site asks not to follow (a wiki's edit and history pages say both).
    `enabled`: [scope] meta_robots was on."""

    pages: int = 0
    noindex: int = 0
    nofollow: int = 0
    start_pages: int = 0
    start_nofollow: int = 0
    nofollow_indexed: int = 0
    enabled: bool = True


def over_budget(why: str) -> Discovered:
    """What discovery answers for a page whose links could not be read within budget."""
    return Discovered(None, [], f"{PARSE_BUDGET}: {why}")


# --- what the WARC writer is given (built by fetch and the history stage) ---------------

@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange as sent and received, ready to archive (built by fetch)."""

    url: str
    method: str
    target: str  # request-target, e.g. "/a?b=c"
    request_headers: tuple[tuple[str, str], ...]
    http_version: str  # "1.1"
    status: int
    reason: str
    response_headers: tuple[tuple[str, str], ...]
    body: IO[bytes]  # content-coded bytes as received, chunk framing removed; position 0
    body_length: int
    truncated: str | None = None  # WARC-Truncated reason: "length", "time", "disconnect"
    peer_ip: str | None = None
    payload_digest: str = ""  # "sha1:<base32>" of the body as stored, when known


IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


@dataclass(frozen=True)
class Revisit:
    """Write a revisit record instead of a response: the payload is already archived."""

    profile: str  # IDENTICAL (block: the HTTP headers) or NOT_MODIFIED (empty block)
    refers_to: str  # WARC-Record-ID of the record holding the payload
    refers_to_uri: str
    refers_to_date: str
    payload_digest: str


# -- the progress of long work over a whole archive (an export, a verify) ------------------

#: on_progress(done, total), called by the work as it goes; the command line's bar
#: (cli/bar.py) shows the steps `work_stage` names, the app's jobs (app/work.py) done of total
WorkProgress = Callable[[int, int], None]


def work_stage(progress: WorkProgress | None, text: str, total: int | None = None) -> None:
    """Tell a progress display that can show steps which step begins, and its units when
    known; done/total then count within that step."""
    named = getattr(progress, "stage", None)
    if named is not None:
        named(text, total)
