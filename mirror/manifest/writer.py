"""Manifest: the crawl's writer of the manifest (runs, URL states, captures, links), in a
SQLite file or, for a crawl shared by several workers, a PostgreSQL database."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path

from mirror import crashpoints
from mirror.manifest.db import (
    ManifestConflict,
    ManifestWriteError,
    PostgresDb,
    SqlDb,
    Tx,
)
from mirror.manifest.filemarks import FileMarks
from mirror.manifest.patterns import Patterns
from mirror.manifest.pruning import Prune
from mirror.manifest.reader import END, ManifestReader
from mirror.manifest.schema import (
    FRONTIER_URLS,
    URL_ITEM_COLUMNS,
    ManifestError,
    create_or_upgrade,
    create_or_upgrade_postgres,
)
from mirror.manifest.sharedrun import SharedRun, fence, retried
from mirror.manifest.sitemaps import Sitemaps
from mirror.manifest.texts import Texts
from mirror.model import (
    CaptureRow,
    HostLease,
    NewUrl,
    Original,
    PageText,
    Previous,
    Run,
    UrlItem,
    UrlState,
)

__all__ = ["CaptureRow", "Manifest", "ManifestConflict", "ManifestError", "ManifestWriteError",
           "NewUrl", "Original", "Previous", "Run", "UrlItem", "open_manifest"]

#: URLs remembered as already in this run (see Manifest._add_urls): about 10 MB at most
KNOWN_URLS = 50_000

_UPSERT_URL = """INSERT INTO urls (url, site, run_id, state, mode, depth, redirects_left,
                                   referrer, via, reason)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(url) DO UPDATE SET
      run_id=excluded.run_id, state=excluded.state, mode=excluded.mode,
      depth=excluded.depth, redirects_left=excluded.redirects_left,
      referrer=excluded.referrer, via=excluded.via, reason=excluded.reason,
      tries=0, next_try=0, status=NULL
    WHERE urls.run_id < excluded.run_id
       OR (urls.state='skipped' AND excluded.state='pending')
    RETURNING id"""
_INSERT_CAPTURE = """INSERT INTO captures (url_id, run_id, url, warc_date, record_id, filename,
      "offset", length, req_offset, req_length, status, mime, payload_digest, payload_length,
      etag, last_modified, location, truncated, record_type, original_id, text_id)
    VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


def open_manifest(target: Path | str, *, durable: bool = False) -> Manifest:
    """The manifest `target` names, opened read-write: a file path (SQLite, the default), or
    postgresql://... (a database several workers share; needs `mirror[fleet]`)."""
    return Manifest(target, durable=durable)


