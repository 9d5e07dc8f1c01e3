"""A link-extraction helper process (`python -m mirror.crawl.parsehelper`), started by
mirror.crawl.parsepool: a config, then (id, item, page) requests on its stdin, answered in
order on its stdout, each a length-prefixed pickle. It has no event loop, and imports none:
a helper starts in the time its imports take, once per crawl and after every death."""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from mirror.config import SiteConfig
from mirror.crawl.discover import Discovery
from mirror.model import Discovered, NewUrl, PageText, UrlItem

LENGTH = struct.Struct("!Q")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
#: the crawler's pid, in the helper's environment
PARENT_VARIABLE = "MIRROR_PARSE_PARENT"


@dataclass(frozen=True)
class Page:
    """A response as link discovery sees it: what a helper process is sent."""

    status: int
    headers: dict[str, str]
    body: bytes | None  # None when Discovery.wants_body says the links are not in it
    truncated: str | None


def frame(message: object) -> bytes:
    """One message on a pipe: its length, then its pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(data)) + data


#: a Discovered as it crosses the pipe: its links and text as plain tuples
Wire = tuple[str | None, list[tuple[Any, ...]], str | None, tuple[Any, ...] | None,
             str | None]


def to_wire(found: Discovered) -> Wire:
    """What a helper answers for a page: pickle writes and reads a plain tuple of strings
    and ints in C, where a named tuple or a dataclass costs a Python call per link (half
    the time of a page's answer, both ways, with about 30 links)."""
    target, links, note, text, robots = found
    return (target, [tuple(x) for x in links], note, None if text is None else tuple(text),
            robots)


def request_wire(item: UrlItem, page: Page) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A request as it crosses the pipe: the item and the page as plain tuples (pickling
    and reading two frozen dataclasses took 128 k instructions a page, tuples 61 k)."""
    return ((item.id, item.url, item.site, item.depth, item.redirects_left, item.mode,
             item.tries, item.via), (page.status, page.headers, page.body, page.truncated))


def from_wire(wire: Wire) -> Discovered:
    target, links, note, text, robots = wire
    return Discovered(target, [NewUrl._make(x) for x in links], note,
                      None if text is None else PageText._make(text), robots)


class _Collect(logging.Handler):
    """Keeps log records for the crawler, which writes them where its own go."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[int, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.name, record.getMessage()))

    def take(self) -> list[tuple[int, str, str]]:
        records, self.records = self.records, []
        return records


def run_helper(stdin: IO[bytes], stdout: IO[bytes],
          make: Callable[[SiteConfig], Discovery] | None = None) -> int:
    """The helper's loop: a config, then (id, item, page) requests until end of input."""
    def read() -> Any:
        head = stdin.read(LENGTH.size)
        if len(head) < LENGTH.size:
            return None
        return pickle.loads(stdin.read(LENGTH.unpack(head)[0]))

    def write(message: object) -> None:
        stdout.write(frame(message))
        stdout.flush()

    cfg = read()
    if cfg is None:
        return 0
    collect = _Collect()
    root = logging.getLogger()
    root.addHandler(collect)
    root.setLevel(logging.INFO)
    discovery = (make or _discovery)(cfg)
    write("ready")
    while (request := read()) is not None:
        request_id, fields, (status, headers, body, truncated) = request
        item = UrlItem(*fields)
        try:
            result: object = to_wire(discovery.discover(item, status, body, truncated, headers))
            ok = True
        except Exception as exc:  # report it: the crawler keeps the page, without links
            logging.getLogger(__name__).exception("link extraction failed on %s", item.url)
            result, ok = f"{type(exc).__name__}: {exc}", False
        write((request_id, ok, result, collect.take()))
    return 0


def _discovery(cfg: SiteConfig) -> Discovery:
    from mirror.crawl.scope import Scope

    return Discovery(cfg, Scope.from_config(cfg))


def main() -> int:
    # Ctrl-C reaches the whole process group, and systemd's stop the whole cgroup: the
    # crawler stops gracefully and still needs its helpers for the pages in flight. They
    # exit when the crawler closes their input, or dies (end of input too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    from mirror.crawl import procgc
    procgc.settle()
    try:
        return run_helper(sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, ConnectionResetError):  # the crawler is gone (kill -9): so are we
        # nothing left to say, and nobody to say it to: no traceback, no flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _die_with_parent() -> None:
    """On Linux, the kernel kills this helper when the crawler dies (kill -9 included), so
    no orphan goes on parsing a page nobody waits for; elsewhere it ends at its next read
    or write."""
    if not sys.platform.startswith("linux"):
        return
    try:  # (the signal follows the thread that started it: the crawler's event loop)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: it ends at its next read or write
        return
    if os.environ.get(PARENT_VARIABLE, str(os.getppid())) != str(os.getppid()):
        raise SystemExit(0)  # the crawler died before the call: nobody waits for answers


if __name__ == "__main__":
    raise SystemExit(main())
