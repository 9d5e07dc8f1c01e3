"""ZIM export for Kiwix readers (openZIM format, written with libzim).

What goes in is the folder export's selection (export.plan_export): the newest capture of
each URL at or before `--at`, revisits read through to their payload. Error captures (4xx,
5xx) are left out. Every other capture becomes an entry at its export path (exportpath.py:
injective, so two URLs never share an entry), HTML and CSS with their links rewritten to
entries of the ZIM (a link to anything not archived is made inert, never left pointing at
the live site). A redirect becomes a ZIM redirect to where its chain ends; one whose chain
ends outside the ZIM is left out, and links to it are made inert like any other.

HTML pages with a 2xx status are front articles: they carry their title, and the full-text
index gets the visible text the crawl indexes (web/extract.py), not libzim's own reading
of the markup. The creator is driven from one thread only, entry after entry (libzim's own
workers compress and index behind it, with a bounded queue), so memory does not grow with
the archive beyond the plan itself.

libzim 3.6 (libzim 9.2) is the newest the Python package may be: Debian bookworm's zimcheck
(zim-tools 3.1.3, libzim 8.1) reports "low level structure is invalid" for every file
written by 3.7 or later (pyproject.toml pins it).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from mirror import __version__
from mirror.errors import UsageError
from mirror.replay.captures import CaptureIndex, Record
from mirror.replay.destination import aside, check_destination, is_our_zim
from mirror.replay.export import Links, plan_export, read_entry
from mirror.replay.exportpages import notice_page, shown_url
from mirror.replay.exportpath import relative_ref
from mirror.replay.exportplan import Entry, Plan
from mirror.replay.renders import RenderedPages, page_source
from mirror.replay.seal import FRAMES_SELF, SEAL_SCRIPT
from mirror.web.extract import extract_html
from mirror.web.http import HTML_TYPES
from mirror.web.rewrite import parse_html, rewrite_css_bytes, rewrite_html
from mirror.web.urls import join

log = logging.getLogger(__name__)

#: the pages may reach nothing outside the ZIM (a phone offline, or a reader's privacy)
#: worker-src 'none': an archived sw.js cannot become kiwix-serve's service worker
ZIM_CSP = ("default-src 'self' data: blob: 'unsafe-inline' 'unsafe-eval'; "
           f"{FRAMES_SELF}; form-action 'self'; worker-src 'none'")
ZIM_HEAD = f'<meta http-equiv="Content-Security-Policy" content="{ZIM_CSP}">{SEAL_SCRIPT}'
#: lengths the openZIM metadata rules set (in characters)
MAX_TITLE, MAX_DESCRIPTION = 30, 80
ILLUSTRATION = 48
#: what libzim should not try to compress again
_PACKED = ("image/", "video/", "audio/", "font/woff", "application/zip", "application/gzip")

#: on_progress(done, total)
Progress = Callable[[int, int], None]


class ZimError(UsageError):
    """The ZIM cannot be written (libzim missing, nothing to put in, a bad option)."""


@dataclass(frozen=True)
class HomeFacts:
    """What the main page says about the site, for the ZIM's metadata."""

    title: str | None = None
    description: str | None = None
    lang: str | None = None
    icons: tuple[str, ...] = ()  # absolute URLs, best first


@dataclass(frozen=True)
class ZimMeta:
    name: str
    title: str
    description: str
    language: str  # ISO 639-3
    creator: str
    publisher: str
    date: str  # YYYY-MM-DD
    source: str

    def items(self) -> list[tuple[str, str]]:
        return [("Name", self.name), ("Title", self.title), ("Description", self.description),
                ("Language", self.language), ("Creator", self.creator),
                ("Publisher", self.publisher), ("Date", self.date), ("Source", self.source),
                ("Scraper", f"mirror {__version__}"),
                # readers' libraries (kiwix-serve 3.3's catalog) read "has a full-text index"
                # from this tag, not from the file
                ("Tags", "mirror;_ftindex:yes")]


@dataclass
class ZimResult:
    path: Path
    entries: int = 0
    pages: int = 0
    redirects: int = 0
    left_out: int = 0  # error captures, and redirects that lead out of the ZIM
    unreadable: int = 0
    bytes: int = 0
    seconds: float = 0.0
    main_url: str = ""
    meta: ZimMeta | None = None

    def summary(self) -> str:
        unreadable = f", {self.unreadable} unreadable (a notice instead)" if self.unreadable \
            else ""
        return (f"wrote {self.path} ({self.entries} entries: {self.pages} pages, "
                f"{self.redirects} redirects{unreadable}; {self.left_out} error captures or "
                f"redirects leading out left out; {self.bytes:,} bytes; opens on "
                f"{shown_url(self.main_url)}) in {self.seconds:.1f}s")


