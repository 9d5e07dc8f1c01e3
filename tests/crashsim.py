"""Crash states by enumeration: a site with every kind of capture, runs that copy the archive
at each crash point, and the checks a restarted archive must pass against an uncrashed one.

A crash state is the archive folder as the disk holds it at a crash point: a hook set in
`mirror.crashpoints` copies the folder there (the WARC bytes the writer has handed to the OS,
the SQLite file and its WAL; never the Python buffers nor the -shm index, which SQLite
rebuilds after a crash), and the run goes on. That is what a SIGKILL at that moment leaves
(tests/test_crashpoints.py checks it against a real `os._exit` too), so one run yields every
crash state of its steps, and each is then restarted on its own.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import ClientSession, web
from conftest import TestSite, crawl_to_end, write_config
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from mirror import crashpoints
from mirror.archive.warcread import complete_prefix
from mirror.config import load_config
from mirror.manifest.reader import ManifestReader
from mirror.model import ExitCode
from mirror.replay.serve import start_replay_server
from mirror.upkeep import recovery
from mirror.verify import check_archive

PHASES = (1, 2, 3)  # run 1, the incremental run 2 (pages changed), run 3
#: captures per group commit in every run (no time bound): groups of several form, so the
#: steps between two captures of one group and inside a group's transaction are reached
GROUP_SIZE = 3
BIG = 3000  # bytes of /big, cut at MAX_BYTES: a truncated capture every run
MAX_BYTES = 1000
DUP = b"<!doctype html><title>dup</title><p>the same body <a href='/a'>a</a>"
MOVED = b"<!doctype html><title>Moved</title><p>Moved"
A_V1 = b"<!doctype html><title>A</title><p>version 1 <img src='/img.png'>"
A_V2 = b"<!doctype html><title>A</title><p>version 2 <img src='/img.png'>"
ROBOTS = b"User-agent: *\nDisallow: /private\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
LINKS = ["a", "dup1", "dup2", "dup3", "redir", "chain1", "big", "missing", "etag", "noval",
         "private"]


def home(phase: int) -> bytes:
    links = LINKS + (["new"] if phase >= 2 else [])
    return ("<!doctype html><title>Home</title>"
            + "".join(f"<a href='/{p}'>{p}</a>" for p in links)).encode()


class PhasedSite:
    """Every kind of capture over three runs: responses, same- and other-URL revisits in the
    same and earlier runs, 304s, redirects (a chain; bodies shared with each other), a
    truncated body, 404s whose body equals a 200's, robots.txt and a URL it disallows."""

    def __init__(self, site: TestSite) -> None:
        self.site = site
        self.phase = 1
        for path, body in (("/dup1", DUP), ("/dup2", DUP), ("/noval", b"<p>no validators")):
            self._static(path, lambda b=body: b)
        self._static("/", lambda: home(self.phase), etag=True)
        self._static("/dup3", lambda: DUP, etag=True)  # a revisit, then 304s that confirm it
        self._static("/a", lambda: A_V1 if self.phase == 1 else A_V2)
        self._static("/new", lambda: A_V1)  # run 1's /a: a revisit of another URL
        self._static("/big", lambda: b"x" * BIG)
        self._static("/robots.txt", lambda: ROBOTS, content_type="text/plain")
        self._static("/etag", lambda: b"<p>validated", etag=True)
        self._static("/img.png", lambda: PNG, content_type="image/png", etag=True)
        self._static("/missing", lambda: DUP, status=404)
        for path, status, target in (("/redir", 301, "/a"), ("/chain1", 302, "/chain2"),
                                     ("/chain2", 301, "/dup1")):
            self._static(path, lambda: MOVED, status=status, location=target)

    def _static(self, path: str, body: Callable[[], bytes], *, status: int = 200,
                content_type: str = "text/html", etag: bool = False,
                location: str | None = None) -> None:
        async def handler(request: web.Request) -> web.StreamResponse:
            data = body()
            tag = f'"{hash(data) & 0xFFFFFFFF:x}"'
            if etag and request.headers.get("If-None-Match") == tag:
                return web.Response(status=304, headers={"ETag": tag})
            headers = {"Content-Type": content_type}
            if etag:
                headers["ETag"] = tag
            if location:
                headers["Location"] = location
            return web.Response(status=status, body=data, headers=headers)

        self.site.handler(path, handler)


