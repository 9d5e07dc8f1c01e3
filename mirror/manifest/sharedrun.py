"""The manifest's verbs for a run shared by several workers: hosts leased with a fencing
epoch, workers' heartbeats, the WARC files they write (DISTRIBUTED.md §5.2, §5.4).

The same SQL runs on SQLite (one writer at a time: BEGIN IMMEDIATE serialises the workers)
and PostgreSQL (rows claimed with FOR UPDATE SKIP LOCKED). Every time is the database's
clock, in milliseconds since the epoch, so that no worker's clock decides a lease. The
state machines are in manifest.schema's docstring. Manifest has these verbs as its part
`sharedrun` (its WARC files' marks are the part `filemarks`); a worker's loop:

    joined = m.sharedrun.join_or_start_run(started_at, digest, seeds)
    m.sharedrun.register_worker(owner, joined.run_id); m.sharedrun.recover(owner)
    for lease in m.sharedrun.lease_hosts(owner, max_hosts, ttl):
        for item in m.sharedrun.lease_urls(lease, k):
            ... fetch, append to the worker's own WARC file, flush ...
            if not m.captures.commit(run_id, item, row, found, lease=lease):
                ... cut the WARC file back to before the record ...
        m.sharedrun.release_host(lease, delay)
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from mirror.manifest.db import ManifestConflict, SqlDb, Tx
from mirror.manifest.schema import FRONTIER_URLS, URL_ITEM_COLUMNS
from mirror.manifest.sharedreads import SharedRunReads
from mirror.model import UNFINISHED, HostLease, Joined, NewUrl, UrlItem

#: times a transaction that the database rolled back to break a deadlock is run again
RETRIES = 6
#: seconds of the first wait before running it again (then doubled, with jitter)
BACKOFF = 0.005
#: pg_advisory_xact_lock key held while a worker joins or starts a run
_RUNS_LOCK = 0x6D6972726F73  # "mirros"
#: ... and while a worker leases URLs under a page budget ([scope] max_pages)
_BUDGET_LOCK = 0x6D6972726F62  # "mirrob"
#: the URLs a shared run still has to fetch: pending or leased (robots.txt, fetched out of
#: band by the robots gate, is not one of them)
_TO_FETCH = f"state IN ('pending', 'leased') AND {FRONTIER_URLS}"
#: ... once its page budget is spent: pending pages wait for the next run
_TO_FETCH_NO_PAGES = ("(state = 'leased' OR state = 'pending' AND mode = 'requisite') "
                      f"AND {FRONTIER_URLS}")

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound="_InGroup")


class _InGroup(Protocol):
    tx: Tx  # the writer's transactions (a part shares its writer's)


def retried(method: Callable[Concatenate[M, P], T]) -> Callable[Concatenate[M, P], T]:
    """A write run again when the database rolled its transaction back to break a
    deadlock with another worker's (ManifestConflict; safe, as it was all or nothing), a
    few times; not inside a group, whose transaction is its caller's."""
    @functools.wraps(method)
    def run(self: M, /, *args: P.args, **kwargs: P.kwargs) -> T:
        attempt = 0
        while True:
            try:
                return method(self, *args, **kwargs)
            except ManifestConflict:
                attempt += 1
                if self.tx.grouped or attempt >= RETRIES:
                    raise
                time.sleep(random.uniform(0, BACKOFF * 2 ** attempt))
    return run


def wait_ms(delay: float) -> int:
    """`delay` seconds as the ms to add to the database's now for "not before": rounded up,
    plus 1 for now_ms's own truncation, so that a host is never due early (the delay
    between two workers' requests loses nothing to the ms)."""
    return math.ceil(delay * 1000) + 1 if delay > 0 else 0


def fence(lease: HostLease | None) -> tuple[str, tuple[object, ...]]:
    """The condition (and its parameters) a URL row meets while leased under `lease`."""
    if lease is None:
        return "", ()
    return " AND lease_owner=? AND lease_epoch=?", (lease.owner, lease.epoch)


