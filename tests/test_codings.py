"""Content-coding decoding with a cap (P4) and charset labels."""

from __future__ import annotations

import codecs
import gzip
import struct
import sys
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.web import charset as codings  # the label table is web/charset.py's now
from mirror.web.charset import charset_codec
from mirror.web.codings import DecodeError, decode_body

DATA = b"".join(b"line %d: the quick brown fox jumps over the lazy dog\n" % i for i in range(5000))
MiB = 1 << 20


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def brotli_compress(data: bytes) -> bytes:
    brotli = pytest.importorskip("brotli")
    return bytes(brotli.compress(data, quality=5))


def zstd_compress(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor().compress(data))


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli_compress,
    "zstd": zstd_compress,
}


@pytest.mark.parametrize("coding", list(COMPRESSORS))
def test_round_trip(coding: str) -> None:
    assert decode_body(COMPRESSORS[coding](DATA), coding, 10 * MiB) == (DATA, False)


@pytest.mark.parametrize("coding", list(COMPRESSORS))
def test_cap_cuts_output_and_says_so(coding: str) -> None:
    body = COMPRESSORS[coding](DATA)
    assert decode_body(body, coding, 1000) == (DATA[:1000], True)


@pytest.mark.parametrize("coding", list(COMPRESSORS))
def test_empty_body_is_empty(coding: str) -> None:
    assert decode_body(b"", coding, 100) == (b"", False)


@pytest.mark.parametrize(
    "cap", [0, 1, 65535, 65536, 65537, len(DATA) - 1, len(DATA), len(DATA) + 1]
)
def test_cap_is_exact_at_chunk_edges(cap: int) -> None:
    assert decode_body(gzip.compress(DATA), "gzip", cap) == (DATA[:cap], cap < len(DATA))


def test_deflate_accepts_raw_and_zlib_wrapped() -> None:
    assert decode_body(zlib.compress(DATA), "deflate", 10 * MiB) == (DATA, False)
    assert decode_body(raw_deflate(DATA), "deflate", 10 * MiB) == (DATA, False)
    assert decode_body(raw_deflate(b"x"), "deflate", 10) == (b"x", False)


@pytest.mark.parametrize(
    ("header", "encode"),
    [
        ("deflate, gzip", lambda d: gzip.compress(zlib.compress(d))),
        ("gzip,gzip", lambda d: gzip.compress(gzip.compress(d))),
        (" GZip , identity ", gzip.compress),
        ("identity, deflate", raw_deflate),
        ("gzip, br", lambda d: brotli_compress(gzip.compress(d))),
        ("br, zstd", lambda d: zstd_compress(brotli_compress(d))),
    ],
    ids=["deflate-gzip", "gzip-gzip", "case-and-spaces", "identity-deflate", "gzip-br", "br-zstd"],
)
def test_chained_codings_are_undone_last_first(header: str, encode: Callable) -> None:
    assert decode_body(encode(DATA), header, 10 * MiB) == (DATA, False)


def test_chain_cut_inside_the_outer_coding() -> None:
    body = gzip.compress(gzip.compress(DATA))
    assert decode_body(body, "gzip, gzip", 100) == (DATA[:100], True)


@pytest.mark.parametrize("header", [None, "", "identity", "IDENTITY", " , identity"])
def test_identity_passes_through(header: str | None) -> None:
    assert decode_body(DATA, header, 10 * MiB) == (DATA, False)
    assert decode_body(DATA, header, 10) == (DATA[:10], True)


@pytest.mark.parametrize("header", ["compress", "x-compress", "gzip, sdch", "aes128gcm"])
def test_unknown_coding_raises(header: str) -> None:
    with pytest.raises(DecodeError, match="no decoder for"):
        decode_body(gzip.compress(DATA), header, 10 * MiB)


