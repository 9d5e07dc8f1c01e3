"""progress.json: its format, a reader that never trusts it, a writer that replaces it whole,
and the rate over the last seconds."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from mirror.model import Progress
from mirror.run.progressfile import (
    LiveProgress,
    RateWindow,
    eta,
    read_progress,
    write_progress,
)

LIVE = LiveProgress(pid=4242, run_id=3, updated=1_700_000_010.5, started=1_700_000_000.0,
                    done=42, queued=78, failed=3, retried=5, bytes=1_234_567, held_back=2,
                    rate=3.5, eta=78 / 3.5)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    write_progress(path, LIVE)
    assert read_progress(path) == LIVE
    assert json.loads(path.read_text()) == asdict(LIVE)  # plain JSON, one key per field
    no_eta = replace(LIVE, rate=0.0, eta=None)
    write_progress(path, no_eta)
    assert read_progress(path) == no_eta
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no temporary file left


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({**asdict(LIVE), "from_a_later_version": [1, 2]}))
    assert read_progress(path) == LIVE


def test_integers_are_read_as_floats_where_floats_are_due(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({**asdict(LIVE), "updated": 1_700_000_011, "eta": 22}))
    got = read_progress(path)
    assert got is not None and got.updated == 1_700_000_011.0 and got.eta == 22.0
    assert isinstance(got.updated, float) and isinstance(got.eta, float)


def _with(**changes: object) -> str:
    return json.dumps({**asdict(LIVE), **changes})


def _without(key: str) -> str:
    return json.dumps({k: v for k, v in asdict(LIVE).items() if k != key})


MALFORMED = {
    "empty": "",
    "not-json": "{pid: 1",
    "truncated": _with()[:40],
    "a-list": "[1, 2, 3]",
    "null": "null",
    "a-number": "17",
    "missing-done": _without("done"),
    "missing-eta": _without("eta"),
    "done-a-string": _with(done="42"),
    "done-a-float": _with(done=42.0),
    "done-a-bool": _with(done=True),
    "done-negative": _with(done=-1),
    "pid-null": _with(pid=None),
    "rate-a-string": _with(rate="fast"),
    "rate-nan": _with().replace('"rate": 3.5', '"rate": NaN'),
    "updated-infinite": _with().replace('"updated": 1700000010.5', '"updated": Infinity'),
    "eta-negative": _with(eta=-5),
    "eta-huge-int": _with(eta=10**400),
    "deeply-nested": "[" * 100_000,
}


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_content_reads_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "progress.json"
    path.write_text(text)
    assert read_progress(path) is None


def test_missing_unreadable_or_binary_reads_as_none(tmp_path: Path) -> None:
    assert read_progress(tmp_path / "progress.json") is None
    assert read_progress(tmp_path) is None  # a folder
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage\x80")
    assert read_progress(binary) is None


def test_a_reader_never_sees_a_half_written_file(tmp_path: Path) -> None:
    """Readers in another thread, while it is rewritten 300 times: always a whole one; and
    one that opened it before a rewrite still reads what it opened (a rename, not a
    rewrite in place)."""
    path = tmp_path / "progress.json"
    write_progress(path, replace(LIVE, done=0, bytes=0))
    with path.open(encoding="utf-8") as before:
        write_progress(path, replace(LIVE, done=1, bytes=10**6))
        assert json.load(before) == asdict(replace(LIVE, done=0, bytes=0))
    seen: list[LiveProgress | None] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(read_progress(path))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(300):
            write_progress(path, replace(LIVE, done=i, bytes=i * 10**6))
    finally:
        stop.set()
        reader.join()
    assert seen and None not in seen
    assert all(p is not None and p.bytes == p.done * 10**6 for p in seen)
    assert read_progress(path) == replace(LIVE, done=299, bytes=299 * 10**6)


def test_rate_over_the_last_ten_seconds() -> None:
    window = RateWindow()
    assert window.rate() == 0.0
    assert window.add(100.0, 0) == 0.0  # one sample: no rate yet
    assert window.add(102.0, 10) == 5.0
    assert window.add(110.0, 50) == 5.0
    # 20 s on, slower: the samples older than 10 s (but the last of them) are forgotten
    assert window.add(120.0, 60) == pytest.approx((60 - 50) / (120 - 110))
    assert window.add(125.0, 60) == pytest.approx(10 / 15)
    assert window.add(140.0, 60) == 0.0  # nothing done for 15 s


def test_eta_and_a_snapshot_of_crawler_numbers() -> None:
    assert eta(78, 0.0) is None
    assert eta(0, 2.0) == 0.0
    assert eta(10, 4.0) == 2.5
    p = Progress(run_id=3, done=42, queued=78, failed=3, retried=5, bytes=1_234_567,
                 elapsed=10.5, held_back=2)
    assert LiveProgress.of(p, pid=4242, started=1_700_000_000.0, updated=1_700_000_010.5,
                           rate=3.5) == LIVE
    still = LiveProgress.of(p, pid=1, started=0.0, updated=1.0, rate=0.0)
    assert still.eta is None
