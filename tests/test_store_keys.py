"""The store's keys come from the archive folder's layout (mirror/layout.py): every file
the layout names maps to a key and back, and the objects a store holds (the WARC files,
the index, the manifest's snapshot) are keyed by the layout's own names."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.layout import ArchiveLayout
from mirror.store.objstore import INDEX_KEY, MANIFEST_KEY, WARC_PREFIX, key_of, path_of


def layout_files(layout: ArchiveLayout) -> list[Path]:
    """Every path the layout names: each of its properties (a name added to the layout is
    covered without touching this test), a report, a WARC file in warc/."""
    names = [name for name, value in vars(ArchiveLayout).items() if isinstance(value, property)]
    assert {"manifest", "index", "warc"} <= set(names)  # control: the scan sees the layout
    return [*(getattr(layout, name) for name in names), layout.report(7),
            layout.warc / "site-20240101000000-00001.warc.gz"]


@pytest.mark.parametrize("root", [Path("/srv/archive/site"), Path("relative/site"), Path()])
def test_every_file_the_layout_names_maps_to_a_key_and_back(root: Path) -> None:
    layout = ArchiveLayout(root)
    files = layout_files(layout)
    keys = [key_of(layout, path) for path in files]
    assert len(set(keys)) == len(files)
    for path, key in zip(files, keys, strict=True):
        assert not key.startswith("/") and "\\" not in key and ".." not in key.split("/")
        assert path_of(layout, key) == path


def test_the_stored_objects_are_keyed_by_the_layouts_names(tmp_path: Path) -> None:
    layout = ArchiveLayout(tmp_path / "site")
    assert key_of(layout, layout.manifest) == MANIFEST_KEY == "manifest.sqlite3"
    assert key_of(layout, layout.index) == INDEX_KEY == "index.cdxj"
    name = "site-20240101000000-00001.warc.gz"
    assert key_of(layout, layout.warc / name) == WARC_PREFIX + name == f"warc/{name}"
    assert path_of(layout, MANIFEST_KEY) == layout.manifest
    assert path_of(layout, INDEX_KEY) == layout.index
    assert path_of(layout, WARC_PREFIX + name) == layout.warc / name


@pytest.mark.parametrize("key", ["", "/etc/passwd", "../x", "warc/../../x", "warc//x",
                                 "./index.cdxj", "warc/", "warc\\..\\x"])
def test_a_key_that_would_leave_the_folder_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="not the key of a file in an archive folder"):
        path_of(ArchiveLayout(Path("/srv/archive/site")), key)


def test_a_path_outside_the_folder_has_no_key() -> None:
    with pytest.raises(ValueError):
        key_of(ArchiveLayout(Path("/srv/archive/site")), Path("/srv/archive/other/index.cdxj"))
