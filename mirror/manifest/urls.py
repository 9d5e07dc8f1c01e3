"""The frontier's rows in the manifest (table urls, with links, errors, sitemap_lastmod and
the hosts of new sites): the reader's part `urls` (UrlReads), and the writer's (Urls),
which adds, leases, ends and retries them. The state machine is in manifest.schema's
docstring."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from mirror.manifest.db import SqlDb, Tx
from mirror.manifest.schema import FRONTIER_URLS, URL_ITEM_COLUMNS
from mirror.manifest.sharedrun import fence, retried
from mirror.model import HostLease, NewUrl, UrlItem, UrlState

#: URLs remembered as already in this run (see Urls.insert): about 10 MB at most
KNOWN_URLS = 50_000
#: a URL's lease ends: back to pending
TO_PENDING = "state='pending', lease_owner=NULL, lease_epoch=NULL"

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


class UrlReads:
    """The frontier's rows, read-only: what is due, pending, queued, skipped."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def queued(self, run_id: int) -> list[str]:
        """The URLs the run still has to fetch (pending or leased; robots.txt aside)."""
        rows = self.sql.execute(
            f"SELECT url FROM urls WHERE run_id=? AND state IN ('pending', 'leased') "
            f"AND {FRONTIER_URLS}", (run_id,))
        return [u for (u,) in rows]

    def next_due(self, pages: bool = True) -> float | None:
        """Earliest next_try of a pending URL, or None when nothing is pending."""
        sql = f"SELECT MIN(next_try) FROM urls WHERE state='pending' AND {FRONTIER_URLS}"
        if not pages:
            sql += " AND mode='requisite'"
        due = self.sql.execute(sql).fetchone()[0]
        return None if due is None else float(due)

    def count_pending(self, pages_only: bool = False) -> int:
        sql = "SELECT COUNT(*) FROM urls WHERE state IN ('pending', 'leased')"
        if pages_only:
            sql += " AND mode='page'"
        return int(self.sql.execute(sql).fetchone()[0])

    def of_path(self, run_id: int, path: str) -> list[str]:
        """The run's URLs that are `path` or `path?<a query>` (the queries of one resource),
        the first found first. SQLite reads them from the unique index on url (a range up
        to `path@`, `@` following `?`); PostgreSQL, whose collation may order by locale,
        compares the start of each row's URL."""
        prefix = path + "?"
        params: tuple[object, ...] = (run_id, path, len(prefix), prefix)
        where = "run_id=? AND (url=? OR substr(url, 1, ?)=?)"
        if self.sql.dialect == "sqlite":
            where += " AND url >= ? AND url < ?"
            params += (path, path + "@")
        return [u for (u,) in self.sql.execute(
            f"SELECT url FROM urls WHERE {where} ORDER BY id", params)]

    def item_for(self, run_id: int, url: str) -> UrlItem | None:
        """The URL as a work item if this run still has to fetch it (pending or leased)."""
        row = self.sql.execute(
            f"SELECT {URL_ITEM_COLUMNS} FROM urls "
            "WHERE url=? AND run_id=? AND state IN ('pending', 'leased')", (url, run_id),
        ).fetchone()
        return UrlItem(*row) if row else None

    def starts(self, run_id: int) -> list[tuple[str, str, int | None, str | None]]:
        """(url, state, status, reason) of the run's start URLs."""
        return [(u, s, st, r) for u, s, st, r in self.sql.execute(
            "SELECT url, state, status, reason FROM urls WHERE run_id=? AND via='start' "
            "ORDER BY id", (run_id,))]

    def requisite_chain(self, url_id: int, limit: int) -> int:
        """How many requisites in a row lead down to this URL from the page they serve
        (itself included), counted up to `limit`: each URL's referrer is the one that first
        found it."""
        n = 0
        row = self.sql.execute("SELECT referrer, mode, via FROM urls WHERE id=?",
                               (url_id,)).fetchone()
        while row is not None and row[1] == "requisite" and row[2] in ("requisite",
                                                                      "redirect") and n < limit:
            n += 1
            if row[0] is None:
                break
            row = self.sql.execute("SELECT referrer, mode, via FROM urls WHERE id=?",
                                   (row[0],)).fetchone()
        return n

    def skipped(self, run_id: int, per_rule: int = 1000) -> dict[str, list[str]]:
        """The skipped URLs of a run by rule (at most `per_rule` of each), for the report."""
        out: dict[str, list[str]] = {}
        for url, rule in self.sql.execute(
                "SELECT url, reason FROM urls WHERE run_id=? AND state='skipped' "
                "ORDER BY reason, id", (run_id,)):
            urls = out.setdefault(rule, [])
            if len(urls) < per_rule:
                urls.append(url)
        return out


class KnownUrls:
    """The URLs (and sites) the writer knows are in the manifest already, so that a link to
    them needs no upsert: committed ones, and those the open transaction staged, which
    `settle` keeps or forgets when it ends (the writer's Tx calls it)."""

    def __init__(self) -> None:
        # url -> id, committed in run self.run, oldest first (an OrderedDict: a dict
        # trimmed from the front leaves dummies that each next(iter()) scans again)
        self.known: OrderedDict[str, int] = OrderedDict()
        self.staged: dict[str, int] = {}  # the same, from the open transaction
        self.run = 0
        self.sites: set[str] = set()  # sites whose host rows exist (committed)
        self.staged_sites: set[str] = set()  # ... made by the open transaction

    def settle(self, committed: bool) -> None:
        """After a transaction: what it staged becomes known, or is forgotten."""
        if committed:
            self.known.update(self.staged)
            while len(self.known) > KNOWN_URLS:
                self.known.popitem(last=False)  # the oldest first, in constant time
            self.sites |= self.staged_sites
        self.staged.clear()
        self.staged_sites.clear()


