"""Whether a finished run archived what it was asked to: a verdict from its report's numbers (J2).

A run can end "complete" with exit 3 having stored nothing (its host refused every
connection): the exit code says some URLs failed, this says the run failed, and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from mirror.model import UNREACHABLE


@dataclass(frozen=True)
class RunNumbers:
    """What the verdict looks at, from a report (or the manifest before it is written)."""

    finished: bool  # an interrupted or running run is not judged: it has not ended
    pages: int  # pages stored: 2xx or 304 answers of page URLs
    failed: Sequence[tuple[str, str]]  # (url, why) of the run's failed URLs
    starts: Sequence[tuple[str, str | None]]  # (start URL, its problem or None)


@dataclass(frozen=True)
class Health:
    """`problem` is None for a healthy run; else what is wrong ("stored no page") and
    `reason`, the most common failure ("connection refused: 127.0.0.1:19150")."""

    problem: str | None = None
    reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.problem is not None

    def text(self) -> str:
        """'stored no page (connection refused: 127.0.0.1:19150)'; '' when healthy."""
        if self.problem is None:
            return ""
        return f"{self.problem} ({self.reason})" if self.reason else self.problem


def health(n: RunNumbers) -> Health:
    """A finished run failed when it stored no page, when its failed URLs outnumber its
    stored pages, or when none of its start URLs could be archived."""
    if not n.finished:
        return Health()
    reason = top_reason(n.failed) or _start_problem(n.starts)
    if n.pages == 0:
        return Health("stored no page", reason)
    if n.starts and all(problem for _, problem in n.starts):
        return Health("every start URL failed", _start_problem(n.starts) or reason)
    if len(n.failed) > n.pages:
        return Health(f"{len(n.failed)} URLs failed, {n.pages} "
                      f"page{'' if n.pages == 1 else 's'} stored", reason)
    return Health()


def top_reason(failed: Sequence[tuple[str, str]]) -> str | None:
    """The most common failure, with its host: 'connection refused: 127.0.0.1:19150'
    ('HTTP 503: example.org'); on a tie, the first in the list."""
    counts = Counter(f"{short_reason(why)}: {_host(url)}" for url, why in failed)
    return counts.most_common(1)[0][0] if counts else None


def short_reason(why: str) -> str:
    """A failure's reason without the words that name the host or repeat themselves:
    'connect: cannot connect to h:80: Connection refused' -> 'connection refused'."""
    why = why.removeprefix(f"{UNREACHABLE}: ").split(" (retries would", 1)[0]
    kind, _, rest = why.partition(": ")
    if kind == "connect" and rest:
        return rest.rsplit(": ", 1)[-1].strip().lower()
    return why


def start_problem(state: str, status: int | None, reason: str | None) -> str | None:
    """What kept a start URL from being archived (from its manifest row), or None: it
    failed, answered an error, or a rule skipped it."""
    if state == "failed":
        return reason or (f"HTTP {status}" if status else "failed")
    if state == "skipped":
        return f"skipped ({reason})" if reason else "skipped"
    if status is not None and status >= 400:
        return f"HTTP {status}"
    return None


def numbers_of(report: Mapping[str, object], finished: bool) -> RunNumbers:
    """The numbers of a report's JSON (reports/<run>.json); a report written before
    `pages_stored` counts its captures instead."""
    pages = report.get("pages_stored", report.get("captures"))
    failed = report.get("failed")
    starts = report.get("start_urls")
    return RunNumbers(
        finished, pages if isinstance(pages, int) else 0,
        [(str(f.get("url")), str(f.get("error"))) for f in failed if isinstance(f, dict)]
        if isinstance(failed, list) else [],
        [(str(s.get("url")), _text(s.get("problem"))) for s in starts if isinstance(s, dict)]
        if isinstance(starts, list) else [])


def _start_problem(starts: Sequence[tuple[str, str | None]]) -> str | None:
    """The first failed start URL's problem, with its host."""
    for url, problem in starts:
        if problem:
            return f"{short_reason(problem)}: {_host(url)}"
    return None


def _host(url: str) -> str:
    """'host[:port]' of a manifest URL (normalised: no default port, no user info)."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2] or url
    except ValueError:
        return url


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
