"""The robots directives of a run's pages in the manifest (table page_robots, written by
Manifest.captures.commit(robots=...)): a part of ManifestReader (`reader.robots`)."""

from __future__ import annotations

from mirror.manifest.db import SqlDb
from mirror.model import META_ROBOTS, RobotsCounts

#: the pages a count is over: page URLs (not requisites, not robots.txt) with a 2xx answer
_PAGES = ("FROM captures c JOIN urls u ON u.id = c.url_id "
          "LEFT JOIN page_robots p ON p.run_id = c.run_id AND p.url_id = c.url_id "
          "WHERE c.run_id=? AND u.mode='page' AND u.via != 'robots' "
          "AND c.status BETWEEN 200 AND 299")


class Robots:
    """What the run's pages said of indexing and following (meta robots, X-Robots-Tag)."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def page_robots(self, run_id: int) -> list[tuple[str, bool, bool]]:
        """(url, noindex, nofollow) of each page of the run that carries a directive."""
        return [(u, bool(i), bool(f)) for u, i, f in self.sql.execute(
            "SELECT u.url, p.noindex, p.nofollow FROM page_robots p "
            "JOIN urls u ON u.id = p.url_id WHERE p.run_id=? ORDER BY u.url", (run_id,))]

    def noindex(self, run_id: int) -> set[str]:
        """The URLs of the run's pages that said noindex (meta robots or X-Robots-Tag)."""
        return {u for (u,) in self.sql.execute(
            "SELECT u.url FROM page_robots p JOIN urls u ON u.id = p.url_id "
            "WHERE p.run_id=? AND p.noindex=1", (run_id,))}

    def counts(self, run_id: int) -> RobotsCounts:
        row = self.sql.execute(
            "SELECT COUNT(DISTINCT c.url_id), "
            "COUNT(DISTINCT CASE WHEN p.noindex=1 THEN c.url_id END), "
            "COUNT(DISTINCT CASE WHEN p.nofollow=1 THEN c.url_id END), "
            "COUNT(DISTINCT CASE WHEN u.depth=0 THEN c.url_id END), "
            "COUNT(DISTINCT CASE WHEN u.depth=0 AND p.nofollow=1 THEN c.url_id END), "
            "COUNT(DISTINCT CASE WHEN p.nofollow=1 AND p.noindex=0 THEN c.url_id END) "
            f"{_PAGES}", (run_id,)).fetchone()
        pages, noindex, nofollow, starts, start_nofollow, indexed = (int(n) for n in row)
        return RobotsCounts(pages, noindex, nofollow, starts, start_nofollow, indexed)

    def not_followed(self, url: str) -> tuple[int, list[tuple[str, bool]]] | None:
        """For a URL its last run skipped under the rule meta-robots: (that run, the first
        ten pages that link to it, each with whether it said nofollow); None for any
        other URL."""
        row = self.sql.execute("SELECT id, run_id FROM urls WHERE url=? AND state='skipped' "
                               "AND reason=?", (url, META_ROBOTS)).fetchone()
        if row is None:
            return None
        url_id, run_id = row
        return run_id, [(u, bool(n)) for u, n in self.sql.execute(
            "SELECT s.url, COALESCE(p.nofollow, 0) FROM links l JOIN urls s ON s.id = l.src "
            "LEFT JOIN page_robots p ON p.url_id = l.src AND p.run_id = ? "
            "WHERE l.dst=? ORDER BY s.url LIMIT 10", (run_id, url_id))]
