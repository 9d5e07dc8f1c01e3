"""The rendered DOMs of an archive's browser-captured pages, for the exports (folder, ZIM):
where each one is (the manifest's part `renders`, by capture), read from its WARC
conversion record. An archive without a manifest, or whose runs rendered nothing, has none:
its pages export as fetched over HTTP."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from mirror.archive.warcread import ReadError, read_raw_from
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.replay.captures import Capture, CaptureIndex
from mirror.store.objstore import StoreError
from mirror.web.inert import make_inert

__all__ = ["DomRef", "RenderedPages", "make_inert"]

log = logging.getLogger(__name__)

#: the Content-Type the rendered DOM is read with (the conversion record's, BROWSER_API)
DOM_TYPE = "text/html; charset=utf-8"


@dataclass(frozen=True)
class DomRef:
    """Where a page's rendered DOM is: its conversion record."""

    warc_file: str
    offset: int
    length: int


class RenderedPages:
    """Capture (its WARC file and offset) -> where its rendered DOM is."""

    def __init__(self, refs: dict[tuple[str, int], DomRef]) -> None:
        self.refs = refs

    def __len__(self) -> int:
        return len(self.refs)

    @classmethod
    def load(cls, archive: CaptureIndex) -> RenderedPages:
        path = archive.files.manifest()
        if path is None:
            return cls({})
        try:
            reader = ManifestReader(path)
        except ManifestError as exc:
            log.warning("%s: rendered pages not read (%s): pages export as fetched", path, exc)
            return cls({})
        try:
            return cls(_refs(reader))
        finally:
            reader.close()

    def dom(self, archive: CaptureIndex, cap: Capture) -> bytes | None:
        """The rendered DOM of the page `cap` holds (a revisit's: its original's), as UTF-8;
        None when it was not rendered, or its record cannot be read (then it exports as
        fetched)."""
        ref = self.refs.get(_where(cap)) or self.refs.get(_where(archive.original(cap)))
        if ref is None:
            return None
        where = f"{os.path.basename(ref.warc_file)}@{ref.offset}"
        try:
            with archive.files.record_at(ref.warc_file, ref.offset, ref.length) as f:
                raw = read_raw_from(f, where)
        except (ReadError, StoreError, OSError) as exc:
            log.warning("rendered DOM of %s not read (%s): exported as fetched", cap.url, exc)
            return None
        if raw.rec_type != "conversion":
            log.warning("%s is a %s record, not the rendered DOM of %s: exported as fetched",
                        where, raw.rec_type, cap.url)
            return None
        return raw.payload


def _where(cap: Capture) -> tuple[str, int]:
    return os.path.basename(cap.filename), cap.offset


def _refs(reader: ManifestReader) -> dict[tuple[str, int], DomRef]:
    renders = reader.renders  # an older manifest reads as one with no renders (schema 6)
    out = {}
    for run in reader.runs.all():
        ids = renders.captures(run.id)
        if not ids:
            continue
        for row in reader.captures.all(run.id):
            if row["id"] in ids:
                ref = renders.of_capture(row["id"])
                if ref is not None:
                    out[(os.path.basename(row["filename"]), int(row["offset"]))] = DomRef(
                        ref.warc_file, int(ref.offset), int(ref.length))
    return out


@dataclass(frozen=True)
class PageSource:
    """What an export rewrites for an HTML page: its rendered DOM made inert when it has
    one, else its body as fetched."""

    body: bytes
    content_type: str | None
    rendered: bool

    def prepare(self, root: object) -> None:
        if self.rendered:
            make_inert(root)


def page_source(pages: RenderedPages, archive: CaptureIndex, cap: Capture, body: bytes,
                content_type: str | None) -> PageSource:
    dom = pages.dom(archive, cap)
    if dom is None:
        return PageSource(body, content_type, False)
    return PageSource(dom, DOM_TYPE, True)
