"""`mirror serve` and `mirror export` of a run shared by several workers (`--db DSN`): its
WARC files and index read from its store, its manifest a SQLite snapshot of the PostgreSQL
database made in one REPEATABLE READ transaction (manifest/pgsnapshot.py), consistent
even while the workers write: taken again and again during a run, no snapshot has a URL
done without its capture, or a capture of a URL not done (the tables are copied one after
the other; under READ COMMITTED a commit between two of them would tear the copy)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from multihost import MultiHost, SharedWorker, site_file

from mirror.manifest.pgsnapshot import snapshot_to_sqlite
from mirror.replay.captures import CaptureIndex
from mirror.replay.serve import Site, make_app
from mirror.store.files import SharedRunFiles
from mirror.store.objstore import open_store

pytestmark = pytest.mark.slow

PAGES = 400
DEADLINE = 240.0
#: captures in a URL's state that is not done, and done URLs without a capture
TORN = """SELECT (SELECT count(*) FROM captures c JOIN urls u ON u.id = c.url_id
                  WHERE u.state != 'done' AND u.run_id = c.run_id),
                 (SELECT count(*) FROM urls u WHERE u.state = 'done' AND NOT EXISTS
                  (SELECT 1 FROM captures c WHERE c.url_id = u.id AND c.run_id = u.run_id))"""


def _run(tmp_path: Path, pg_dsn: str, store: str, snapshots: Path) -> tuple[
        list[SharedWorker], list[tuple[int, int, int]]]:
    """Two workers on the multi-host site; snapshots of the manifest while they run: for
    each, (captures, torn one way, torn the other)."""
    site = MultiHost(tmp_path / "site", PAGES)
    workers = [SharedWorker(f"w{n}", site_file(tmp_path / f"w{n}" / "site.toml",
                                               site.start_url, site.hosts, store,
                                               delay=0.01), pg_dsn, "--lease-ttl", "6")
               for n in (1, 2)]
    seen: list[tuple[int, int, int]] = []
    began = time.monotonic()
    try:
        for w in workers:
            w.start()
        while any(w.running() for w in workers):
            assert time.monotonic() - began < DEADLINE, [w.output() for w in workers]
            path = snapshots / f"s{len(seen)}.sqlite3"
            try:
                snapshot_to_sqlite(pg_dsn, path)
            except Exception:  # noqa: BLE001 - the first worker is still making the tables
                time.sleep(0.2)
                continue
            db = sqlite3.connect(path)
            captures = db.execute("SELECT count(*) FROM captures").fetchone()[0]
            seen.append((captures, *db.execute(TORN).fetchone()))
            db.close()
            path.unlink()
    finally:
        for w in workers:
            w.stop()
        site.stop()
    return workers, seen


async def test_serve_and_export_a_shared_run_from_a_consistent_snapshot(
        tmp_path: Path, pg_dsn: str, s3: Any, aiohttp_client: Any) -> None:
    store = f"{s3.url}/multi"
    (tmp_path / "snapshots").mkdir()
    workers, seen = _run(tmp_path, pg_dsn, store, tmp_path / "snapshots")
    assert all(code == 0 for w in workers for code in w.exits), [w.output() for w in workers]
    during = [s for s in seen if 0 < s[0]]
    assert len(during) >= 3, f"too few snapshots during the run: {seen}"
    assert all(s[1:] == (0, 0) for s in seen), f"torn snapshots: {seen}"
    # export: the whole run, every worker's files
    out = subprocess.run([sys.executable, "-m", "mirror", "export", str(workers[0].site),
                          "--db", pg_dsn, "--to", str(tmp_path / "export")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    pages = list((tmp_path / "export").rglob("*.html"))
    assert len(pages) >= PAGES, (len(pages), out.stdout)
    # serve: pages from both workers' files, the runs from the snapshot
    files = SharedRunFiles(open_store(store), pg_dsn)
    client = await aiohttp_client(make_app(files, Site("multi")), auto_decompress=False)
    try:
        by_worker = {c.filename.split("-")[1]: c for c in CaptureIndex.load(files).captures
                     if "/page/" in c.url}
        assert set(by_worker) == {"w1", "w2"}, by_worker
        for cap in by_worker.values():
            resp = await client.get(f"/{cap.timestamp}id_/{cap.url}")
            assert resp.status == 200 and b"<h1>Page" in await resp.read(), cap
        landing = await (await client.get("/")).text()
        assert "complete" in landing, landing[:2000]
    finally:
        files.close()
    print(f"\nsnapshots during the run (captures, torn): {seen}")
