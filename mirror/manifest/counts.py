"""A run's numbers in the manifest, for run reports, status and the crawl's budgets: the
reader's part `counts` (read-only; the writer has the same)."""

from __future__ import annotations

from mirror.manifest.db import SqlDb
from mirror.model import SITEMAP_BUDGET


class Counts:
    """What a run fetched, stored, skipped and failed, counted (and the failures listed)."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def captures(self, run_id: int) -> int:
        return int(self.sql.execute("SELECT COUNT(*) FROM captures WHERE run_id=?",
                                    (run_id,)).fetchone()[0])

    def done_pages(self, run_id: int) -> int:
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM urls WHERE run_id=? AND mode='page' "
            "AND state IN ('done', 'failed', 'leased')", (run_id,)
        ).fetchone()[0])

    def pages_stored(self, run_id: int) -> int:
        """Pages of the run with a 2xx or 304 answer (revisits too): what a person can read."""
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM captures c JOIN urls u ON u.id = c.url_id "
            "WHERE c.run_id=? AND u.mode='page' AND u.via != 'robots' "
            "AND (c.status BETWEEN 200 AND 299 OR c.status = 304)", (run_id,)
        ).fetchone()[0])

    def host_usage(self, run_id: int) -> dict[str, tuple[int, int]]:
        """site -> (URLs fetched, body bytes) in this run, for the per-host budgets."""
        rows = self.sql.execute(
            "SELECT u.site, COUNT(*), COALESCE(SUM(c.payload_length), 0) FROM captures c "
            "JOIN urls u ON u.id = c.url_id WHERE c.run_id=? GROUP BY u.site", (run_id,))
        return {s: (n, int(b)) for s, n, b in rows}

    def url_states(self, run_id: int) -> dict[str, int]:
        rows = self.sql.execute(
            "SELECT state, COUNT(*) FROM urls WHERE run_id=? GROUP BY state", (run_id,)
        )
        return {s: n for s, n in rows}

    def skip_counts(self, run_id: int) -> dict[str, int]:
        """URLs not fetched, by rule: the skipped ones, and those listed by sitemaps past the
        run's sitemap URL budget (never stored: counted in sitemap_reads)."""
        rows = self.sql.execute(
            "SELECT reason, COUNT(*) FROM urls WHERE run_id=? AND state='skipped' "
            "GROUP BY reason ORDER BY 2 DESC", (run_id,)
        )
        counts = {r: n for r, n in rows}
        (beyond,) = self.sql.execute("SELECT COALESCE(SUM(beyond), 0) FROM sitemap_reads "
                                     "WHERE run_id=?", (run_id,)).fetchone()
        if beyond:
            counts[SITEMAP_BUDGET] = counts.get(SITEMAP_BUDGET, 0) + int(beyond)
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def failed(self, run_id: int) -> list[tuple[str, str]]:
        return self.sql.execute(
            "SELECT url, COALESCE(reason, 'HTTP ' || status) FROM urls "
            "WHERE run_id=? AND state='failed' ORDER BY url", (run_id,)
        ).fetchall()

    def last_error(self, run_id: int) -> str | None:
        row = self.sql.execute(
            "SELECT u.url || ': ' || e.error FROM errors e JOIN urls u ON u.id = e.url_id "
            "WHERE e.run_id=? ORDER BY e.rowid DESC LIMIT 1", (run_id,),
        ).fetchone()
        return row[0] if row else None

    def error_counts(self, run_id: int, limit: int = 10) -> list[tuple[str, int]]:
        return self.sql.execute(
            "SELECT error, COUNT(*) FROM errors WHERE run_id=? GROUP BY error "
            "ORDER BY 2 DESC, 1 LIMIT ?", (run_id, limit)
        ).fetchall()

    def _join(self) -> str:
        """A join whose order is the order written: SQLite's CROSS JOIN (its planner probed
        the 1.2 M URLs for each of a million-page run's 20 M links before the few targets
        that matter: 40 s, against 4 s this way round); PostgreSQL plans hash joins itself."""
        return "CROSS JOIN" if self.sql.dialect == "sqlite" else "JOIN"

    #: the run's broken targets: failed, or answered 4xx/5xx
    _BROKEN = ("WITH broken(id, url, status) AS MATERIALIZED (SELECT id, url, status FROM urls "
               "WHERE run_id=? AND (state='failed' OR status >= 400)) ")

    def broken_links(self, run_id: int, limit: int = 50) -> list[tuple[str, int | None, str]]:
        """(target URL, status or None, a page linking to it) for 4xx/5xx/failed targets.
        A robots.txt is no page: the /sitemap.xml guessed for it may well be missing."""
        join = self._join()
        return self.sql.execute(
            f"""{self._BROKEN}SELECT b.url, b.status, MIN(s.url) FROM links l
                 {join} broken b ON b.id = l.dst {join} urls s ON s.id = l.src
               WHERE s.via != 'robots' GROUP BY b.id, b.url, b.status ORDER BY b.url
               LIMIT ?""",
            (run_id, limit),
        ).fetchall()

    def broken_links_total(self, run_id: int) -> int:
        """How many targets broken_links would list without its limit."""
        join = self._join()
        return int(self.sql.execute(
            f"""{self._BROKEN}SELECT COUNT(DISTINCT b.id) FROM links l
                 {join} broken b ON b.id = l.dst {join} urls s ON s.id = l.src
               WHERE s.via != 'robots'""",
            (run_id,)).fetchone()[0])

    def needs_browser(self, run_id: int) -> list[tuple[str, str]]:
        """(url, note) of the pages of a run with a note: why one may need a browser to
        archive, or why its links were partly or not read (`parse-budget: ...`)."""
        return self.sql.execute(
            "SELECT u.url, n.note FROM notes n JOIN urls u ON u.id = n.url_id "
            "WHERE n.run_id=? ORDER BY u.url", (run_id,)).fetchall()

    def unreachable_hosts(self, run_id: int, prefix: str) -> list[tuple[str, str, int]]:
        """(host, reason, URLs) of the hosts whose URLs failed with a reason starting with
        `prefix` ("host unreachable: "), by host."""
        rows = self.sql.execute(
            "SELECT site, reason, COUNT(*) FROM urls WHERE run_id=? AND state='failed' "
            "AND substr(reason, 1, ?) = ? GROUP BY site, reason ORDER BY site",
            (run_id, len(prefix), prefix))
        return [(site, reason[len(prefix):], n) for site, reason, n in rows]

    def sitemap_only_pages(self, run_id: int) -> int:
        """Pages of the run fetched because a sitemap lists them, that no page, start URL,
        redirect or robots.txt of the run leads to: every link to them is from a sitemap
        (a URL via 'sitemap' fetched as a requisite; the pages a sitemap lists are via
        'sitemap' too, but pages). Links from URLs of earlier runs only do not count. The
        links are read once, and their sources looked up only for the sitemaps' targets."""
        join, sitemap = self._join(), "s.via = 'sitemap' AND s.mode = 'requisite'"
        return int(self.sql.execute(
            f"""WITH sitemaps(id) AS MATERIALIZED (
                   SELECT s.id FROM urls s WHERE s.run_id = ? AND {sitemap}),
                 listed(dst) AS MATERIALIZED (
                   SELECT DISTINCT l.dst FROM sitemaps m {join} links l ON l.src = m.id),
                 linked(dst) AS MATERIALIZED (
                   SELECT DISTINCT l.dst FROM links l {join} listed c ON c.dst = l.dst
                   {join} urls s ON s.id = l.src WHERE s.run_id = ? AND NOT ({sitemap}))
               SELECT COUNT(*) FROM listed c {join} urls d ON d.id = c.dst
               WHERE d.run_id = ? AND d.mode = 'page' AND d.state = 'done'
                 AND d.via != 'start' AND c.dst NOT IN (SELECT dst FROM linked)""",
            (run_id, run_id, run_id)).fetchone()[0])

    def pages(self) -> int:
        """URLs with an HTML capture in any run: the pages the archive can show."""
        return int(self.sql.execute(
            "SELECT COUNT(DISTINCT url_id) FROM captures "
            "WHERE mime IN ('text/html', 'application/xhtml+xml')").fetchone()[0])

    def capture_stats(self, run_id: int) -> dict[str, object]:
        status = dict(self.sql.execute(
            "SELECT CASE status WHEN 304 THEN 'not modified' ELSE (status / 100) || 'xx' END, "
            "COUNT(*) FROM captures WHERE run_id=? GROUP BY 1",
            (run_id,),
        ).fetchall())
        mimes = dict(self.sql.execute(
            "SELECT mime, COUNT(*) FROM captures WHERE run_id=? GROUP BY mime "
            "ORDER BY 2 DESC LIMIT 10", (run_id,),
        ).fetchall())
        row = self.sql.execute(
            "SELECT COALESCE(SUM(payload_length), 0), COALESCE(SUM(length + req_length), 0) "
            "FROM captures WHERE run_id=?", (run_id,),
        ).fetchone()
        return {"status": status, "mime": mimes, "payload_bytes": int(row[0]),
                "warc_bytes": int(row[1])}