# --- pure parts ---------------------------------------------------------------------------


def home_facts(body: bytes, url: str, content_type: str | None) -> HomeFacts:
    """Title, description, language and icons of a page, from one parse."""
    _, root = parse_html(body, content_type)
    if root is None:
        return HomeFacts()
    title = next((" ".join(t.text_content().split()) for t in root.iter("title")), None)
    description = lang = None
    icons: list[tuple[int, str]] = []
    base = url
    for el in root.iter("base", "meta", "link", "html"):
        if el.tag == "html":
            lang = (el.get("lang") or el.get("xml:lang") or "").strip() or None
        elif el.tag == "base" and el.get("href"):
            base = join(url, el.get("href"))
        elif el.tag == "meta" and (el.get("name") or "").lower() == "description":
            description = " ".join((el.get("content") or "").split()) or description
        elif el.tag == "link" and el.get("href"):
            rank = _icon_rank((el.get("rel") or "").lower().split(), el.get("sizes") or "",
                              el.get("type") or "")
            if rank is not None:
                icons.append((rank, join(base, el.get("href"))))
    ordered = [u for _, u in sorted(icons, key=lambda i: -i[0])]
    return HomeFacts(title or None, description, lang, tuple(dict.fromkeys(ordered)))


def _icon_rank(rels: list[str], sizes: str, kind: str) -> int | None:
    """How good an icon link is for a 48x48 picture: bigger is better, up to 512; None for a
    link that is no icon or an SVG (which Pillow cannot draw)."""
    if not ({"icon", "apple-touch-icon", "apple-touch-icon-precomposed"} & set(rels)):
        return None
    if "svg" in kind.lower():
        return None
    best = 0
    for size in sizes.lower().split():
        width = size.partition("x")[0]
        if width.isdigit():
            best = max(best, min(int(width), 512))
    if not best and "apple-touch-icon" in " ".join(rels):
        best = 180  # its usual size
    return best or 16


def language_code(tag: str | None) -> str | None:
    """ISO 639-3 for a BCP 47 tag ('en', 'fr-CA', 'deu'), or None when it names no language."""
    if not tag:
        return None
    import langcodes

    try:
        code = str(langcodes.Language.get(tag.strip()).to_alpha3())
    except (LookupError, ValueError):
        return None
    return None if code in ("und", "mul", "zxx") else code


def clip(text: str, limit: int) -> str:
    """Text cut to `limit` characters at a word's end where one is near, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = text.rfind(" ", 0, limit)  # the last word that ends within the cut
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:-") + "…"


def zim_meta(site_name: str, main_url: str, facts: HomeFacts, *, title: str | None = None,
             description: str | None = None, language: str | None = None,
             publisher: str | None = None, today: str | None = None) -> ZimMeta:
    """The ZIM's metadata: options first, then what the main page says, then defaults."""
    host = shown_url(main_url).split("/", 1)[0]
    lang = language_code(language) if language else language_code(facts.lang)
    if language and lang is None:
        raise ZimError(f"--language {language!r}: not a language code (e.g. en, fra, pt-BR)")
    lang = lang or "eng"
    short = (language or facts.lang or "en").split("-")[0].lower()
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in site_name.lower())
    return ZimMeta(
        name=f"{slug}_{short}_all",
        title=clip(title or facts.title or site_name, MAX_TITLE),
        description=clip(description or facts.description
                         or f"Offline copy of {host}, archived by mirror", MAX_DESCRIPTION),
        language=lang,
        creator=host,
        publisher=publisher or "mirror",
        date=today or datetime.now(UTC).strftime("%Y-%m-%d"),
        source=main_url,
    )


def zim_kept(entry: Entry) -> bool:
    """Whether a planned capture belongs in a ZIM: anything but an error answer."""
    return entry.status < 400


def compressible(mime: str) -> bool:
    return not mime.startswith(_PACKED)


# --- the illustration ---------------------------------------------------------------------


