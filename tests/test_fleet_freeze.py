"""Frozen workers (issue 37): a worker of a shared run stopped with SIGSTOP (a paused VM, a
stopped job) while it holds a host lease, left frozen until its lease expired and another
worker took the host over, then thawed with SIGCONT, sends no request to that host under
the lease it lost. Each freeze point is enumerated (mirror.crashpoints.FREEZE_STEPS and
"commit:before"; MIRROR_FREEZE_AT makes the worker stop itself there): after taking a
lease, after the lease check right before the send, between a response and its commit,
before a heartbeat.

What is asserted comes from the site's own request log (each request's User-Agent names
its worker) and the workers' lease log lines (database times): no request of the thawed
worker reaches the host between the other worker's takeover and a new lease of its own;
every URL is stored exactly once; both workers exit 0."""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from multihost import MultiHost, SharedWorker, query, read_store, site_file
from test_fleet_pgrestart import _until

from mirror.crashpoints import FREEZE_ENV, FREEZE_STEPS

pytestmark = pytest.mark.slow

NAME = "multi"
PAGES = 500
TTL = 6  # --lease-ttl: the shortest a request timeout of 3 s allows
POINTS = [*(f"{step}#{nth}" for step, nth in zip(FREEZE_STEPS, (1, 20, 2), strict=True)),
          "commit:before#20"]
_LEASE = re.compile(r"sharedfrontier: lease site=(\S+) slot=\d+ epoch=(\d+) owner=(\S+) "
                    r"taken=(\d+)")


def _worker(tmp_path: Path, site: MultiHost, dsn: str, store: str, wid: str,
            slots: int) -> SharedWorker:
    path = site_file(tmp_path / wid / "site.toml", site.start_url, site.hosts, store,
                     name=NAME, workers=slots)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("[crawl]\n", f'[crawl]\nuser_agent = "mirror-{wid}"\n'),
                    encoding="utf-8")
    return SharedWorker(wid, path, dsn, "--lease-ttl", str(TTL))


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _leases(worker: SharedWorker) -> list[tuple[str, int, str, int]]:
    text = worker.mirror_log.read_text(errors="replace") if worker.mirror_log.exists() else ""
    return [(m[1], int(m[2]), m[3], int(m[4])) for m in _LEASE.finditer(text)]


@pytest.mark.parametrize("point", POINTS)
def test_a_thawed_worker_sends_nothing_under_the_lease_it_lost(
        tmp_path: Path, pg_dsn: str, s3: Any, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = MultiHost(tmp_path / "site", PAGES, hosts=2)
    store = f"{s3.url}/{NAME}"
    frozen = _worker(tmp_path, site, pg_dsn, store, "w1", 1)
    other = _worker(tmp_path, site, pg_dsn, store, "w2", 2)
    workers = [frozen, other]
    try:
        monkeypatch.setenv(FREEZE_ENV, point)
        frozen.start()
        monkeypatch.delenv(FREEZE_ENV)
        other.start()
        _until(lambda: _stopped(frozen.proc.pid), 90, f"w1 to freeze at {point}", workers)
        held = {r["site"]: r["lease_epoch"] for r in query(
            pg_dsn, "SELECT site, lease_epoch FROM hosts WHERE lease_owner = 'w1'")}
        assert held, f"{point}: w1 froze holding no lease"

        def taken_over() -> bool:
            rows = query(pg_dsn, "SELECT site, lease_epoch FROM hosts")
            return all(r["lease_epoch"] > held[r["site"]] for r in rows if r["site"] in held)
        _until(taken_over, 60, "w2 to take w1's hosts over", workers)
        time.sleep(0.5)  # w2 sends under its lease meanwhile
        os.kill(frozen.proc.pid, signal.SIGCONT)
        _until(lambda: not any(w.running() for w in workers), 240, "both to exit", workers)
    finally:
        for w in workers:
            w.stop()
        log = site.stop()
    assert frozen.exits == [0] and other.exits == [0], (frozen.output(), other.output())
    leases = _leases(frozen) + _leases(other)
    late = []
    for site_key, epoch in held.items():
        took = min(t for s, e, o, t in leases if s == site_key and e > epoch and o == "w2")
        again = min([t for s, e, o, t in leases if s == site_key and e > epoch and o == "w1"],
                    default=1 << 62)
        host = site_key.rsplit(":", 1)[0]
        late += [r for r in log[host] if r["user_agent"].startswith("mirror-w1")
                 and took < r["arrived_wall"] * 1000 < again]
    assert not late, f"{point}: w1 sent under its lost lease: {late[:5]}"
    stored = Counter(r.uri for r in read_store(store, tmp_path / "bucket")
                     if r.type in ("response", "revisit"))
    assert sorted(u for u in stored if u in set(site.urls())) == sorted(site.urls())
    assert not {u: n for u, n in stored.items() if n > 1}
