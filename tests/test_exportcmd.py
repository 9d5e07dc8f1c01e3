"""`mirror export`'s checks, made from the exporters' registry, say what the hand-written
ones said, word for word and in the same order (issue 34 kept the CLI byte-identical)."""

from __future__ import annotations

import pytest

from mirror.cli.export import check_args
from mirror.cli.main import build_parser
from mirror.replay.exporters import ExportFailed, either

NEEDS = ("export needs --to DIR, --wacz FILE or --zim FILE "
         "(--at TIMESTAMP with --to or --zim)")


@pytest.mark.parametrize(("given", "said"), [
    ([], NEEDS),
    (["--at", "2020", "--force", "--title", "T"], NEEDS),
    (["--wacz", "a", "--at", "2020"],
     "--at goes with --to DIR or --zim FILE (a WACZ holds every run)"),
    (["--wacz", "a", "--title", "T", "--at", "x"],
     "--at goes with --to DIR or --zim FILE (a WACZ holds every run)"),
    (["--to", "d", "--at", "abc"], "--at 'abc': expected 1 to 14 digits (YYYYmmddHHMMSS)"),
    (["--zim", "z", "--at", "123456789012345"],
     "--at '123456789012345': expected 1 to 14 digits (YYYYmmddHHMMSS)"),
    (["--to", "d", "--at", "abc", "--title", "T"],
     "--at 'abc': expected 1 to 14 digits (YYYYmmddHHMMSS)"),
    (["--to", "d", "--title", "T", "--at", "20"], "--title goes with --zim FILE"),
    (["--wacz", "a", "--publisher", "p", "--language", "fr"], "--language goes with --zim FILE"),
    (["--to", "d", "--force"], None),  # a flag that changes nothing is let be, as before
    (["--to", "d", "--description", ""], None),  # empty: not given
    (["--to", "d", "--wacz", "a", "--zim", "z", "--at", "2024", "--force", "--title", "T"],
     None),
])
def test_the_checks_say_what_they_said(given: list[str], said: str | None) -> None:
    args = build_parser().parse_args(["export", "site.toml", *given])
    if said is None:
        check_args(args)
        return
    with pytest.raises(ExportFailed) as caught:
        check_args(args)
    assert str(caught.value) == said


def test_either_lists_as_a_sentence() -> None:
    assert [either(list(x)) for x in ("a", "ab", "abc")] == ["a", "a or b", "a, b or c"]
