"""C5: files outside SQLite are replaced atomically: the old or the new content, never half."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror.archive.fsutil import atomic_write_lines, atomic_write_text


def test_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "index.cdxj"
    path.write_text("old\n")
    atomic_write_lines(path, ["a\n", "b\n"])
    assert path.read_text() == "a\nb\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.cdxj"]


def test_a_failure_while_writing_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    atomic_write_text(path, "old")

    def lines() -> Iterator[str]:
        yield "new line 1\n"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_write_lines(path, lines())
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "1.json"
    atomic_write_text(path, "{}")
    assert path.read_text() == "{}"
