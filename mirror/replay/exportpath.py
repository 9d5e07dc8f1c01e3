"""Where each URL goes in a static export (O4): a relative path that is safe, portable and
injective, and relative references between such paths."""

from __future__ import annotations

import hashlib
import posixpath
import re
from urllib.parse import quote

# Every character becomes characters of [a-z0-9-_.=~^]: kept when it is one of [a-z0-9-_.],
# an upper-case letter is '^' + its lower case, a canonical %XX escape is '~' + lower-case
# hex, anything else '=' + each UTF-8 byte in lower-case hex. That can be decoded back, so
# two URLs never share a path, and with no upper case and no non-ASCII left, neither on a
# case-insensitive nor on a Unicode-normalising file system. '=' followed by something that
# is not hex marks what the encoding adds: '=' alone an empty segment, '=q' the query, '=.'
# an extension added for the media type, '=h' a hash that replaces the end of a long name,
# '=l' the folder of paths too long to spell out. Directory names never contain '.', file
# names always do, so no file ever has the name of a directory.

_ESCAPE = re.compile(r"%[0-9A-F]{2}|[^a-z0-9\-_.]")
_HOST_ESCAPE = re.compile(r"%[0-9A-F]{2}|[^a-z0-9\-.]")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://([^/?#]*)(/[^?#]*)(?:\?([^#]*))?", re.S)
_NETLOC = re.compile(r"(.*?)(?::([0-9]+))?", re.S)
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", "index"}  # Windows device names; 'index' names folder pages
    | {f"{dev}{n}" for dev in ("com", "lpt") for n in range(10)}
)
MAX_NAME = 200  # file systems allow 255 bytes
MAX_PATH = 1000
_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "text/html": ("html", "htm"), "application/xhtml+xml": ("html",),
    "text/css": ("css",), "text/javascript": ("js", "mjs"),
    "application/javascript": ("js", "mjs"), "application/x-javascript": ("js",),
    "application/json": ("json",), "text/plain": ("txt",), "application/pdf": ("pdf",),
    "text/xml": ("xml",), "application/xml": ("xml",), "image/png": ("png",),
    "image/jpeg": ("jpg", "jpeg"), "image/gif": ("gif",), "image/webp": ("webp",),
    "image/avif": ("avif",), "image/svg+xml": ("svg",), "image/x-icon": ("ico",),
    "image/vnd.microsoft.icon": ("ico",), "font/woff2": ("woff2",), "font/woff": ("woff",),
    "font/ttf": ("ttf",), "font/otf": ("otf",), "video/mp4": ("mp4",), "video/webm": ("webm",),
    "audio/mpeg": ("mp3",),
}


def _escape_char(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 3:
        return "~" + text[1:].lower()
    if "A" <= text <= "Z":
        return "^" + text.lower()
    return "".join(f"={b:02x}" for b in text.encode("utf-8", "surrogatepass"))


def _windows_safe(name: str) -> str:
    """No leading or trailing '.', no device name (even with an extension)."""
    if name.startswith("."):
        name = "=2e" + name[1:]
    if name.endswith("."):
        name = name[:-1] + "=2e"
    if name.split(".", 1)[0] in _RESERVED:
        name = f"={ord(name[0]):02x}" + name[1:]
    return name


def _shorten(name: str, keep: int) -> str:
    if len(name) <= keep:
        return name
    return name[: keep - 42] + "=h" + hashlib.sha256(name.encode()).hexdigest()[:40]


def _dir_name(segment: str) -> str:
    if not segment:
        return "="
    name = _windows_safe(_ESCAPE.sub(_escape_char, segment)).replace(".", "=2e")
    return _shorten(name, MAX_NAME)


def _file_name(segment: str, query: str | None, mime: str) -> str:
    exts = _EXTENSIONS.get(mime, ())
    stem = _windows_safe(_ESCAPE.sub(_escape_char, segment)) if segment else "index"
    if query is not None:
        stem += "=q" + _ESCAPE.sub(_escape_char, query)
        if stem.endswith("."):  # Windows drops a trailing dot
            stem = stem[:-1] + "=2e"
    if not segment:  # 'index' is reserved for this: the page of a folder
        suffix = "." + (exts[0] if exts else "bin")
    elif exts:
        suffix = "" if stem.endswith(tuple("." + e for e in exts)) else "=." + exts[0]
    else:
        suffix = "" if "." in stem else "=.bin"
    if len(stem + suffix) > MAX_NAME:
        stem, suffix = _shorten(stem, MAX_NAME - 10), ("=." + exts[0] if exts else "=.bin")
    return stem + suffix


def _host_dir(scheme: str, netloc: str) -> str:
    match = _NETLOC.fullmatch(netloc)
    assert match is not None  # the pattern matches any string
    host, port = match.groups()
    name = _HOST_ESCAPE.sub(_escape_char, scheme) + "_" + _HOST_ESCAPE.sub(_escape_char, host)
    return _shorten(_windows_safe(name + (f"_{port}" if port else "")), MAX_NAME)


def export_path(url: str, mime: str) -> str:
    """The relative POSIX path of a URL's file in an export: injective over URLs, inside
    the root, portable (see above). `mime` picks the extension added where it is missing."""
    media_type = mime.partition(";")[0].strip().lower()
    match = _URL.fullmatch(url)
    if match is None:  # not a canonical URL (no path, a fragment...): still a name of its own
        return "_other/" + _file_name(url, None, media_type)
    scheme, netloc, path, query = match.groups()
    folder = _host_dir(scheme, netloc)
    *dirs, last = path.split("/")[1:]
    parts = [folder, *map(_dir_name, dirs), _file_name(last, query, media_type)]
    full = "/".join(parts)
    if len(full) <= MAX_PATH:
        return full
    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"{folder}/=l/{_file_name(digest, None, media_type)}"


def relative_ref(from_path: str, to_path: str) -> str:
    """A relative URL from the file at from_path to the file at to_path."""
    rel = posixpath.relpath(to_path, posixpath.dirname(from_path) or ".")
    return quote(rel, safe="/=")
