"""Undo HTTP content-codings (Content-Encoding), with a cap on the output."""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from mirror.errors import MirrorError

# Output is produced and handed on in pieces of at most this size, and compressed input is
# fed in slices of _IN_CHUNK, so no stage ever holds much more than that: this is what keeps
# memory bounded for decompression bombs whatever max_bytes is.
_OUT_CHUNK = 64 * 1024
_IN_CHUNK = 16 * 1024
# RFC 9659 lets HTTP zstd decoders refuse windows above 8 MiB; browsers do.
_ZSTD_MAX_WINDOW = 8 * 1024 * 1024
# zstandard's decompressobj cannot cap its output, but a zstd block expands at most
# 32768-fold (a 4-byte RLE block -> 128 KiB), so 32-byte slices of input bound each call
# to about 1 MiB.
_ZSTD_IN_SLICE = 32

_GZIP_MAGIC = b"\x1f\x8b"


class DecodeError(MirrorError):
    """A body could not be decoded: corrupt data, or an unknown or unavailable coding."""


class _Incomplete(MirrorError):
    """The compressed stream ended before its end marker (a cut-short body)."""


Chunks = Iterator[bytes]


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int) -> tuple[bytes, bool]:
    """Undo Content-Encoding and return (decoded, truncated).

    content_encoding is the header value: a comma list of codings in the order they were
    applied ("gzip", "x-gzip", "deflate", "br", "zstd", "identity"; case and whitespace
    do not matter), so they are undone last first. The output is cut at max_bytes and
    truncated is True when more would have followed; it is also True when the compressed
    data stops before its end (a body cut short in transit), so the prefix stays usable.
    Raises DecodeError for corrupt data, an unknown coding, or a missing optional decoder
    ('br' needs `brotli` >= 1.2, 'zstd' needs `zstandard`).
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must be >= 0")
    decoders = [_decoder_for(name) for name in reversed(_parse_codings(content_encoding))]
    if not decoders or not body:
        return body[:max_bytes], len(body) > max_bytes
    stream: Chunks = _slices(body)
    for decoder in decoders:
        stream = decoder(stream)
    return _collect(stream, max_bytes)


def _parse_codings(content_encoding: str | None) -> list[str]:
    if not content_encoding:
        return []
    names = (part.strip().lower() for part in content_encoding.split(","))
    return [name for name in names if name and name != "identity"]


def _decoder_for(name: str) -> Callable[[Chunks], Chunks]:
    decoder = _DECODERS.get(name)
    if decoder is None:
        raise DecodeError(f"no decoder for {name!r} (unknown content-coding)")
    return decoder


def _slices(data: bytes) -> Chunks:
    view = memoryview(data)
    for start in range(0, len(view), _IN_CHUNK):
        yield bytes(view[start : start + _IN_CHUNK])


def _collect(stream: Chunks, max_bytes: int) -> tuple[bytes, bool]:
    out = bytearray()
    try:
        for chunk in stream:
            room = max_bytes - len(out)
            if len(chunk) > room:
                out += chunk[:room]
                return bytes(out), True
            out += chunk
    except _Incomplete:
        return bytes(out), True
    return bytes(out), False


# --- gzip and deflate (zlib) -------------------------------------------------------------


def _inflate(d: Any, data: bytes) -> Chunks:
    """Feed data to a zlib decompressobj, yielding bounded output, until used up or at eof."""
    while data and not d.eof:
        out = d.decompress(data, _OUT_CHUNK)
        data = d.unconsumed_tail
        if out:
            yield out
    # zlib may hold output it could not hand back after the last input byte went in.
    while not d.eof:
        out = d.decompress(b"", _OUT_CHUNK)
        if not out:
            break
        yield out


def _gunzip(chunks: Chunks) -> Chunks:
    # gzip allows several members one after the other; bytes after a complete member that
    # do not start another one are ignored, as browsers do.
    try:
        d = zlib.decompressobj(31)
        member, produced = 1, 0
        for chunk in chunks:
            data = chunk
            while data:
                if d.eof:
                    if not data.startswith(_GZIP_MAGIC[:1]):
                        return
                    d, member, produced = zlib.decompressobj(31), member + 1, 0
                for out in _inflate(d, data):
                    produced += len(out)
                    yield out
                data = d.unused_data if d.eof else b""
    except zlib.error as exc:
        if member > 1 and produced == 0:
            return  # trailing garbage, not a second member
        raise DecodeError(f"corrupt gzip data: {exc}") from None
    if not d.eof:
        raise _Incomplete


def _inflate_deflate(chunks: Chunks) -> Chunks:
    # 'deflate' means zlib-wrapped (RFC 9110), but many servers send raw deflate. A zlib
    # header is two bytes with method 8, a window of at most 32K and a checksum; encoders
    # never start a raw stream that way, so the header decides (as curl and Firefox do).
    head, chunks = _peek(chunks, 2)
    d = zlib.decompressobj(15 if _is_zlib_header(head) else -15)
    try:
        for data in _prepend(head, chunks):
            yield from _inflate(d, data)
            if d.eof:
                return
    except zlib.error as exc:
        raise DecodeError(f"corrupt deflate data: {exc}") from None
    raise _Incomplete


def _is_zlib_header(head: bytes) -> bool:
    return (
        len(head) >= 2
        and head[0] & 0x0F == 8
        and head[0] >> 4 <= 7
        and (head[0] << 8 | head[1]) % 31 == 0
    )


def _peek(chunks: Chunks, n: int) -> tuple[bytes, Chunks]:
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= n:
            break
    return head, chunks


def _prepend(head: bytes, chunks: Chunks) -> Chunks:
    if head:
        yield head
    yield from chunks


# --- br and zstd (optional packages) -------------------------------------------------------


def _optional(module: str, coding: str, hint: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DecodeError(f"no decoder for {coding!r} (pip install {hint})") from None


def _unbrotli(chunks: Chunks) -> Chunks:
    brotli = _optional("brotli", "br", "brotli")
    d = brotli.Decompressor()
    if not hasattr(d, "can_accept_more_data"):
        # Before 1.2 brotli could not bound its output: a bomb would exhaust memory.
        raise DecodeError("no decoder for 'br' (pip install 'brotli>=1.2')")
    try:
        for chunk in chunks:
            yield d.process(chunk, output_buffer_limit=_OUT_CHUNK)
            while not d.can_accept_more_data():
                yield d.process(b"", output_buffer_limit=_OUT_CHUNK)
        # The decoder may hold output past the limit even once it has taken all the input.
        while not d.is_finished():
            out = d.process(b"", output_buffer_limit=_OUT_CHUNK)
            if not out:
                raise _Incomplete
            yield out
    except brotli.error as exc:
        raise DecodeError(f"corrupt br data: {exc}") from None


def _unzstd(chunks: Chunks) -> Chunks:
    zstd = _optional("zstandard", "zstd", "zstandard")
    dctx = zstd.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
    d = dctx.decompressobj()
    try:
        for chunk in chunks:
            for start in range(0, len(chunk), _ZSTD_IN_SLICE):
                data = chunk[start : start + _ZSTD_IN_SLICE]
                while data:
                    if d.eof:  # a new frame follows the one that ended
                        d = dctx.decompressobj()
                    if out := d.decompress(data):
                        yield out
                    data = d.unused_data if d.eof else b""
    except zstd.ZstdError as exc:
        raise DecodeError(f"corrupt zstd data: {exc}") from None
    if not d.eof:
        raise _Incomplete


_DECODERS: dict[str, Callable[[Chunks], Chunks]] = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "deflate": _inflate_deflate,
    "br": _unbrotli,
    "zstd": _unzstd,
}