def illustration(icon: bytes | None, host: str) -> bytes:
    """A 48x48 PNG: the site's icon scaled, or a letter on a colour made from the host."""
    from PIL import Image, UnidentifiedImageError

    if icon:
        try:
            with Image.open(io.BytesIO(icon)) as im:
                im.load()
                picture = im.convert("RGBA").resize((ILLUSTRATION, ILLUSTRATION),
                                                    Image.Resampling.LANCZOS)
            return _png(picture)
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            log.info("the site's icon is not a picture Pillow reads; drawing one")
    return _png(generated_icon(host))


def generated_icon(host: str) -> Any:
    from PIL import Image, ImageDraw, ImageFont

    name = host.removeprefix("www.")
    digest = hashlib.sha256(name.encode()).digest()
    colour = tuple(64 + b % 128 for b in digest[:3])  # mid tones: white text reads on them
    picture = Image.new("RGBA", (ILLUSTRATION, ILLUSTRATION), colour + (255,))
    letter = next((c.upper() for c in name if c.isalnum()), "M")
    font = ImageFont.load_default(size=32)
    ImageDraw.Draw(picture).text((ILLUSTRATION / 2, ILLUSTRATION / 2), letter,
                                 fill=(255, 255, 255, 255), font=font, anchor="mm")
    return picture


def _png(picture: Any) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


# --- writing ------------------------------------------------------------------------------


class ZimWriter:
    """Reads the plan's records one at a time and hands each to libzim's creator."""

    def __init__(self, archive: CaptureIndex, plan: Plan, result: ZimResult,
                 on_progress: Progress | None = None) -> None:
        self.archive, self.plan, self.result = archive, plan, result
        self.on_progress = on_progress
        self.links = Links(archive, plan)
        self.rendered = RenderedPages.load(archive)  # browser-captured pages: their DOMs

    def read(self, entry: Entry) -> Record | None:
        record = read_entry(self.archive, entry)
        self.result.unreadable += record is None
        return record

    def content_entry(self, url: str) -> Entry | None:
        """The entry a link to `url` opens in the ZIM: never a redirect (those are kept only
        where they lead to content, and a link skips them)."""
        entry = self.links.follow(url)
        return None if entry is None or 300 <= entry.status < 400 else entry

    def ref(self, from_path: str, url: str) -> str | None:
        entry = self.content_entry(url)
        return relative_ref(from_path, entry.path) if entry else None

    def write(self, creator: Any) -> None:
        """Every entry of the plan, then the redirects (their targets exist by then)."""
        from libzim.writer import Hint

        for done, (url, entry) in enumerate(self.plan.items(), 1):
            if not 300 <= entry.status < 400:
                self._add(creator, url, entry)
            if self.on_progress is not None:
                self.on_progress(done, len(self.plan))
        for url, entry in self.plan.redirects():
            target = self.content_entry(url)
            if target is None:
                self.result.left_out += 1
                continue
            creator.add_redirection(entry.path, "", target.path, {Hint.FRONT_ARTICLE: False})
            self.result.redirects += 1

    def _add(self, creator: Any, url: str, entry: Entry) -> None:
        record = self.read(entry)
        creator.add_item(_item(entry.path, *self._content(url, entry, record)))
        self.result.entries += 1

    def _content(self, url: str, entry: Entry, record: Record | None) -> Content:
        if record is None:
            return Content(notice_page("Not readable", url, "could not be read"), "text/html")
        body, decoded = record.decoded()
        if not decoded and entry.mime in HTML_TYPES | {"text/css"}:  # links not rewritable
            self.result.unreadable += 1
            return Content(notice_page("Not readable", url, "could not be decoded"), "text/html")

        def mapper(ref: str) -> str | None:
            return self.ref(entry.path, ref)

        if entry.mime in HTML_TYPES:
            src = page_source(self.rendered, self.archive, entry.capture, body,
                              record.content_type)
            page = rewrite_html(src.body, url, src.content_type, mapper, head=ZIM_HEAD,
                                prepare=src.prepare)
            text = extract_html(src.body, url, src.content_type).text
            self.result.pages += 1
            return Content(page.body, "text/html", page.title or shown_url(url), text, True)
        if entry.mime == "text/css":
            return Content(rewrite_css_bytes(body, url, record.content_type, mapper), "text/css")
        return Content(body, entry.mime or "application/octet-stream")


class Content(NamedTuple):
    """An entry's bytes and what libzim is told about them."""

    body: bytes
    mime: str
    title: str = ""
    text: str | None = None  # for the full-text index: front articles only
    front: bool = False


