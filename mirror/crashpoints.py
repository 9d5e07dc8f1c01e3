"""Crash points: the named steps of the durability order, where a test can stop the process.

Every step at which a process can die with something half done is named here and marked in
the code with `reached(step)`. Nothing happens there unless a hook is set: in production the
hook is None and a mark costs one global lookup. Tests set a hook in two ways:

- `MIRROR_CRASH_AT=STEP[/KIND][#N]` in the environment: the process exits at once
  (`os._exit`, like SIGKILL: no buffers flushed, no cleanup) the N-th time (default 1) it
  reaches STEP while storing a capture of KIND (default: any kind);
- `hook = callable` in-process: the callable is told (step, kind) at every mark, e.g. to copy
  the archive folder as the disk holds it then (what a SIGKILL at that moment would leave).

The kind is the kind of capture being stored ("response", "redirect", "revisit", ...: see
`mirror.crawl.history.capture_kind`), set by the crawler in `label` while a hook is set;
"group" for "group:inside", which is reached only by a group of more than one capture.
Captures are committed in groups (mirror.crawl.store.CaptureStore): "group:between" and a
capture's "append:*" steps inside a group are crashes between two captures of one group.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

#: the steps, in the order a capture (then a file, then a run) passes them
STEPS = (
    "run:started",          # a new run and its start URLs are committed, nothing fetched
    "group:between",        # captures of a group are flushed, uncommitted; the next one's
                            # records are about to be appended to the same group
    "append:before",        # a capture's records are about to be appended
    "append:between",       # the response (or revisit) record is appended, not its request
    "append:unflushed",     # both records appended, not yet flushed to the OS
    "commit:before",        # records flushed, the capture waits in its group (no commit)
    "commit:inside",        # a capture's rows written in its group's transaction, no COMMIT
    "group:inside",         # all rows of a group of several written, before its COMMIT
    "commit:after",         # the group's transaction committed (marked for each capture)
    "texts:inside",         # inside the transaction adding page texts to the search index
    "open:unflushed",       # a new .open file holds its warcinfo record, not yet flushed
    "rotate:before-rename",  # a full file is flushed and closed, still .open
    "rotate:after-rename",  # ... renamed to its final name
    "recover:cut",          # start-up repair cut a torn tail off an .open file
    "recover:before-close",  # captures of an .open file adopted, the file not yet renamed
    "file:before-rename",   # index.cdxj or a report written to a temporary file, not renamed
    "run:before-finish",    # the index is written, the run not yet marked finished
)
#: the steps only a worker of a shared run (`mirror run --db`) passes, besides the
#: capture's and the file's above (mirror.crawl.store, mirror.crawl.sharedfiles)
SHARED_STEPS = (
    "fenced:after-undo",    # a commit found its host lease lost: the record is cut off again
    "upload:before",        # a closed file is recorded closed (size, SHA-256), not uploaded
    "upload:before-mark",   # ... uploaded, not yet marked uploaded in the manifest
)
#: the steps of a page loaded in the browser ([browser]; mirror.crawl.urlwork and
#: mirror.crawl.browserfetch), besides the captures' steps its requisites pass; the kind
#: is "page" or "requisite"
BROWSER_STEPS = (
    "render:before",        # a page fetched and its links read, about to be loaded
    "render:requisite",     # a requisite the page asked for is committed, the page loading
    "render:after",         # the page rendered, its requisites committed, itself not stored
)
#: the points where a worker of a shared run may be frozen (SIGSTOP, a paused VM) with a
#: host lease in hand, besides "commit:before" (a response in, its commit not made):
#: MIRROR_FREEZE_AT=STEP[#N] stops the process there with SIGSTOP (tests/test_fleet_freeze)
FREEZE_STEPS = (
    "lease:taken",          # a host lease was just taken (mirror.crawl.sharedfrontier)
    "send:checked",         # the lease was checked against the database, the request not sent
    "heartbeat:before",     # the worker is about to write its heartbeat
)
#: the steps of `mirror prune` (mirror.upkeep.prune), in the order it passes them; a
#: prune that stops at any of them is finished or undone by the next `mirror run`, `mirror
#: prune` or `mirror verify` (index.cdxj is written through "file:before-rename" too)
PRUNE_STEPS = (
    "prune:journaled",      # the journal is committed (the files to write, the runs to drop)
    "prune:written",        # a new WARC file is written and fsynced under its temporary name
    "prune:switch-inside",  # inside the manifest transaction that drops the runs, before COMMIT
    "prune:switched",       # ... committed: from here on the prune goes forward
    "prune:renamed",        # a new WARC file has its final name
    "prune:indexed",        # index.cdxj is written again for the new files
    "prune:deleted",        # an old WARC file is deleted
)
#: the exit status of a process stopped by MIRROR_CRASH_AT (as a shell reports SIGKILL)
EXIT_STATUS = 137
ENV = "MIRROR_CRASH_AT"
FREEZE_ENV = "MIRROR_FREEZE_AT"

hook: Callable[[str, str], None] | None = None
label = ""  # the kind of capture being stored (set by the crawler only while a hook is set)


def reached(step: str, kind: str = "") -> None:
    """Mark a crash point. `kind` names what is being written when it is not a capture."""
    if hook is not None:
        hook(step, kind or label)


class CrashSpec:
    """STEP[/KIND][#N]: the N-th time STEP is reached for a capture of KIND (or any)."""

    def __init__(self, text: str) -> None:
        rest, _, nth = text.partition("#")
        self.step, _, self.kind = rest.partition("/")
        known = STEPS + PRUNE_STEPS + SHARED_STEPS + BROWSER_STEPS + FREEZE_STEPS
        if self.step not in known:
            raise ValueError(f"{ENV} or {FREEZE_ENV}={text!r}: unknown step {self.step!r}; "
                             "one of " + ", ".join(known))
        self.nth = int(nth) if nth else 1
        self.seen = 0

    def matches(self, step: str, kind: str) -> bool:
        if step != self.step or (self.kind and kind != self.kind):
            return False
        self.seen += 1
        return self.seen == self.nth


def exit_at(spec: CrashSpec) -> Callable[[str, str], None]:
    def stop(step: str, kind: str) -> None:
        if spec.matches(step, kind):
            os._exit(EXIT_STATUS)  # no flush, no finally, no atexit: what SIGKILL leaves
    return stop


def freeze_at(spec: CrashSpec) -> Callable[[str, str], None]:
    """Stop the process with SIGSTOP there (what a paused VM or a stopped job is); it goes
    on where it stopped when someone sends SIGCONT."""
    def stop(step: str, kind: str) -> None:
        if spec.matches(step, kind):
            os.kill(os.getpid(), signal.SIGSTOP)
    return stop


class Occurrences:
    """Counts (step, kind) as they are reached, for hooks that act on the first few."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def next(self, step: str, kind: str) -> int:
        self.counts[step, kind] += 1
        return self.counts[step, kind]


if os.environ.get(ENV):  # a test asked this process to die at a crash point
    hook = exit_at(CrashSpec(os.environ[ENV]))
elif os.environ.get(FREEZE_ENV):  # ... or to freeze at a freeze point
    hook = freeze_at(CrashSpec(os.environ[FREEZE_ENV]))
