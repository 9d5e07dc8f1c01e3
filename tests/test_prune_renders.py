"""Prune and pages loaded in a browser: a rendered DOM (its conversion record, and the
screenshot record after it) stays with its capture when prune rewrites the WARC file, its
renders row follows it to the new file and offset, and goes when its capture goes."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
import spasite
from conftest import RunClock, crawl_to_end, write_config
from crashsim import verify

from mirror.archive import warcread
from mirror.browser import find_browser
from mirror.config import load_config
from mirror.manifest.reader import ManifestReader
from mirror.upkeep.prune import prune_site
from mirror.upkeep.retention import Retention

pytestmark = [pytest.mark.browser]
CHROMIUM = find_browser()
if CHROMIUM is None:
    pytestmark.append(pytest.mark.skip(reason="no Chromium-family browser installed"))


def rendered_doms(archive: Path) -> dict[str, tuple[int, str, str]]:
    """page URL -> (run, its capture's WARC file, the DOM read back from the renders row)."""
    reader = ManifestReader(archive / "manifest.sqlite3")
    out = {}
    try:
        with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
            rows = db.execute("SELECT c.id, c.url, c.run_id, c.filename FROM captures c "
                              "JOIN renders r ON r.capture_id = c.id").fetchall()
        for cid, url, run, filename in rows:
            ref = reader.renders.of_capture(cid)
            assert ref is not None and ref.warc_file == filename
            raw = warcread.read_raw(archive / "warc" / ref.warc_file, ref.offset)
            assert raw.rec_type == "conversion"
            assert raw.warc["WARC-Target-URI"] == url
            out[url] = (run, filename, raw.payload.decode())
    finally:
        reader.close()
    return out


async def test_a_pruned_file_keeps_the_rendered_dom_of_each_capture_it_keeps(
        tmp_path: Path) -> None:
    clock = RunClock()
    with spasite.serve(plain=2, apps=5) as site:
        for mode in ("auto", "off"):  # run 2 revisits the app pages: run 1's stay, rendered
            path = write_config(tmp_path, [site.base],
                                crawl={"workers": 2, "parse_processes": 0, "timeout": 10},
                                browser={"mode": mode, "executable": str(CHROMIUM),
                                         "screenshot": True})
            await crawl_to_end(load_config(path), timeout=240, clock=clock)
            clock.next_run()
    archive = tmp_path / "archive"
    before = rendered_doms(archive)
    assert {u.removeprefix(site.base.rstrip("/")) for u in before} == set(site.app_paths())
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        held = {u for (u,) in db.execute(  # run 1's rendered captures run 2's revisits need
            "SELECT c.url FROM captures c JOIN renders r ON r.capture_id = c.id WHERE "
            "c.run_id = 1 AND c.id IN (SELECT original_id FROM captures WHERE run_id = 2)")}
    assert held and held < set(before)  # some renders stay, some go
    result = prune_site(load_config(path), retention=Retention(keep_last=1))
    assert result.dropped_runs == (1,)
    rewritten = {c.old: c.new for c in result.changes}
    after = rendered_doms(archive)
    # the app pages run 2 revisits stay (their payload), each with its rendered DOM
    assert set(after) == held
    for url in held:
        run, old_file, dom = before[url]
        assert after[url] == (run, rewritten[old_file], dom)
        assert all(w in dom for w in site.words(url.removeprefix(site.base.rstrip("/"))))
    # the other rendered pages went with their captures, and so did their renders rows
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        assert db.execute("SELECT COUNT(*) FROM renders").fetchone()[0] == len(held)
    assert verify(archive) == []