def _item(path: str, body: bytes, mime: str, title: str, text: str | None, front: bool) -> Any:
    from libzim.writer import Hint, IndexData, Item, StringProvider

    class Text(IndexData):  # type: ignore[misc]  # the crawl's text of the page, for its index
        def has_indexdata(self) -> bool:
            return True

        def get_title(self) -> str:
            return title

        def get_content(self) -> str:
            return text or ""

        def get_keywords(self) -> str:
            return ""

        def get_wordcount(self) -> int:
            return len((text or "").split())

        def get_geoposition(self) -> tuple[float, float] | None:
            return None

    class Page(Item):  # type: ignore[misc]
        def get_path(self) -> str:
            return path

        def get_title(self) -> str:
            return title

        def get_mimetype(self) -> str:
            return mime

        def get_contentprovider(self) -> StringProvider:
            return StringProvider(body)

        def get_hints(self) -> dict[Any, bool]:
            return {Hint.FRONT_ARTICLE: front, Hint.COMPRESS: compressible(mime)}

        def get_indexdata(self) -> IndexData | None:
            return Text() if front else None

    return Page()


def write_zim(archive: CaptureIndex, out: Path, *, site_name: str,
              start_urls: tuple[str, ...], at: str | None = None, title: str | None = None,
              description: str | None = None, language: str | None = None,
              publisher: str | None = None, on_progress: Progress | None = None,
              force: bool = False) -> ZimResult:
    """Write the archive (as of `at`) as a ZIM at `out` (written aside, then renamed): over
    an earlier ZIM of mirror's, any regular file with `force`, nothing else."""
    check_destination(out, force=force, ours=is_our_zim)
    try:
        from libzim.writer import Creator
    except ImportError as exc:
        raise ZimError("ZIM export needs libzim and Pillow: pip install 'mirror[zim]' (from a "
                       "checkout: pip install -e '.[zim]')") from exc
    started = time.monotonic()
    planned = plan_export(archive, at)
    plan = planned.where(zim_kept)
    result = ZimResult(out, left_out=len(planned) - len(plan))
    writer = ZimWriter(archive, plan, result, on_progress)
    main = _main_page(writer, start_urls)
    if main is None:
        raise ZimError("no HTML page to open the ZIM with: nothing archived answered 2xx")
    home = read_entry(archive, main, quiet=True)
    facts = home_facts(home.decoded()[0], main.capture.url, home.content_type) if home else \
        HomeFacts()
    meta = zim_meta(site_name, main.capture.url, facts, title=title, description=description,
                    language=language, publisher=publisher)
    picture = illustration(_icon(writer, facts, main.capture.url), meta.creator)
    tmp = aside(out)
    try:
        tmp.unlink()  # libzim creates its file itself; the name is ours until the rename
        creator = Creator(str(tmp)).config_indexing(True, meta.language)
        with _quiet_stdout(), creator:
            creator.set_mainpath(main.path)
            writer.write(creator)
            for name, value in meta.items():
                creator.add_metadata(name, value)
            creator.add_illustration(ILLUSTRATION, picture)
        check_destination(out, force=force, ours=is_our_zim)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    result.bytes, result.main_url, result.meta = out.stat().st_size, main.capture.url, meta
    result.seconds = time.monotonic() - started
    return result


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """libzim 9.2 prints its steps ("Resolve redirect", "set index") on the C library's
    standard output, where they would mix with mirror's; they say nothing a user can act
    on, so they go nowhere (its warnings use stderr, and its errors raise)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _main_page(writer: ZimWriter, start_urls: tuple[str, ...]) -> Entry | None:
    """The first start URL that opens an HTML page (through its redirects), else the first
    HTML page of the plan."""
    for url in start_urls:
        entry = writer.content_entry(url)
        if entry is not None and entry.mime in HTML_TYPES:
            return entry
    html_pages = (e for e in writer.plan.values()
                  if e.mime in HTML_TYPES and not 300 <= e.status < 400)
    first = next(html_pages, None)
    if first is not None:
        log.warning("no start URL was archived as a page; the ZIM opens on %s",
                    first.capture.url)
    return first


def _icon(writer: ZimWriter, facts: HomeFacts, main_url: str) -> bytes | None:
    """The bytes of the first icon the page names that was archived, else /favicon.ico."""
    for url in (*facts.icons, join(main_url, "/favicon.ico")):
        entry = writer.content_entry(url)
        record = read_entry(writer.archive, entry, quiet=True) if entry is not None else None
        if record is not None:
            return record.decoded()[0]
    return None
