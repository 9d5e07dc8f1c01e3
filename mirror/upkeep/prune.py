"""`mirror prune`: drop the runs the retention policy does not keep and free their bytes.

What goes. The policy (mirror.upkeep.retention, borg's rules) names the runs to drop. Their
captures leave the manifest, with their records, page texts, sessions, notes, errors and
reports; the WARC files that hold those records are written again without them
(mirror.upkeep.pruneplan, prunefile), and a file left with nothing is deleted. A dropped run's
response that a kept revisit refers to (its original_id: the payload it replays) stays,
record and capture row both, under the run id it was stored by: every kept run then replays
from the very bytes it replayed before, with no record rewritten. The other way, making the
first kept revisit a response that holds the payload, would rewrite records and re-point
every later revisit, and a server-not-modified revisit replays its original's headers, so
its replay could change; keeping the original is simpler and exact. Such a capture belongs
to no listed run (its run's row is gone); the next prune drops it once no kept revisit
needs it. Files of kept runs are never touched (a run writes its own files).

In what order (A4: old state or new state, nothing between), every step a crash point:

1. plan, under the archive lock, from the manifest alone;
2. the journal, one transaction: meta 'prune' = the files to write and delete, the runs;
3. each new file written beside the old ones under a temporary name that no reader lists
   (`.<new name>.prune`), fsynced; the folder fsynced;
4. the switch, one durable transaction (synchronous=FULL): captures dropped, the kept ones
   of rewritten files moved to their new names and offsets, texts and latest_texts
   updated, runs deleted, the journal marked switched. Before it, the old state is whole
   (old files, old manifest, old index); after it, the prune only goes forward;
5. the new files renamed to their final names (the folder fsynced), index.cdxj written
   again from the manifest, the old files deleted, the dropped runs' reports deleted;
6. the journal removed; then, when the prune freed a quarter of the manifest, VACUUM.

A prune stopped before 4 is undone (its temporary files deleted) and one stopped after 4 is
finished (steps 5 and 6, each harmless to repeat) by the next `mirror prune`, `mirror run`
(recovery.remove_temporaries) or `mirror verify` (finish_interrupted_prune). A replay
server reading the folder meanwhile never reads at a wrong offset: the old index names
only old files, which stay until the new index is written. In between it may find a kept
record twice (a new file, not indexed yet, beside its old one: the same bytes), and until
the old files are deleted, dropped records in them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Protocol

from mirror import crashpoints
from mirror.archive import index
from mirror.archive.fsutil import fsync_dir
from mirror.archive.lock import ArchiveLock
from mirror.archive.warcwriter import next_serial
from mirror.archive.workerfolder import no_manifest
from mirror.layout import ArchiveLayout
from mirror.manifest.pruning import PruneTargets
from mirror.manifest.reader import ManifestReader
from mirror.manifest.writer import Manifest
from mirror.model import Run
from mirror.upkeep.prunefile import head_length, temp_name, write_pruned
from mirror.upkeep.pruneplan import (
    FileChange,
    Member,
    Move,
    PruneError,
    file_changes,
    freed,
)
from mirror.upkeep.retention import RULES, Retention, runs_to_keep

__all__ = ["PruneError", "PruneResult", "finish_interrupted_prune", "prune_site"]

WRITING, SWITCHED = "writing", "switched"


class _Site(Protocol):
    @property
    def output_dir(self) -> Path: ...


class SiteWithRetention(Protocol):
    """What prune reads of a SiteConfig: where the archive is, and [retention]."""

    @property
    def site(self) -> _Site: ...
    @property
    def retention(self) -> object: ...


@dataclass(frozen=True)
class Journal:
    """What a prune under way is doing, in the manifest (meta 'prune')."""

    state: str  # writing (before the switch) | switched
    files: tuple[tuple[str, str | None], ...]  # (old name, new name or None: deleted)
    runs: tuple[int, ...]

    def dumps(self) -> str:
        return json.dumps({"state": self.state, "files": self.files, "runs": self.runs})

    @classmethod
    def loads(cls, text: str) -> Journal:
        data = json.loads(text)
        return cls(data["state"], tuple((old, new) for old, new in data["files"]),
                   tuple(data["runs"]))


@dataclass(frozen=True)
class PruneResult:
    """What a prune dropped (or, dry, would drop) and what it freed."""

    policy: Retention
    kept: tuple[tuple[Run, str], ...]  # each kept run, with why
    dropped: tuple[Run, ...]
    captures: int  # captures dropped
    held: int  # captures of dropped runs kept: kept revisits replay their payload
    changes: tuple[FileChange, ...]
    new_sizes: dict[str, int]  # the rewritten files' sizes (dry run: about)
    dry_run: bool
    seconds: float = 0.0
    recovered: str | None = None  # what was done first about an interrupted prune
    beside: int = 0  # bytes the index and the manifest shrank by (not known in a dry run)

    @property
    def warc_freed(self) -> int:
        return freed(self.changes, self.new_sizes)

    @property
    def freed_bytes(self) -> int:
        """WARC files, index and manifest: what the archive folder lost."""
        return self.warc_freed + self.beside

    @property
    def dropped_runs(self) -> tuple[int, ...]:
        return tuple(r.id for r in self.dropped)

    def lines(self) -> list[str]:
        """What `mirror prune` prints: the policy, each run kept (why) or dropped, each
        file rewritten or deleted, and the bytes freed."""
        would = "would " if self.dry_run else ""
        out = [f"retention: {self.policy.describe()}"
               + (" (dry run: nothing is changed)" if self.dry_run else "")]
        out += [self.recovered] if self.recovered else []
        verdicts = [(r, f"keep ({why})") for r, why in self.kept] + \
            [(r, f"{would}drop") for r in self.dropped]
        out += [f"run {r.id:<5} {r.started_at:<21} {r.state:<11} {verdict}"
                for r, verdict in sorted(verdicts, key=lambda v: v[0].id)]
        if not self.dropped:
            return [*out, "nothing to drop"]
        if self.held:
            out.append(f"{self.held} payload records of dropped runs stay: kept revisits "
                       "replay them")
        for c in self.changes:
            if c.new is None:
                out.append(f"{would}delete  {c.old} ({c.old_size:,} bytes)")
            else:
                out.append(f"{would}rewrite {c.old} -> {c.new} ({c.old_size:,} -> "
                           f"{self.new_sizes[c.new]:,} bytes)")
        runs = f"{len(self.dropped)} run{'s' if len(self.dropped) != 1 else ''}"
        if self.dry_run:
            out.append(f"would drop {runs}, {self.captures} captures; "
                       f"would free about {self.warc_freed:,} bytes of WARC files, and "
                       "some of the index and the manifest")
        else:
            rest = (f"{self.beside:,} of the index and the manifest" if self.beside >= 0 else
                    f"the index and the manifest grew by {-self.beside:,}: SQLite reuses "
                    "its freed pages")
            out.append(f"dropped {runs}, {self.captures} captures; freed "
                       f"{self.freed_bytes:,} bytes ({self.warc_freed:,} of WARC files; "
                       f"{rest}) in {self.seconds:.1f}s")
        return out


def prune_site(cfg: SiteWithRetention, dry_run: bool = False, *,
               retention: Retention | None = None, tz: tzinfo | None = None) -> PruneResult:
    """Drop the runs the site's [retention] (or `retention`) does not keep, under the
    archive's lock (take none around it). PruneError when no rule is set or the archive
    cannot be pruned as it is; ArchiveLocked when a run holds the lock."""
    policy = retention or Retention.of(cfg.retention)
    if not policy.is_set():
        raise PruneError("no retention rule is set: add " + ", ".join(
            f"keep_{rule}" for rule in RULES) + " to the site file's [retention] section "
            "(or give --keep-last N, --keep-daily N, ...)")
    folder = ArchiveLayout(cfg.site.output_dir)
    if not folder.manifest.exists():
        raise PruneError(no_manifest(folder.manifest))
    started = time.monotonic()
    with ArchiveLock(folder.root):
        if dry_run:
            reader = ManifestReader(folder.manifest)
            try:
                if reader.prune.journal() is not None:
                    raise PruneError("an interrupted prune is not finished yet: `mirror "
                                     "prune` (without --dry-run) finishes it first")
                return _plan(reader, folder, policy, tz, dry_run=True, recovered=None)
            finally:
                reader.close()
        before = _beside(folder)
        manifest = Manifest(folder.manifest, durable=True)
        try:
            recovered = _resume(manifest, folder)
            plan = _plan(manifest, folder, policy, tz, dry_run=False, recovered=recovered)
            sizes = _execute(plan, manifest, folder)
            if plan.dropped:
                manifest.prune.compact()
        finally:
            manifest.close()
        beside = before - _beside(folder) if plan.dropped else 0
    return PruneResult(plan.policy, plan.kept, plan.dropped, plan.captures, plan.held,
                       plan.changes, sizes, False, time.monotonic() - started, recovered,
                       beside)


def _beside(folder: ArchiveLayout) -> int:
    """Bytes of the index and the manifest (with its WAL): what shrinks beside the WARCs."""
    paths = (folder.index, folder.manifest, folder.manifest.with_name(
        folder.manifest.name + "-wal"))
    return sum(p.stat().st_size for p in paths if p.exists())


def _plan(reader: ManifestReader, folder: ArchiveLayout, policy: Retention,
          tz: tzinfo | None, *, dry_run: bool, recovered: str | None) -> PruneResult:
    """The prune as it would go, from the manifest (estimated sizes)."""
    runs = reader.runs.all()
    keep = runs_to_keep(runs, policy.keep_last, policy.keep_daily, policy.keep_weekly,
                        policy.keep_monthly, tz=tz)
    dropped = tuple(r for r in runs if r.id not in keep)
    targets = reader.prune.targets([r.id for r in dropped]) if dropped \
        else PruneTargets(0, 0, {}, 0)
    if targets.revisits_without_original:
        raise PruneError(f"{targets.revisits_without_original} revisits of kept runs do not "
                         "name the capture that holds their payload; `mirror verify` first")
    sizes = {}
    for name in targets.files:
        path = folder.warc / name
        if not path.is_file():
            raise PruneError(f"{path}: missing, or still open (`mirror run` repairs an open "
                             "file); `mirror verify` tells more")
        sizes[name] = path.stat().st_size
    members = {name: [Member(*spot) for spot in spots]
               for name, spots in targets.files.items()}
    changes = file_changes(members, sizes, next_serial(folder.warc))
    estimate = {c.new: head_length(folder.warc / c.old) + c.kept_bytes()
                for c in changes if c.new}
    kept = tuple((r, keep[r.id]) for r in runs if r.id in keep)
    return PruneResult(policy, kept, dropped, targets.captures, targets.held, tuple(changes),
                       estimate, dry_run, recovered=recovered)


def _execute(plan: PruneResult, manifest: Manifest, folder: ArchiveLayout) -> dict[str, int]:
    """Steps 2 to 6 of the module's docstring; the new files' sizes."""
    if not plan.dropped:
        return {}
    journal = Journal(WRITING, tuple((c.old, c.new) for c in plan.changes), plan.dropped_runs)
    manifest.prune.set_journal(journal.dumps())
    crashpoints.reached("prune:journaled")
    moves: list[Move] = []
    sizes: dict[str, int] = {}
    for change in plan.changes:
        if change.new is not None:
            moved, sizes[change.new] = write_pruned(folder.warc, change)
            moves += moved
            crashpoints.reached("prune:written", "file")
    fsync_dir(folder.warc)
    switched = Journal(SWITCHED, journal.files, journal.runs)
    manifest.prune.drop_runs(journal.runs, [_row(m) for m in moves], switched.dumps())
    crashpoints.reached("prune:switched")
    _finish(manifest, folder, switched)
    return sizes


def _row(m: Move) -> tuple[int, str, int, int, int, int, int | None]:
    return (m.capture_id, m.filename, m.offset, m.length, m.req_offset, m.req_length,
            m.render_offset)


# -- after the switch, and after a crash --------------------------------------------------
def _finish(manifest: Manifest, folder: ArchiveLayout, journal: Journal) -> None:
    """Step 5 and 6: each part harmless to do again after a crash in the middle."""
    warc = folder.warc
    for _, new in journal.files:
        if new is None or (warc / new).exists():
            continue
        if not (warc / temp_name(new)).exists():
            raise PruneError(f"{warc / new}: the pruned file is missing (and its temporary "
                             f"{temp_name(new)}); restore the archive from a backup")
        os.replace(warc / temp_name(new), warc / new)
        crashpoints.reached("prune:renamed", "file")
    fsync_dir(warc)
    closed = {p.name for p in index.warc_files(warc)} - {old for old, _ in journal.files}
    index.write_index(folder.index, (index.capture_line(row) for row in manifest.captures.all()
                                     if row["filename"] in closed))
    crashpoints.reached("prune:indexed")
    for old, _ in journal.files:
        if (warc / old).exists():
            (warc / old).unlink()
            crashpoints.reached("prune:deleted", "file")
    fsync_dir(warc)
    for run in journal.runs:
        folder.report(run).unlink(missing_ok=True)
    manifest.prune.set_journal(None)


def _undo(manifest: Manifest, folder: ArchiveLayout, journal: Journal) -> None:
    """A prune stopped before its switch: its temporary files go; nothing else changed."""
    for _, new in journal.files:
        if new is not None:
            (folder.warc / temp_name(new)).unlink(missing_ok=True)
    manifest.prune.set_journal(None)


def _resume(manifest: Manifest, folder: ArchiveLayout) -> str | None:
    """Finish or undo a prune a crash interrupted; what was done, or None."""
    text = manifest.prune.journal()
    if text is None:
        return None
    journal = Journal.loads(text)
    if journal.state == SWITCHED:
        _finish(manifest, folder, journal)
        return f"finished an interrupted prune (runs {_ids(journal.runs)} dropped)"
    _undo(manifest, folder, journal)
    return f"undid an interrupted prune (runs {_ids(journal.runs)} kept)"


def _ids(runs: tuple[int, ...]) -> str:
    return ", ".join(map(str, runs))


def finish_interrupted_prune(output_dir: Path) -> str | None:
    """At the start of `mirror run` and `mirror verify`, under the archive lock: finish or
    undo a prune a crash interrupted (what was done), else nothing (None)."""
    folder = ArchiveLayout(output_dir)
    if not folder.manifest.exists():
        return None
    reader = ManifestReader(folder.manifest)
    try:
        pending = reader.prune.journal()
    finally:
        reader.close()
    if pending is None:
        return None
    manifest = Manifest(folder.manifest, durable=True)
    try:
        return _resume(manifest, folder)
    finally:
        manifest.close()