class Manifest(ManifestReader):
    """Crawl state, opened read-write: an older schema is upgraded on opening. In a SQLite
    file (WAL; one writer at a time) or a PostgreSQL database (several workers: its
    parts sharedrun and filemarks lease hosts to them and follow their WARC files). Every
    method is one short transaction (or a part of a group()'s), and so is every method of
    its parts, which share its transactions (`tx`): texts, patterns, sitemaps, prune,
    sharedrun, filemarks. The queries are ManifestReader's. The state machines are in
    manifest.schema's docstring."""

    def __init__(self, path: Path | str, *, durable: bool = False) -> None:
        self.durable = durable  # SQLite: synchronous=FULL (PostgreSQL: the server decides)
        # url -> id, committed in run self._known_run, oldest first (an OrderedDict: a dict
        # trimmed from the front leaves dummies that each next(iter()) scans again)
        self._known: OrderedDict[str, int] = OrderedDict()
        self._staged: dict[str, int] = {}  # the same, from the open transaction
        self._known_run = 0
        self._sites: set[str] = set()  # sites whose host rows exist (committed)
        self._staged_sites: set[str] = set()  # ... made by the open transaction
        super().__init__(path)
        self.tx = Tx(self.sql, self._settle)  # what every write and every part's joins
        self.patterns: Patterns = Patterns(self.sql)
        self.sitemaps = Sitemaps(self.sql, self.tx)
        self.texts: Texts = Texts(self.sql, self.tx)
        self.prune: Prune = Prune(self.sql, self.tx, self.texts)
        self.sharedrun = SharedRun(self.sql, self.tx, self._new_run, self.count_done_pages)
        self.filemarks = FileMarks(self.sql, self.tx, self._forget_captures)

    def _connect(self) -> SqlDb:
        if isinstance(self.path, str):
            db = PostgresDb(self.path)
            try:
                create_or_upgrade_postgres(db)
            except db.errors as exc:
                db.close()
                raise ManifestError(f"{db.name}: not a usable manifest: {exc}") from exc
            except BaseException:
                db.close()
                raise
            return db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self._open(self.path, partial(create_or_upgrade, durable=self.durable))

    def _tx(self) -> AbstractContextManager[None]:
        return self.tx()

    @contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for several writes (a group commit of captures): every
        commit_capture inside it joins it, and all of them are committed at its end, or
        none (ManifestWriteError). The search index is not updated inside a group: call
        texts.index_due after it."""
        assert not self.tx.grouped, "groups do not nest"
        with self.sql.transaction(self._settle):
            self.tx.grouped = True
            try:
                yield
            finally:
                self.tx.grouped = False

    # -- runs ------------------------------------------------------------------------------
    @retried
    def start_run(self, started_at: str, config_digest: str,
                  seeds: Sequence[NewUrl] = ()) -> int:
        """A new run and its start URLs, in one transaction: a run killed between the two
        would resume with nothing to fetch and end 'complete' with nothing stored."""
        with self._tx():
            run_id = self._new_run(started_at, config_digest, seeds)
        return run_id

    def _new_run(self, started_at: str, config_digest: str, seeds: Sequence[NewUrl]) -> int:
        run_id: int = self.sql.execute(
            "INSERT INTO runs (started_at, state, config_digest) VALUES (?, 'running', ?) "
            "RETURNING id", (started_at, config_digest)).fetchone()[0]
        self._add_urls(run_id, None, seeds)
        return run_id

    def resume_run(self, run_id: int) -> int:
        """Leased URLs of an unfinished run go back to pending; returns how many. The texts
        a killed process had not indexed yet go into the search index first. Every lease
        ends: this is the single machine's restart (a worker sharing a crawl calls
        recover(owner), which ends only its own and the expired ones)."""
        self.texts.index()
        with self._tx():
            self.sql.execute(
                "UPDATE runs SET state='running', finished_at=NULL WHERE id=?", (run_id,)
            )
            cur = self.sql.execute(f"UPDATE urls SET {_TO_PENDING} WHERE state='leased'")
            self._free_hosts()
        return cur.rowcount

    def begin_session(self, run_id: int, now: float) -> int:
        """This process works on `run_id` from `now` on; returns the session's id."""
        with self._tx():
            session: int = self.sql.execute(
                "INSERT INTO sessions (run_id, started, alive) VALUES (?, ?, ?) RETURNING id",
                (run_id, now, now)).fetchone()[0]
        return session

    def touch_session(self, session_id: int, now: float) -> None:
        with self._tx():
            self.sql.execute("UPDATE sessions SET alive=? WHERE id=?", (now, session_id))

    def finish_run(self, run_id: int, finished_at: str, state: str, exit_code: int) -> None:
        self.texts.index()  # a finished run is searchable whole
        with self._tx():
            self.sql.execute(
                "UPDATE runs SET finished_at=?, state=?, exit_code=? WHERE id=?",
                (finished_at, state, exit_code, run_id),
            )

    def abandon_run(self, run_id: int, finished_at: str) -> None:
        """An unfinished run left behind by `mirror run --new-run`."""
        with self._tx():
            self.sql.execute(
                "UPDATE runs SET state='abandoned', finished_at=? WHERE id=?",
                (finished_at, run_id))
            self.sql.execute(f"UPDATE urls SET {_TO_PENDING} WHERE state='leased'")
            self._free_hosts()

    def _free_hosts(self) -> None:
        self.sql.execute("UPDATE hosts SET lease_owner=NULL, lease_until=0 "
                         "WHERE lease_owner IS NOT NULL")

    # -- discovery -----------------------------------------------------------------------
    @retried
    def add_urls(
        self, run_id: int, referrer: int | None, found: Sequence[NewUrl]
    ) -> None:
        """Insert URLs not yet seen in this run (the seen-check), and the links to them."""
        with self._tx():
            self._add_urls(run_id, referrer, found)

    def _add_urls(self, run_id: int, referrer: int | None, found: Sequence[NewUrl]) -> None:
        # Insert, or re-discover a URL known from an earlier run; a URL that was only
        # skipped so far is upgraded when it is now allowed (an off-site <a> then <img>).
        # Most links of a page were seen on other pages: a URL this run already holds in a
        # state no insert can change is in self._known, and needs only its link row.
        if run_id != self._known_run:
            self._known.clear()
            self._known_run = run_id
        known, staged = self._known, self._staged
        for f in self._to_upsert(run_id, found) if self.sql.concurrent else found:
            if f.url in known or f.url in staged:
                continue
            row = self.sql.execute(
                _UPSERT_URL,
                (f.url, f.site, run_id,
                 UrlState.SKIPPED if f.skip_reason else UrlState.PENDING, f.mode,
                 f.depth, f.redirects_left, referrer, f.via, f.skip_reason),
            ).fetchone()
            if row is None:  # already in the manifest: look at what it holds
                row = self.sql.execute("SELECT id FROM urls WHERE url=? AND run_id=? "
                                       "AND state != 'skipped'", (f.url, run_id)).fetchone()
            elif f.skip_reason:
                row = None  # a later link may still upgrade it
            elif f.site not in self._sites and f.site not in self._staged_sites:
                self._add_host(f.site)  # pending: its site needs host rows
            if row is not None:
                staged[f.url] = row[0]
        self.sql.executemany(
            "INSERT INTO sitemap_lastmod (url_id, lastmod) VALUES (?, ?) "
            "ON CONFLICT(url_id) DO UPDATE SET lastmod=excluded.lastmod",
            [(url_id, f.lastmod) for f in found
             if f.lastmod and (url_id := known.get(f.url) or staged.get(f.url))])
        if referrer is not None:
            ids = [(referrer, known.get(f.url) or staged.get(f.url), f.kind, f.url)
                   for f in found]
            self.sql.executemany("INSERT INTO links (src, dst, kind) VALUES (?,?,?) "
                                 "ON CONFLICT DO NOTHING",
                                 [(src, dst, kind) for src, dst, kind, _ in ids if dst])
            self.sql.executemany(
                """INSERT INTO links (src, dst, kind)
                   SELECT ?, id, ? FROM urls WHERE url=? ON CONFLICT DO NOTHING""",
                [(src, kind, url) for src, dst, kind, url in ids if not dst],
            )

    def _to_upsert(self, run_id: int, found: Sequence[NewUrl]) -> list[NewUrl]:
        """Where several workers write at once: of `found`, those the upsert may change,
        sorted by URL (every transaction takes its row locks in that one order), after
        staging the URLs the run holds already, read without taking a lock (an upsert
        locks the row it conflicts with, even when it changes nothing: two workers
        storing pages that link to each other would wait for each other)."""
        urls = [f.url for f in found if f.url not in self._known and f.url not in self._staged]
        if not urls:
            return []
        for url, url_id in self.sql.execute(
                "SELECT url, id FROM urls WHERE url = ANY(?) AND run_id=? AND state != 'skipped'",
                (urls, run_id)):
            self._staged[url] = url_id
        return sorted((f for f in found if f.url not in self._staged), key=lambda f: f.url)

    def _add_host(self, site: str) -> None:
        """The host rows (slots 0 .. host_slots - 1) of a site with a pending URL."""
        self.sql.executemany("INSERT INTO hosts (site, slot) VALUES (?, ?) "
                             "ON CONFLICT DO NOTHING",
                             [(site, slot) for slot in range(self.sharedrun.host_slots)])
        self._staged_sites.add(site)

    def _settle(self, committed: bool) -> None:
        """After a transaction: what it staged becomes known, or is forgotten."""
        if committed:
            self._known.update(self._staged)
            while len(self._known) > KNOWN_URLS:
                self._known.popitem(last=False)  # the oldest first, in constant time
            self._sites |= self._staged_sites
        self._staged.clear()
        self._staged_sites.clear()

    # -- frontier ------------------------------------------------------------------------
    def lease(
        self, limit: int, now: float, exclude_sites: Iterable[str] = (), pages: bool = True
    ) -> list[UrlItem]:
        """Mark up to `limit` pending URLs that are due as leased and return them, oldest first."""
        excluded = list(exclude_sites)
        sql = f"SELECT {URL_ITEM_COLUMNS} FROM urls " \
              f"WHERE state='pending' AND next_try <= ? AND {FRONTIER_URLS}"
        params: list[object] = [now]
        if excluded:
            sql += f" AND site NOT IN ({','.join('?' * len(excluded))})"
            params += excluded
        if not pages:
            sql += " AND mode='requisite'"
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        with self._tx():
            rows = self.sql.execute(sql, params).fetchall()
            self.sql.executemany(
                "UPDATE urls SET state='leased' WHERE id=?", [(r[0],) for r in rows]
            )
        return [UrlItem(*r) for r in rows]

    @retried
    def unlease(self, ids: Iterable[int], *, lease: HostLease | None = None) -> None:
        """Leased URLs the frontier did not fetch go back to pending (with `lease`: only
        those still leased under it)."""
        check, extra = fence(lease)
        with self._tx():
            self.sql.executemany(
                f"UPDATE urls SET {_TO_PENDING} WHERE id=? AND state='leased'{check}",
                [(i, *extra) for i in ids],
            )

    # -- recovery --------------------------------------------------------------------------
    def rollback_past(self, run_id: int, filename: str, size: int) -> list[str]:
        """Forget captures that lie past the end of a file cut short (lost on power failure);
        their URLs go back to pending. Returns those URLs."""
        with self._tx():
            urls = self._forget_captures(run_id, f"filename=? AND {END} > ?", (filename, size))
        return urls

    def _forget_captures(self, run_id: int, where: str, params: Sequence[object]) -> list[str]:
        """Delete the captures `where` names (and their texts no other capture has); their
        URLs of run `run_id` go back to pending. Returns those URLs."""
        rows = self.sql.execute(f"SELECT id, url_id, url FROM captures WHERE {where}",
                                params).fetchall()
        texts = [(t,) for (t,) in self.sql.execute(
            f"SELECT DISTINCT text_id FROM captures WHERE {where} AND text_id IS NOT NULL",
            params)]
        self.sql.executemany("DELETE FROM captures WHERE id=?", [(r[0],) for r in rows])
        self.texts.drop(texts)
        self.texts.relatest({r[1] for r in rows})
        self.texts.sync_latest(build=False)
        self.sql.executemany(
            f"UPDATE urls SET {_TO_PENDING}, status=NULL WHERE id=? AND run_id=?",
            [(r[1], run_id) for r in rows],
        )
        return [r[2] for r in rows]

    # -- outcomes ------------------------------------------------------------------------
    @retried
    def commit_capture(
        self,
        run_id: int,
        item: UrlItem,
        cap: CaptureRow,
        found: Sequence[NewUrl],
        *,
        failed_reason: str | None = None,
        note: str | None = None,
        text: PageText | None = None,
        lease: HostLease | None = None,
        robots: str | None = None,
    ) -> bool:
        """One transaction (or a part of a group's): the URL done (or failed), the capture
        row, its page's text (a revisit shares its original's), what it linked to, a
        note on the page (why it may need a browser), and its robots directives
        ("noindex,nofollow": Discovered.robots), if any. With `lease` (a worker of a
        shared crawl), only while the URL is still leased under it: else nothing is
        written and it returns False (the worker cuts its WARC file back to before the
        record: another worker has the URL, or will fetch it again)."""
        with self._tx():
            state = UrlState.FAILED if failed_reason else UrlState.DONE
            if not self._end_lease(item.id, lease, "state=?, status=?, tries=tries+1, reason=?",
                                   (state, cap.status, failed_reason)):
                return False
            text_id = self.texts.text_id(cap.original_id, text)
            cur = self.sql.execute(  # its id is needed only for latest_texts
                _INSERT_CAPTURE if text_id is None else f"{_INSERT_CAPTURE} RETURNING id",
                (item.id, run_id, item.url, cap.warc_date, cap.record_id, cap.filename,
                 cap.offset, cap.length, cap.req_offset, cap.req_length, cap.status, cap.mime,
                 cap.payload_digest, cap.payload_length, cap.etag, cap.last_modified,
                 cap.location, cap.truncated, cap.record_type, cap.original_id, text_id),
            )
            if text_id is not None:
                self.texts.latest(item.id, cur.fetchone()[0], text_id)
            if failed_reason:
                self._log_error(run_id, item.id, failed_reason)
            if note:
                self.sql.execute("INSERT INTO notes (run_id, url_id, note) VALUES (?,?,?) "
                                 "ON CONFLICT(run_id, url_id) DO UPDATE SET note=excluded.note",
                                 (run_id, item.id, note))
            if robots:
                self._page_robots(run_id, item.id, robots)
            self._add_urls(run_id, item.id, found)
            crashpoints.reached("commit:inside")
        if not self.tx.grouped:
            self.texts.index_due()
        return True

    def _page_robots(self, run_id: int, url_id: int, robots: str) -> None:
        words = robots.split(",")
        self.sql.execute(
            "INSERT INTO page_robots (run_id, url_id, noindex, nofollow) VALUES (?,?,?,?) "
            "ON CONFLICT(run_id, url_id) DO UPDATE SET noindex=excluded.noindex, "
            "nofollow=excluded.nofollow",
            (run_id, url_id, int("noindex" in words), int("nofollow" in words)))

    def _end_lease(self, url_id: int, lease: HostLease | None, changes: str,
                   params: Sequence[object]) -> bool:
        """Set `changes` on a URL, leaving whatever lease it had; with `lease`, only while
        it is leased under that lease (fenced): whether it was."""
        check, extra = fence(lease)
        cur = self.sql.execute(
            f"UPDATE urls SET {changes}, lease_owner=NULL, lease_epoch=NULL WHERE id=?"
            + (f" AND state='leased'{check} RETURNING id" if lease else ""),
            (*params, url_id, *extra))
        return lease is None or cur.fetchone() is not None

    # -- politeness ------------------------------------------------------------------------
    @retried
    def skip(self, run_id: int, item: UrlItem, rule: str, *,
             lease: HostLease | None = None) -> bool:
        """A leased URL that must not be fetched after all (robots.txt, a host budget).
        With `lease`: only while still leased under it (else False, nothing written)."""
        self._known.pop(item.url, None)  # skipped: a later link may upgrade it again
        with self._tx():
            done = self._end_lease(item.id, lease, "state='skipped', reason=?", (rule,))
        return done

    @retried
    def ensure_url(self, run_id: int, url: str, site: str, via: str, *,
                   lease: HostLease | None = None) -> UrlItem | None:
        """Lease `url` for an out-of-band fetch (robots.txt), adding it if unknown; None
        when this run already has it done (or another worker holds it). With `lease` (a
        worker of a shared crawl holding the URL's host): leased under it, also taken from
        a lease of an older epoch (its worker lost the host, or died fetching it)."""
        stale = (" OR urls.state='leased' AND (urls.lease_epoch IS NULL "
                 "OR urls.lease_epoch < excluded.lease_epoch)") if lease else ""
        with self._tx():
            row = self.sql.execute(
                f"""INSERT INTO urls (url, site, run_id, state, mode, depth, redirects_left,
                                      via, lease_owner, lease_epoch)
                   VALUES (?, ?, ?, 'leased', 'requisite', 0, 0, ?, ?, ?)
                   ON CONFLICT(url) DO UPDATE SET run_id=excluded.run_id, state='leased',
                     tries=0, next_try=0, status=NULL, lease_owner=excluded.lease_owner,
                     lease_epoch=excluded.lease_epoch
                   WHERE urls.run_id < excluded.run_id OR urls.state IN ('pending', 'skipped')
                     {stale}
                   RETURNING id""",
                (url, site, run_id, via, lease and lease.owner,
                 lease and lease.epoch)).fetchone()
            if row is None:  # done in this run, or leased by another
                return None
            item = self.sql.execute(f"SELECT {URL_ITEM_COLUMNS} FROM urls WHERE id=?",
                                    (row[0],)).fetchone()
        return UrlItem(*item)

    @retried
    def retry_later(self, run_id: int, item: UrlItem, error: str, next_try: float, *,
                    lease: HostLease | None = None) -> bool:
        """A leased URL back to pending until `next_try` (Unix time; a worker sharing a
        crawl compares it with the database's clock). With `lease`: fenced (see skip)."""
        with self._tx():
            done = self._end_lease(item.id, lease, "state='pending', tries=tries+1, "
                                   "next_try=?, reason=?", (next_try, error))
            if done:
                self._log_error(run_id, item.id, error)
        return done

    @retried
    def give_up(self, run_id: int, item: UrlItem, error: str, *,
                lease: HostLease | None = None) -> bool:
        """A leased URL failed for good. With `lease`: fenced (see skip)."""
        with self._tx():
            done = self._end_lease(item.id, lease, "state='failed', tries=tries+1, reason=?",
                                   (error,))
            if done:
                self._log_error(run_id, item.id, error)
        return done

    def _log_error(self, run_id: int, url_id: int, error: str) -> None:
        self.sql.execute("INSERT INTO errors (run_id, url_id, error) VALUES (?, ?, ?)",
                         (run_id, url_id, error))


#: a URL's lease ends: back to pending
_TO_PENDING = "state='pending', lease_owner=NULL, lease_epoch=NULL"
