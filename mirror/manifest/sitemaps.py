"""The sitemaps a run read and its sitemap URL budget ([scope] max_sitemap_urls) in the
manifest: a base of Manifest."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from mirror.manifest.db import SqlDb


class Sitemaps:
    """How many URLs each sitemap of a run listed, and how many of them were past the run's
    budget (counted, never stored as URLs). A sitemap read again (a resumed run fetches a
    sitemap whose capture a crash lost) replaces its row, so the budget is never spent
    twice on one sitemap."""

    def __init__(self, sql: SqlDb, tx: Callable[[], AbstractContextManager[None]]) -> None:
        self.sql = sql
        self._tx = tx  # the writer's: a transaction, or the open group's

    def urls_taken(self, run_id: int, but: int = 0) -> int:
        """URLs of the run's sitemaps taken within the budget, but those of URL id `but`."""
        row = self.sql.execute(
            "SELECT COALESCE(SUM(listed - beyond), 0) FROM sitemap_reads "
            "WHERE run_id=? AND url_id != ?", (run_id, but)).fetchone()
        return int(row[0])

    def record_read(self, run_id: int, url_id: int, listed: int, beyond: int) -> None:
        with self._tx():
            self.sql.execute(
                "INSERT INTO sitemap_reads (run_id, url_id, listed, beyond) VALUES (?,?,?,?) "
                "ON CONFLICT (run_id, url_id) DO UPDATE SET listed=excluded.listed, "
                "beyond=excluded.beyond", (run_id, url_id, listed, beyond))
