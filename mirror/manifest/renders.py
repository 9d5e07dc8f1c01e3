"""Pages loaded in a browser (issue 35), table renders: where each rendered DOM lies (its WARC
conversion record, right after the page's response record), the browser and how many
requests the page made. A part of ManifestReader (`reader.renders`); a row is written with
its capture, in Captures.commit's transaction (`insert_render`)."""

from __future__ import annotations

from dataclasses import dataclass

from mirror.manifest.db import SqlDb


@dataclass(frozen=True)
class RenderRef:
    """Where a capture's rendered DOM lies: read it with archive.warcread from `offset`."""

    warc_file: str
    offset: int
    length: int


@dataclass(frozen=True)
class RenderRow:
    """What a capture's renders row records."""

    warc_file: str
    offset: int
    length: int
    browser: str  # "mirror/<version>; Chromium/<version>", as WARC-Rendered-By says
    requests: int  # requests the page made (answered or failed)
    at: str  # the conversion record's WARC-Date


class RenderReads:
    """The renders of the manifest, read-only."""

    def __init__(self, sql: SqlDb) -> None:
        self.sql = sql

    def of_capture(self, capture_id: int) -> RenderRef | None:
        """Where the capture's rendered DOM lies; None for a page not loaded in a browser."""
        row = self.sql.execute('SELECT warc_file, "offset", length FROM renders '
                               "WHERE capture_id=?", (capture_id,)).fetchone()
        return None if row is None else RenderRef(row[0], int(row[1]), int(row[2]))

    def captures(self, run_id: int) -> set[int]:
        """The ids of the run's captures that have a rendered DOM."""
        return {int(c) for (c,) in self.sql.execute(
            "SELECT r.capture_id FROM renders r JOIN captures c ON c.id = r.capture_id "
            "WHERE c.run_id=?", (run_id,))}

    def count(self, run_id: int) -> int:
        """How many of the run's pages were loaded in a browser."""
        return int(self.sql.execute(
            "SELECT COUNT(*) FROM renders r JOIN captures c ON c.id = r.capture_id "
            "WHERE c.run_id=?", (run_id,)).fetchone()[0])


def insert_render(sql: SqlDb, capture_id: int, row: RenderRow) -> None:
    """The capture's renders row, in the caller's transaction."""
    sql.execute('INSERT INTO renders (capture_id, warc_file, "offset", length, browser, '
                "requests, at) VALUES (?,?,?,?,?,?,?)",
                (capture_id, row.warc_file, row.offset, row.length, row.browser,
                 row.requests, row.at))


#: the renders rows whose capture is gone (a prune, a capture forgotten), deleted with them
DROP_ORPHANS = "DELETE FROM renders WHERE capture_id NOT IN (SELECT id FROM captures)"