class Urls(UrlReads):
    """The writer's part for the frontier's rows: each method is one transaction (or a
    part of the writer's open group, `tx`); the methods without a transaction of their
    own (insert, end_lease, log_error) are the steps the other parts' transactions take."""

    def __init__(self, sql: SqlDb, tx: Tx, seen: KnownUrls,
                 host_slots: Callable[[], int]) -> None:
        super().__init__(sql)
        self.tx = tx
        self._seen = seen
        self._host_slots = host_slots  # rows made for each new site (sharedrun's)

    @retried
    def add(self, run_id: int, referrer: int | None, found: Sequence[NewUrl]) -> None:
        """Insert URLs not yet seen in this run (the seen-check), and the links to them."""
        with self.tx():
            self.insert(run_id, referrer, found)

    def insert(self, run_id: int, referrer: int | None, found: Sequence[NewUrl]) -> None:
        """add's statements, in the caller's transaction."""
        # Insert, or re-discover a URL known from an earlier run; a URL that was only
        # skipped so far is upgraded when it is now allowed (an off-site <a> then <img>).
        # Most links of a page were seen on other pages: a URL this run already holds in a
        # state no insert can change is known, and needs only its link row.
        seen = self._seen
        if run_id != seen.run:
            seen.known.clear()
            seen.run = run_id
        known, staged = seen.known, seen.staged
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
            elif f.site not in seen.sites and f.site not in seen.staged_sites:
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
        known, staged = self._seen.known, self._seen.staged
        urls = [f.url for f in found if f.url not in known and f.url not in staged]
        if not urls:
            return []
        for url, url_id in self.sql.execute(
                "SELECT url, id FROM urls WHERE url = ANY(?) AND run_id=? AND state != 'skipped'",
                (urls, run_id)):
            staged[url] = url_id
        return sorted((f for f in found if f.url not in staged), key=lambda f: f.url)

    def _add_host(self, site: str) -> None:
        """The host rows (slots 0 .. host_slots - 1) of a site with a pending URL."""
        self.sql.executemany("INSERT INTO hosts (site, slot) VALUES (?, ?) "
                             "ON CONFLICT DO NOTHING",
                             [(site, slot) for slot in range(self._host_slots())])
        self._seen.staged_sites.add(site)

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
        with self.tx():
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
        with self.tx():
            self.sql.executemany(
                f"UPDATE urls SET {TO_PENDING} WHERE id=? AND state='leased'{check}",
                [(i, *extra) for i in ids],
            )

    def end_lease(self, url_id: int, lease: HostLease | None, changes: str,
                  params: Sequence[object]) -> bool:
        """Set `changes` on a URL, leaving whatever lease it had; with `lease`, only while
        it is leased under that lease (fenced): whether it was."""
        check, extra = fence(lease)
        cur = self.sql.execute(
            f"UPDATE urls SET {changes}, lease_owner=NULL, lease_epoch=NULL WHERE id=?"
            + (f" AND state='leased'{check} RETURNING id" if lease else ""),
            (*params, url_id, *extra))
        return lease is None or cur.fetchone() is not None

    @retried
    def skip(self, run_id: int, item: UrlItem, rule: str, *,
             lease: HostLease | None = None) -> bool:
        """A leased URL that must not be fetched after all (robots.txt, a host budget).
        With `lease`: only while still leased under it (else False, nothing written)."""
        self._seen.known.pop(item.url, None)  # skipped: a later link may upgrade it again
        with self.tx():
            done = self.end_lease(item.id, lease, "state='skipped', reason=?", (rule,))
        return done

    @retried
    def ensure(self, run_id: int, url: str, site: str, via: str, *,
               lease: HostLease | None = None) -> UrlItem | None:
        """Lease `url` for an out-of-band fetch (robots.txt), adding it if unknown; None
        when this run already has it done (or another worker holds it). With `lease` (a
        worker of a shared run holding the URL's host): leased under it, also taken from
        a lease of an older epoch (its worker lost the host, or died fetching it)."""
        stale = (" OR urls.state='leased' AND (urls.lease_epoch IS NULL "
                 "OR urls.lease_epoch < excluded.lease_epoch)") if lease else ""
        with self.tx():
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
    def retry_later(self, run_id: int, item: UrlItem, error: str, delay: float, *,
                    lease: HostLease | None = None) -> bool:
        """A leased URL back to pending for `delay` seconds from now by the database's
        clock (next_try, Unix time, which leases compare with the same clock: no worker's
        clock decides it). With `lease`: fenced (see skip)."""
        with self.tx():
            done = self.end_lease(item.id, lease, "state='pending', tries=tries+1, "
                                  f"next_try={self.sql.now_ms} / 1000.0 + ?, reason=?",
                                  (delay, error))
            if done:
                self.log_error(run_id, item.id, error)
        return done

    @retried
    def give_up(self, run_id: int, item: UrlItem, error: str, *,
                lease: HostLease | None = None) -> bool:
        """A leased URL failed for good. With `lease`: fenced (see skip)."""
        with self.tx():
            done = self.end_lease(item.id, lease, "state='failed', tries=tries+1, reason=?",
                                  (error,))
            if done:
                self.log_error(run_id, item.id, error)
        return done

    def log_error(self, run_id: int, url_id: int, error: str) -> None:
        self.sql.execute("INSERT INTO errors (run_id, url_id, error) VALUES (?, ?, ?)",
                         (run_id, url_id, error))
