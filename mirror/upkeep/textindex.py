"""`mirror index --search`: the text index built again from the WARC records of the pages."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mirror.archive.warcread import ReadError, read_raw
from mirror.manifest.writer import Manifest
from mirror.model import PageText
from mirror.web.codings import DecodeError, decode_body
from mirror.web.extract import extract_html, page_text
from mirror.web.http import header_map

log = logging.getLogger(__name__)

#: captures given their text per manifest transaction
BATCH = 500
#: most decompressed bytes of a page read for its text (as link discovery does)
MAX_TEXT_BYTES = 20_000_000


@dataclass(frozen=True)
class Rebuilt:
    pages: int  # pages (2xx HTML captures) that have a text now
    unreadable: int  # pages whose record could not be read or decoded


def read_page_text(path: Path, offset: int, url: str) -> PageText | None:
    """The title and text of the HTML response record at offset (ReadError, DecodeError)."""
    raw = read_raw(path, offset)
    headers = header_map(raw.headers or ())
    body, _ = decode_body(raw.payload, headers.get("content-encoding"), MAX_TEXT_BYTES)
    return page_text(extract_html(body, url, headers.get("content-type")))


def rebuild_texts(manifest: Manifest, warc_dir: Path) -> Rebuilt:
    """Forget every page text, then read each page's again from its record (a revisit gets
    its original's); one transaction per BATCH captures. Run under the archive lock."""
    manifest.texts.clear()
    sources = manifest.texts.sources()
    unreadable = 0
    for start in range(0, len(sources), BATCH):
        texts: list[tuple[int, PageText | None]] = []
        for capture_id, url, kind, _status, filename, offset in sources[start:start + BATCH]:
            if kind != "response":
                texts.append((capture_id, None))  # a revisit: its original's text
                continue
            try:
                texts.append((capture_id, read_page_text(warc_dir / filename, offset, url)))
            except (ReadError, DecodeError) as exc:
                log.warning("no text for %s: %s", url, exc)
                unreadable += 1
        manifest.texts.set(texts)
        manifest.texts.index()
    return Rebuilt(manifest.texts.indexed_pages(), unreadable)
