"""bench/compare.py's report of each tool's rounds: a comparison whose rounds of one tool
spread too far (the file system disturbed under them) says so next to its medians."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_compare():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("compare", BENCH / "compare.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["compare"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
        sys.modules.pop("compare", None)
    return module


def test_rounds_are_listed_and_a_wide_spread_is_flagged() -> None:
    compare = load_compare()

    def run(tool: str, cpu: float):  # type: ignore[no-untyped-def]
        return compare.Run(tool, compare.Measured(0, 1.0, cpu, 0.0, 0), 0, 0, 0.0)

    runs = [run("mirror", 3.40), run("wget-warc", 2.70),
            run("mirror", 3.49), run("wget-warc", 3.85),
            run("mirror", 3.16), run("wget-warc", 2.72)]
    lines = compare.spread_notes(runs, ["mirror", "wget-warc"])
    assert lines == [
        "CPU s per round, mirror: 3.40, 3.49, 3.16",
        "CPU s per round, wget-warc: 2.70, 3.85, 2.72",
        "warning: wget-warc's rounds are 1.43x apart: the machine was disturbed (a large "
        "removal just before?); compare again once quiet"]
    # one round: nothing to compare
    assert compare.spread_notes(runs[:2], ["mirror", "wget-warc"]) == []
