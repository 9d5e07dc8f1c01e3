"""The robots.txt answers of a shared run (table robots_answers): the worker that fetches a
host's robots.txt keeps its answer here, and the other workers of the run read it instead of
fetching it again (its capture is in the fetcher's WARC file, which they do not have)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence

from mirror.manifest.db import SqlDb, Tx


class RobotsAnswers:
    """robots.txt answers by (run, URL): a status with its headers and body, or an error."""

    def __init__(self, sql: SqlDb, tx: Tx) -> None:
        self.sql = sql
        self.tx = tx

    def save(self, run_id: int, url: str, status: int, headers: Sequence[tuple[str, str]],
             body: bytes, truncated: bool) -> None:
        """The answer to `url` in the run (a later one replaces it: a refetch after its
        fetcher died)."""
        self._put(run_id, url, status, json.dumps([list(h) for h in headers]),
                  base64.b64encode(body).decode("ascii"), int(truncated))

    def save_error(self, run_id: int, url: str, error: str) -> None:
        """No answer to `url`: the fetch failed with `error` (status 0)."""
        self._put(run_id, url, 0, "[]", base64.b64encode(error.encode()).decode("ascii"), 0)

    def get(self, run_id: int, url: str
            ) -> tuple[int, tuple[tuple[str, str], ...], bytes, bool] | str | None:
        """(status, headers, body, truncated) of the run's answer to `url`, the error text
        of a failed fetch, or None when no worker of the run has fetched it."""
        row = self.sql.execute("SELECT status, headers, body, truncated FROM robots_answers "
                               "WHERE run_id=? AND url=?", (run_id, url)).fetchone()
        if row is None:
            return None
        status, headers, body = int(row[0]), str(row[1]), base64.b64decode(row[2])
        if status == 0:
            return body.decode(errors="replace")
        return (status, tuple((str(k), str(v)) for k, v in json.loads(headers)), body,
                bool(row[3]))

    def _put(self, run_id: int, url: str, status: int, headers: str, body: str,
             truncated: int) -> None:
        with self.tx():
            self.sql.execute(
                "INSERT INTO robots_answers (run_id, url, status, headers, body, truncated) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, url) DO UPDATE SET "
                "status=excluded.status, headers=excluded.headers, body=excluded.body, "
                "truncated=excluded.truncated", (run_id, url, status, headers, body, truncated))