class Clock:
    """WARC dates: each run on its own day (so a 14-digit timestamp names one run's capture),
    a millisecond apart within it."""

    def __init__(self) -> None:
        self.ticks = itertools.count()

    def for_phase(self, phase: int) -> Callable[[], datetime]:
        day = datetime(2020, 1, phase, tzinfo=UTC)
        return lambda: day + timedelta(milliseconds=next(self.ticks))


@dataclass(frozen=True)
class CrashState:
    phase: int
    step: str
    kind: str
    nth: int
    folder: Path  # holds site.toml and archive/, as the disk was at the crash point

    @property
    def name(self) -> str:
        return f"run {self.phase} {self.step} {self.kind} #{self.nth}"


@dataclass
class Scenario:
    """The phased site, a work folder, and how every run is configured."""

    site: PhasedSite
    work: Path
    clock: Clock = field(default_factory=Clock)
    group_size: int = GROUP_SIZE

    def folder(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        write_config(path, [self.site.site.base], scope={"robots": True},
                     crawl={"workers": 1, "parse_processes": 0, "max_response_bytes": MAX_BYTES,
                            "timeout": 10},
                     archive={"warc_max_bytes": 2500})
        return path

    async def run(self, folder: Path, phase: int) -> int:
        """One `mirror run` of the folder with the site as it is in `phase`: its exit code."""
        self.site.phase = phase
        result = await crawl_to_end(load_config(folder / "site.toml"), timeout=30,
                                    clock=self.clock.for_phase(phase),
                                    group_size=self.group_size, group_wait=math.inf)
        return result.exit_code

    async def record(self, folder: Path, phase: int, keep: Callable[[str, str, int], bool],
                     into: Path) -> list[CrashState]:
        """Run `phase` on `folder`, copying the folder at every crash point `keep` accepts."""
        states: list[CrashState] = []
        seen = crashpoints.Occurrences()

        def snapshot(step: str, kind: str) -> None:
            nth = seen.next(step, kind)
            if keep(step, kind, nth):
                copy = into / f"{phase}-{len(states):04d}"
                copy_folder(folder, copy)
                states.append(CrashState(phase, step, kind, nth, copy))

        crashpoints.hook = snapshot
        try:
            code = await self.run(folder, phase)
        finally:
            crashpoints.hook = None
            crashpoints.label = ""
        assert code == ExitCode.OK, f"run {phase} with crash points recorded: exit {code}"
        return states

    async def finish(self, folder: Path, phase: int, last: int) -> list[str]:
        """What a user does after a crash in `phase`: `mirror run` until that run is done,
        then the later runs up to `last`. Returns the requests of the resumed run."""
        mark = len(self.site.site.log)
        if run_states(folder)[-1] in ("running", "interrupted"):
            code = await self.run(folder, phase)
            assert code == ExitCode.OK, f"resumed run {phase}: exit {code}"
        resumed = self.site.site.log[mark:]
        for later in range(phase + 1, last + 1):
            code = await self.run(folder, later)
            assert code == ExitCode.OK, f"run {later} after the crash: exit {code}"
        return resumed


def copy_folder(src: Path, dst: Path) -> None:
    """The folder as the disk holds it (SQLite's -shm is rebuilt from the WAL on open)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*-shm"))


def torn(folder: Path) -> bool:
    """Whether an .open WARC file of the folder ends in an incomplete record."""
    return any(complete_prefix(p) < p.stat().st_size
               for p in (folder / "archive" / "warc").glob("*.open"))


def uncommitted(folder: Path) -> list[str]:
    """The URLs of the complete captures past the last commit of the .open WARC files: what
    start-up adopts (a group lost by the crash, flushed but not committed)."""
    archive = folder / "archive"
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        ends = dict(db.execute("SELECT filename, MAX(MAX(offset + length, req_offset + "
                               "req_length)) FROM captures GROUP BY filename"))
    urls = []
    for path in recovery.open_files(archive / "warc"):
        final = path.name.removesuffix(".open")
        whole = archive / "whole.tmp"  # without a torn last record, as start-up cuts it
        whole.write_bytes(path.read_bytes()[:complete_prefix(path)])
        try:
            start = min(ends.get(final, 0), whole.stat().st_size)
            found, _ = recovery.scan_groups(whole, start, final)
        finally:
            whole.unlink()
        for f in found:
            urls.append(f.exchange.url)
            f.exchange.body.close()
    return urls


def run_states(folder: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(folder / "archive" / "manifest.sqlite3")) as db:
        return [s for (s,) in db.execute("SELECT state FROM runs ORDER BY id")]


def committed(folder: Path) -> set[str]:
    """URLs the last run had committed (done or failed) in this folder."""
    with contextlib.closing(sqlite3.connect(folder / "archive" / "manifest.sqlite3")) as db:
        return {u for (u,) in db.execute(
            "SELECT url FROM urls WHERE state IN ('done', 'failed') "
            "AND run_id=(SELECT MAX(id) FROM runs)")}


# -- what a finished archive must show -------------------------------------------------------
#: status, redirect target, body as archived, and the page's text in the search index
Replayed = tuple[int, str | None, bytes, tuple[str, str] | None]


def stored_per_run(archive: Path) -> Counter[tuple[int, str]]:
    """(run, URL) -> response and revisit records; a WARC file belongs to the run its
    warcinfo names (`isPartOf: <name>/run-<N>`)."""
    counts: Counter[tuple[int, str]] = Counter()
    for path in sorted((archive / "warc").glob("*.warc.gz")):
        run = 0
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "warcinfo":
                    fields = rec.content_stream().read().decode()
                    run = int(fields.split("isPartOf: ", 1)[1].split("\r\n")[0].rsplit("-", 1)[1])
                elif rec.rec_type in ("response", "revisit"):
                    counts[run, rec.rec_headers.get_header("WARC-Target-URI")] += 1
    return counts


def warcio_check(archive: Path) -> str:
    """What `warcio check` says of every WARC file ('' when they pass)."""
    files = [str(p) for p in sorted((archive / "warc").glob("*.warc.gz"))]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = Checker(SimpleNamespace(inputs=files, verbose=False)).process_all()
    return out.getvalue() or ("failed" if code else "")


def verify(archive: Path) -> list[str]:
    manifest = ManifestReader(archive / "manifest.sqlite3")
    try:
        return [f"{p.where}: {p.check}: {p.detail}"
                for p in check_archive(archive, manifest).problems]
    finally:
        manifest.close()


def captures(archive: Path) -> Iterator[tuple[int, str, str]]:
    """(run, URL, 14-digit timestamp) of every capture the manifest holds."""
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        for run, url, date in db.execute("SELECT run_id, url, warc_date FROM captures"):
            yield run, url, date[:19].replace("-", "").replace(":", "").replace("T", "")


async def replay_all(archive: Path) -> dict[tuple[int, str], Replayed]:
    """What `mirror serve` answers for every URL at every run: status and body as archived
    (`id_`), and for a redirect where the replay sends the browser."""
    runner, base = await start_replay_server(archive)
    out: dict[tuple[int, str], Replayed] = {}
    words = page_texts(archive)
    try:
        async with ClientSession() as session:
            for run, url, ts in captures(archive):
                out[run, url] = (*await _replay(session, base, ts, url), words.get((run, url)))
    finally:
        await runner.cleanup()
    return out


def page_texts(archive: Path) -> dict[tuple[int, str], tuple[str, str]]:
    """(run, URL) -> (title, text) of every capture that has a text in the search index."""
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        return {(run, url): (title, body) for run, url, title, body in db.execute(
            "SELECT c.run_id, c.url, t.title, t.body FROM captures c "
            "JOIN page_texts t ON t.id = c.text_id")}


def text_index_problems(archive: Path) -> list[str]:
    """A text no capture has, a latest_texts row that is not each URL's newest capture with
    a text, or a full-text index that is not exactly the texts (FTS5's integrity-check)
    once the runs are over."""
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        orphans = db.execute("SELECT id FROM page_texts WHERE id NOT IN "
                             "(SELECT text_id FROM captures WHERE text_id IS NOT NULL)"
                             ).fetchall()
        latest = set(db.execute("SELECT url_id, capture_id, text_id FROM latest_texts"))
        want = set(db.execute(
            "SELECT url_id, MAX(id), text_id FROM captures WHERE text_id IS NOT NULL "
            "GROUP BY url_id"))
        indexed = db.execute("SELECT value FROM meta WHERE key='texts_indexed'").fetchone()
        top = db.execute("SELECT MAX(id) FROM page_texts").fetchone()[0]
        try:
            db.execute("INSERT INTO texts (texts, rank) VALUES ('integrity-check', 1)")
            damage = ""
        except sqlite3.DatabaseError as exc:
            damage = str(exc)
    found = [f"text {t} belongs to no capture" for (t,) in orphans]
    if latest != want:
        found.append(f"latest_texts {sorted(latest ^ want)[:5]} differ from the captures")
    if int(indexed[0] if indexed else 0) != (top or 0):
        found.append(f"search index holds texts up to {indexed}, the last is {top}")
    if damage:
        found.append(f"search index: {damage}")
    return found


async def _replay(session: ClientSession, base: str, ts: str,
                  url: str) -> tuple[int, str | None, bytes]:
    async with session.get(f"{base}{ts}id_/{url}", allow_redirects=False) as resp:
        status, body = resp.status, await resp.read()
    target = None
    if 300 <= status < 400:
        async with session.get(f"{base}{ts}/{url}", allow_redirects=False) as resp:
            target = resp.headers.get("Location", "").split("/", 2)[-1]
    return status, target, body


async def problems(archive: Path, reference: dict[tuple[int, str], Replayed],
                   refetched: list[str]) -> list[str]:
    """Everything wrong with a restarted archive, against the uncrashed reference."""
    found = [f"verify: {p}" for p in verify(archive)]
    if why := warcio_check(archive):
        found.append(f"warcio check: {why.strip()[:500]}")
    counts = stored_per_run(archive)
    found += [f"stored {n} times in run {run}: {url}" for (run, url), n in counts.items()
              if n != 1]
    if set(counts) != set(reference):
        found.append(f"stored URLs differ: missing {sorted(set(reference) - set(counts))}, "
                     f"extra {sorted(set(counts) - set(reference))}")
    found += [f"fetched again after its commit: {url}" for url in refetched]
    found += text_index_problems(archive)
    replayed = await replay_all(archive)
    found += [f"replay of {url} at run {run}: {replayed.get((run, url))!r:.120} != "
              f"{want!r:.120}" for (run, url), want in reference.items()
              if replayed.get((run, url)) != want]
    return found


def record_ids(archive: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        return {r for (r,) in db.execute("SELECT record_id FROM captures")}


def capture_file(archive: Path, capture_id: int) -> str:
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        return str(db.execute("SELECT filename FROM captures WHERE id=?",
                              (capture_id,)).fetchone()[0])


def row_by_record(archive: Path, record_id: str) -> dict[str, Any]:
    """The manifest's capture row of a record, every column, with the links found on its
    URL and the URL's final state."""
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM captures WHERE record_id=?", (record_id,)).fetchone()
        url = row["url"]
        links = {(u, k) for u, k in db.execute(
            "SELECT d.url, l.kind FROM links l JOIN urls d ON d.id=l.dst "
            "JOIN urls s ON s.id=l.src WHERE s.url=?", (url,))}
        state = db.execute("SELECT state, reason FROM urls WHERE url=?", (url,)).fetchone()
    return {**dict(row), "links": links, "state": tuple(state)}