class SharedRun(SharedRunReads):
    """The writer's part for a run shared by several workers: joining the run, the
    workers' heartbeats, host leases (fenced by an epoch) and the run's fair share."""

    def __init__(self, sql: SqlDb, tx: Tx, new_run: Callable[[str, str, Sequence[NewUrl]], int],
                 count_done_pages: Callable[[int], int]) -> None:
        super().__init__(sql)
        self.tx = tx
        self._tx = tx  # one transaction per verb, or the writer's open group
        self._new_run = new_run  # the writer's: a run row and its start URLs
        self._count_done_pages = count_done_pages  # the reader's
        #: rows made for each new site in hosts (set_host_slots: what the site config grants)
        self.host_slots = 1

    # -- runs and workers ------------------------------------------------------------------
    @retried
    def join_or_start_run(self, started_at: str, config_digest: str,
                          seeds: Sequence[NewUrl] = (), *, may_start: bool = True
                          ) -> Joined | None:
        """The run every worker shares: the last run when it is unfinished, else a new one
        with its start URLs (None when not `may_start`: a worker restarted to finish its
        run, which others finished meanwhile). Atomic across machines: the first worker
        starts it, the others join it (an advisory lock on PostgreSQL; SQLite's write
        lock)."""
        with self._tx():
            self.sql.lock(_RUNS_LOCK)
            row = self.sql.execute("SELECT id, state FROM runs ORDER BY id DESC LIMIT 1"
                                   ).fetchone()
            if row is None or row[1] not in UNFINISHED:
                if not may_start:
                    return None
                return Joined(self._new_run(started_at, config_digest, seeds), True)
            self.sql.execute("UPDATE runs SET state='running', finished_at=NULL WHERE id=? "
                             "AND state != 'running'", (row[0],))
            for slot in range(self.host_slots):  # sites of URLs found before schema 4
                self.sql.execute(
                    "INSERT INTO hosts (site, slot) SELECT DISTINCT site, ? FROM urls "
                    "WHERE state IN ('pending', 'leased') ON CONFLICT DO NOTHING", (slot,))
        return Joined(int(row[0]), False)

    @retried
    def set_host_slots(self, slots: int) -> None:
        """Each site has `slots` host rows from now on (a site config that grants more
        than one connection per host); existing sites get theirs at once."""
        self.host_slots = slots
        with self._tx():
            for slot in range(1, slots):
                self.sql.execute("INSERT INTO hosts (site, slot) SELECT site, ? FROM hosts "
                                 "WHERE slot=0 ON CONFLICT DO NOTHING", (slot,))

    @retried
    def register_worker(self, owner: str, run_id: int) -> None:
        """A worker starts (or starts again) on a run. `owner` must be unique to the
        process (a lease is fenced by it): host name and process id, or a configured id."""
        now = self.sql.now_ms
        with self._tx():
            self.sql.execute(
                f"INSERT INTO workers (id, run_id, started, alive) VALUES (?, ?, {now}, {now}) "
                "ON CONFLICT(id) DO UPDATE SET run_id=excluded.run_id, "
                "started=excluded.started, alive=excluded.alive", (owner, run_id))

    @retried
    def heartbeat(self, owner: str) -> bool:
        """The worker is alive; False when it is not registered (forgotten)."""
        with self._tx():
            row = self.sql.execute(f"UPDATE workers SET alive={self.sql.now_ms} WHERE id=? "
                                   "RETURNING id", (owner,)).fetchone()
        return row is not None

    # -- host leases ---------------------------------------------------------------------
    @retried
    def lease_hosts(self, owner: str, max_hosts: int, ttl: float,
                    pages: bool = True) -> list[HostLease]:
        """Lease up to `max_hosts` host slots for `ttl` seconds: due slots (next_fetch_at,
        block_until) whose lease is free, with a due pending URL (not `pages`: a due pending
        requisite), or expired; the longest waiting first. Taking an expired lease over
        sends its URLs back to pending (a crashed worker's hosts are taken over even when
        all their URLs were leased)."""
        now, ttl_ms = self.sql.now_ms, int(ttl * 1000)
        requisite = "" if pages else "AND u.mode = 'requisite'"
        with self._tx():
            rows = self.sql.execute(
                f"""SELECT id, site, slot, lease_owner, lease_epoch FROM hosts h
                    WHERE next_fetch_at <= {now} AND block_until <= {now}
                      AND (lease_owner IS NOT NULL AND lease_until <= {now}
                           OR lease_owner IS NULL AND EXISTS (
                             SELECT 1 FROM urls u WHERE u.site = h.site
                             AND u.state = 'pending' AND u.via != 'robots' {requisite}
                             AND u.next_try * 1000 <= {now}))
                    ORDER BY next_fetch_at, id LIMIT ?{self.sql.skip_locked}""",
                (max_hosts,)).fetchall()
            leases = []
            for host_id, site, slot, old_owner, old_epoch in rows:
                if old_owner is not None:
                    self._requeue(site, old_owner, old_epoch)
                epoch, until = self.sql.execute(
                    f"""UPDATE hosts SET lease_owner=?, lease_until={now} + ?,
                          lease_epoch=(SELECT MAX(lease_epoch) FROM hosts WHERE site=?) + 1
                        WHERE id=? RETURNING lease_epoch, lease_until""",
                    (owner, ttl_ms, site, host_id)).fetchone()
                leases.append(HostLease(host_id, site, slot, owner, int(epoch),
                                        int(until) - ttl_ms, int(until)))
        return leases

    @retried
    def lease_urls(self, lease: HostLease, k: int,
                   budget: tuple[int, int] | None = None) -> list[UrlItem]:
        """Lease up to `k` due pending URLs of the lease's site under it, oldest first;
        none once the lease has expired or is lost (renew it first). With `budget`, (run
        id, max_pages): the run's pages taken (done, failed or leased, by any worker) stay
        within max_pages; past it, only requisites are leased. The budget is counted under
        a lock that every worker leasing under one takes, so two never spend its last
        pages twice."""
        now = self.sql.now_ms
        with self._tx():
            held = self.sql.execute(  # locked: no takeover until these URLs are leased
                f"SELECT 1 FROM hosts WHERE id=? AND lease_owner=? AND lease_epoch=? "
                f"AND lease_until > {now}{self.sql.for_update}",
                (lease.host_id, lease.owner, lease.epoch)).fetchone()
            if held is None:
                return []
            only = ""
            if budget is not None:
                self.sql.lock(_BUDGET_LOCK)
                left = self.pages_left(*budget)
                if left <= 0:
                    only = "AND mode = 'requisite'"
                else:
                    k = min(k, left)  # at most `left` pages among them
            rows = self.sql.execute(
                f"""UPDATE urls SET state='leased', lease_owner=?, lease_epoch=?
                    WHERE id IN (SELECT id FROM urls WHERE site=? AND state='pending'
                                 AND via != 'robots' AND next_try * 1000 <= {now} {only}
                                 ORDER BY id LIMIT ?{self.sql.skip_locked})
                    RETURNING {URL_ITEM_COLUMNS}""",
                (lease.owner, lease.epoch, lease.site, k)).fetchall()
        return sorted((UrlItem(*r) for r in rows), key=lambda item: item.id)

    def pages_left(self, run_id: int, max_pages: int) -> int:
        """Pages the run may still take under a budget of `max_pages` (at least 0): those
        done, failed or leased, by any worker, are taken."""
        return max(0, max_pages - self._count_done_pages(run_id))

    @retried
    def renew_host(self, lease: HostLease, ttl: float) -> HostLease | None:
        """The lease for `ttl` seconds more from now; None when it is lost (taken over by
        another worker, or ended by recover): the worker must stop fetching from the host."""
        ttl_ms = int(ttl * 1000)
        with self._tx():
            row = self.sql.execute(
                f"UPDATE hosts SET lease_until={self.sql.now_ms} + ? WHERE id=? "
                "AND lease_owner=? AND lease_epoch=? RETURNING lease_until",
                (ttl_ms, lease.host_id, lease.owner, lease.epoch)).fetchone()
        if row is None:
            return None
        return HostLease(lease.host_id, lease.site, lease.slot, lease.owner, lease.epoch,
                         int(row[0]) - ttl_ms, int(row[0]))

    @retried
    def release_host(self, lease: HostLease, delay: float) -> int | None:
        """End the lease: no request to the slot for `delay` seconds from now (database
        time: the politeness delay, Crawl-delay); URLs still leased under it go back to
        pending. Returns the database time it ended (ms), or None (nothing written) when
        the lease was lost already."""
        now = self.sql.now_ms
        with self._tx():
            row = self.sql.execute(
                f"UPDATE hosts SET lease_owner=NULL, lease_until=0, "
                f"next_fetch_at={now} + ? WHERE id=? AND lease_owner=? "
                f"AND lease_epoch=? RETURNING next_fetch_at - ?",
                (wait_ms(delay), lease.host_id, lease.owner, lease.epoch,
                 wait_ms(delay))).fetchone()
            if row is not None:
                self._requeue(lease.site, lease.owner, lease.epoch)
        return None if row is None else int(row[0])

    @retried
    def block_host(self, site: str, seconds: float) -> None:
        """No request to any slot of `site` for `seconds` from now (Retry-After, a 429 or
        503 backoff), for every worker; a block already longer stays."""
        until = f"{self.sql.now_ms} + ?"
        with self._tx():
            self.sql.execute(
                f"UPDATE hosts SET block_until = CASE WHEN block_until > {until} "
                f"THEN block_until ELSE {until} END WHERE site=?",
                (int(seconds * 1000), int(seconds * 1000), site))

    @retried
    def recover(self, owner: str, delay: float = 0.0) -> int:
        """A worker (re)starting: its own leases end at once, and every expired lease of
        another worker (crashed, or stalled past its ttl); their URLs go back to pending.
        Its own hosts wait `delay` seconds from now (the politeness delay: it may have
        sent a request to them just before it died). Returns how many URLs went back."""
        now = self.sql.now_ms
        with self._tx():
            urls = self.sql.execute(
                "UPDATE urls SET state='pending', lease_owner=NULL, lease_epoch=NULL "
                "WHERE state='leased' AND lease_owner=?", (owner,)).rowcount
            self.sql.execute(
                f"UPDATE hosts SET lease_owner=NULL, lease_until=0, next_fetch_at = CASE "
                f"WHEN next_fetch_at > {now} + ? THEN next_fetch_at ELSE {now} + ? END "
                "WHERE lease_owner=?", (wait_ms(delay), wait_ms(delay), owner))
            expired = self.sql.execute(
                f"SELECT id, site, lease_owner, lease_epoch FROM hosts WHERE lease_owner IS "
                f"NOT NULL AND lease_until <= {self.sql.now_ms}{self.sql.skip_locked}"
            ).fetchall()
            for host_id, site, old_owner, old_epoch in expired:
                urls += self._requeue(site, old_owner, old_epoch)
                self.sql.execute("UPDATE hosts SET lease_owner=NULL, lease_until=0 "
                                 "WHERE id=?", (host_id,))
        return urls

    def _requeue(self, site: str, owner: str, epoch: int) -> int:
        """URLs of `site` leased under (owner, epoch) back to pending: how many."""
        return int(self.sql.execute(
            "UPDATE urls SET state='pending', lease_owner=NULL, lease_epoch=NULL "
            "WHERE site=? AND state='leased' AND lease_owner=? AND lease_epoch=?",
            (site, owner, epoch)).rowcount)

    def fair_share(self, run_id: int, alive_within: float, pages: bool = True) -> int:
        """Host slots per worker when they are shared out evenly: sites with URLs still to
        fetch (not `pages`: the page budget is spent) over the workers of the run seen
        alive within `alive_within` seconds (at least 1)."""
        since = f"{self.sql.now_ms} - {int(alive_within * 1000)}"
        sites, workers = self.sql.execute(
            "SELECT (SELECT COUNT(DISTINCT site) FROM urls WHERE run_id=? AND "
            f"{_TO_FETCH if pages else _TO_FETCH_NO_PAGES}), (SELECT COUNT(*) FROM workers "
            f"WHERE run_id=? AND alive >= {since})", (run_id, run_id)).fetchone()
        return max(1, -(-int(sites) * self.host_slots // max(int(workers), 1)))

    def unfinished(self, run_id: int, pages: bool = True) -> int:
        """URLs of the run still to fetch, by any worker (pending or leased; robots.txt
        is fetched out of band, not counted): 0 when the shared run is over. Not `pages`
        (the page budget is spent): pending pages are not counted, they wait for the next
        run."""
        return int(self.sql.execute(
            f"SELECT COUNT(*) FROM urls WHERE run_id=? AND "
            f"{_TO_FETCH if pages else _TO_FETCH_NO_PAGES}", (run_id,)).fetchone()[0])