@pytest.mark.parametrize(
    ("coding", "module", "message"),
    [("br", "brotli", "no decoder for 'br' (pip install brotli)"),
     ("zstd", "zstandard", "no decoder for 'zstd' (pip install zstandard)")],
)
def test_missing_optional_decoder_says_what_to_install(
    coding: str, module: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(DecodeError) as info:
        decode_body(b"\x0b\x02\x80hello\x03", coding, 100)
    assert str(info.value) == message


def test_negative_cap_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        decode_body(b"x", None, -1)


# --- corrupt and cut-short data ------------------------------------------------------------


def flipped(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0xFF
    return bytes(out)


GZ = gzip.compress(DATA)


@pytest.mark.parametrize(
    "body",
    [b"this is not gzip at all", flipped(GZ, 0), flipped(GZ, 3), flipped(GZ, len(GZ) // 2),
     flipped(GZ, len(GZ) - 6), flipped(GZ, len(GZ) - 2)],
    ids=["not-gzip", "magic", "flags", "middle", "crc", "size"],
)
def test_corrupt_gzip_raises(body: bytes) -> None:
    with pytest.raises(DecodeError, match="gzip"):
        decode_body(body, "gzip", 10 * MiB)


@pytest.mark.parametrize(
    ("coding", "body"),
    [("deflate", b"\x78\x9c garbage garbage"), ("deflate", b"\xff" * 50),
     ("br", b"\xff" * 50), ("zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 50)],
    ids=["zlib-header-then-garbage", "raw-garbage", "br-garbage", "zstd-garbage"],
)
def test_corrupt_data_raises(coding: str, body: bytes) -> None:
    if coding in ("br", "zstd"):
        pytest.importorskip({"br": "brotli", "zstd": "zstandard"}[coding])
    with pytest.raises(DecodeError, match=coding):
        decode_body(body, coding, 10 * MiB)


@pytest.mark.parametrize("coding", list(COMPRESSORS))
def test_cut_short_stream_gives_its_prefix_as_truncated(coding: str) -> None:
    body = COMPRESSORS[coding](DATA)
    decoded, truncated = decode_body(body[: len(body) // 2], coding, 10 * MiB)
    assert truncated
    assert DATA.startswith(decoded)


def test_gzip_members_are_concatenated() -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"") + gzip.compress(b"second")
    assert decode_body(body, "gzip", 100) == (b"first second", False)


@pytest.mark.parametrize("trailer", [b"\0" * 8, b"trailing garbage", b"\x1f", b"\x1fnot gzip"])
def test_bytes_after_the_last_gzip_member_are_ignored(trailer: bytes) -> None:
    decoded, _ = decode_body(GZ + trailer, "gzip", 10 * MiB)
    assert decoded == DATA


# --- decompression bombs (P4) --------------------------------------------------------------

BOMB_SIZE = 1 << 30  # 1 GiB of zeros


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """1 GiB of zeros as gzip (about 1 MiB), built without ever holding the 1 GiB.

    A full flush ends a deflate segment on a byte boundary with the history reset, so the
    segment for 1 MiB of zeros can simply be repeated.
    """
    zeros = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(BOMB_SIZE // MiB):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", crc, BOMB_SIZE & 0xFFFFFFFF)
    return header + segment * (BOMB_SIZE // MiB) + c.flush() + trailer


def streamed_bomb(compressor: object) -> bytes:
    zeros = bytes(MiB)
    parts = [compressor.compress(zeros) for _ in range(BOMB_SIZE // MiB)]  # type: ignore[attr-defined]
    return b"".join(parts) + compressor.flush()  # type: ignore[attr-defined]


def assert_bounded(body: bytes, coding: str) -> None:
    tracemalloc.start()
    try:
        decoded, truncated = decode_body(body, coding, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (len(decoded), truncated) == (MiB, True)
    assert decoded == bytes(MiB)
    assert peak < 8 * MiB, f"peak {peak} bytes while decoding a {coding} bomb"


def test_gzip_bomb_is_cut_with_bounded_memory(gzip_bomb: bytes) -> None:
    assert len(gzip_bomb) < 2 * MiB
    assert gzip_bomb[-4:] == struct.pack("<I", BOMB_SIZE)  # ISIZE: a real 1 GiB stream
    assert_bounded(gzip_bomb, "gzip")


def test_chained_gzip_bomb_is_cut_with_bounded_memory(gzip_bomb: bytes) -> None:
    assert_bounded(gzip.compress(gzip_bomb), "gzip, gzip")


def test_deflate_bomb_is_cut_with_bounded_memory(gzip_bomb: bytes) -> None:
    raw = gzip_bomb[10:-8]  # the gzip member's deflate stream
    assert_bounded(raw, "deflate")


def test_brotli_bomb_is_cut_with_bounded_memory() -> None:
    brotli = pytest.importorskip("brotli")
    assert_bounded(streamed_bomb(_BrotliCompressor(brotli.Compressor(quality=0))), "br")


def test_zstd_bomb_is_cut_with_bounded_memory() -> None:
    zstandard = pytest.importorskip("zstandard")
    assert_bounded(streamed_bomb(zstandard.ZstdCompressor(level=1).compressobj()), "zstd")


class _BrotliCompressor:
    """brotli.Compressor with the compress/flush names of zlib's compressobj."""

    def __init__(self, compressor: object) -> None:
        self._c = compressor

    def compress(self, data: bytes) -> bytes:
        return bytes(self._c.process(data))  # type: ignore[attr-defined]

    def flush(self) -> bytes:
        return bytes(self._c.finish())  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=300) | st.binary(max_size=300).map(gzip.compress),
    coding=st.sampled_from(["gzip", "deflate", "gzip, deflate", "deflate, gzip"]),
    cap=st.integers(min_value=0, max_value=400),
)
def test_arbitrary_bytes_decode_or_raise_decode_error(body: bytes, coding: str, cap: int) -> None:
    try:
        decoded, truncated = decode_body(body, coding, cap)
    except DecodeError:
        return
    assert len(decoded) <= cap


# --- charset labels ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("utf-8", "utf-8"),
        (" UTF8 ", "utf-8"),
        ("unicode-1-1-utf-8", "utf-8"),
        ("iso-8859-1", "windows-1252"),
        ("Latin1", "windows-1252"),
        ("US-ASCII", "windows-1252"),
        ("iso-8859-9", "windows-1254"),
        ("tis-620", "cp874"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("big5", "big5hkscs"),
        ("Shift_JIS", "cp932"),
        ("euc-kr", "cp949"),
        ("utf-16", "utf-16-le"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        (b"windows-1251", "windows-1251"),
        ("x-user-defined", None),
        ("iso-2022-kr", None),  # WHATWG 'replacement'
        ("utf-7", None),
        ("idna", None),  # Python knows it; the web does not
        ("no-such-charset", None),
        ("", None),
    ],
)
def test_charset_labels_map_the_whatwg_way(label: str | bytes, codec: str | None) -> None:
    assert charset_codec(label) == codec


def test_every_codec_in_the_label_table_exists() -> None:
    for codec in codings._LABELS_BY_CODEC:
        assert b"abc".decode(codec, "replace") == "abc" or codec.startswith("utf-16")
        codecs.lookup(codec)
