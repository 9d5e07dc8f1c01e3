"""What the run report and the end-of-run summary say of pages built by scripts ([browser]):
the pages loaded in a browser, the browser page loads, the renders that failed and why, and
for the pages left as fetched how to have them loaded in one. `auto` with no browser on the
system works as `off` (same requests, same archive) and says how to install one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import spasite
from conftest import write_config

from mirror.browser import find
from mirror.browserconfig import install_command, this_system
from mirror.cli.main import main
from mirror.run.browsernotes import BrowserFacts, loaded_text, needing_text, split_notes

CHROMIUM = find.find_browser()


def test_notes_split_into_needing_and_failed() -> None:
    notes = [("http://a/1", "an empty app root (root) that scripts fill"),
             ("http://a/2", "browser: timeout after 30 s"),
             ("http://a/3", "2 characters of text and 1 script")]
    needing, failed = split_notes(notes, rendered={"http://a/3"})
    assert needing == [notes[0]]
    assert failed == [("http://a/2", "timeout after 30 s")]


def test_the_words_for_each_case() -> None:
    missing = BrowserFacts("auto", False, install="install X or set [browser] executable")
    assert needing_text(missing, 1) == ("1 page needs a browser (scripts build them) and none "
                                        "was found: install X or set [browser] executable")
    assert needing_text(BrowserFacts("off"), 2) == (
        '2 pages may need a browser to archive (scripts build them); [browser] mode = "auto" '
        "would load them in one")
    assert "not loaded in one" in needing_text(BrowserFacts("auto", True), 2)
    assert loaded_text(BrowserFacts("off")) is None
    assert loaded_text(BrowserFacts("auto", True, rendered=3, loads=4,
                                    failed=[("u", "timeout after 1 s")])) \
        == "3 pages loaded in a browser (4 page loads), 1 failed"
    assert loaded_text(BrowserFacts("always", True, rendered=1)) == "1 page loaded in a browser"


def run_cli(folder: Path, base: str, capsys: Any, **browser: Any) -> tuple[dict[str, Any], str]:
    """`mirror run` in this process; its report and its summary (stdout is no terminal)."""
    path = write_config(folder, [base], browser=browser,
                        crawl={"workers": 2, "parse_processes": 0, "timeout": 10})
    capsys.readouterr()
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    return json.loads((folder / "archive" / "reports" / "1.json").read_text()), out


def test_auto_without_a_browser_works_as_off_and_says_how_to_enable_one(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"  # a system with no browser: nothing on PATH, none installed
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(find, "PLACES", ())
    assert find.find_browser() is None
    seen = {}
    for mode in ("auto", "off"):
        (tmp_path / mode).mkdir()
        with spasite.serve(plain=3, apps=4) as site:
            report, summary = run_cli(tmp_path / mode, site.base, capsys, mode=mode)
        seen[mode] = (sorted(site.counts().items()),
                      sorted(u.removeprefix(site.base) for u in report["needs_browser"]
                             for u in [u["url"]]), report["url_states"], summary)
        assert report["browser"]["rendered"] == 0 and report["browser"]["failed"] == []
        assert report["browser"]["loads"] == 0 and report["browser"]["found"] is False
    assert seen["auto"][:3] == seen["off"][:3]  # the same requests, flagged pages, states
    assert seen["auto"][1] == [p.lstrip("/") for p in site.linked_app_paths()]
    auto, off = seen["auto"][3], seen["off"][3]
    assert "4 pages need a browser (scripts build them) and none was found: install a " \
        f"Chromium-family browser ({install_command(*this_system())}) or set [browser] " \
        "executable to one already installed; mirror never downloads one" in auto
    assert '4 pages may need a browser to archive (scripts build them); [browser] mode = ' \
        '"auto" would load them in one' in off
    assert "loaded in a browser" not in auto + off


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium-family browser installed")
def test_the_report_counts_pages_rendered_and_names_failed_renders(
        tmp_path: Path, capsys: Any) -> None:
    for name, timeout in (("ok", 30), ("slow", 0.3)):  # 0.3 s: less than the idle wait
        (tmp_path / name).mkdir()
        with spasite.serve(plain=2, apps=3) as site:
            report, summary = run_cli(tmp_path / name, site.base, capsys, mode="auto",
                                      executable=str(CHROMIUM), page_timeout=timeout)
        b = report["browser"]
        apps = site.app_paths() if name == "ok" else site.linked_app_paths()
        assert b["loads"] == len(apps)  # no plain page loaded in the browser
        assert report["needs_browser"] == []  # each was loaded, or failed and says why
        if name == "ok":
            assert b["rendered"] == len(apps) and b["failed"] == []
            assert f"{len(apps)} pages loaded in a browser ({len(apps)} page loads)" in summary
        else:
            assert b["rendered"] == 0
            assert sorted(f["url"] for f in b["failed"]) == [
                site.base.rstrip("/") + p for p in apps]
            assert {f["reason"] for f in b["failed"]} == {"timeout after 0.3 s"}
            assert "0 pages loaded in a browser (3 page loads), 3 failed" in summary
            assert f"{site.base}app/0  (browser: timeout after 0.3 s)" in summary
