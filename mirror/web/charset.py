"""Which charset decodes a body: WHATWG labels, then BOM, HTTP, <meta> or @charset (P7)."""

from __future__ import annotations

import re

# --- labels -------------------------------------------------------------------------------

# The WHATWG Encoding Standard's labels (encoding.spec.whatwg.org), keyed by the Python codec
# that decodes like the browser does: 'latin1' and 'ascii' mean windows-1252, GBK is decoded
# as gb18030, Big5 as big5hkscs, Shift_JIS as cp932, EUC-KR as cp949. 'replacement' and
# 'x-user-defined' are left out on purpose: such labels fall through to the next source.
_LABELS_BY_CODEC = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso-8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 "
    "iso_8859-2:1987 l2 latin2",
    "iso-8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 "
    "iso_8859-3:1988 l3 latin3",
    "iso-8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 "
    "iso_8859-4:1988 l4 latin4",
    "iso-8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 "
    "iso_8859-5 iso_8859-5:1988",
    "iso-8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 "
    "iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 "
    "iso_8859-6:1987",
    "iso-8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 "
    "iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso-8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 "
    "iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso-8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso-8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso-8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso-8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso-8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "mac-roman": "csmacintosh mac macintosh x-mac-roman",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "windows-1250": "cp1250 windows-1250 x-cp1250",
    "windows-1251": "cp1251 windows-1251 x-cp1251",
    "windows-1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 "
    "iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii "
    "windows-1252 x-cp1252",
    "windows-1253": "cp1253 windows-1253 x-cp1253",
    "windows-1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
    "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "windows-1255": "cp1255 windows-1255 x-cp1255",
    "windows-1256": "cp1256 windows-1256 x-cp1256",
    "windows-1257": "cp1257 windows-1257 x-cp1257",
    "windows-1258": "cp1258 windows-1258 x-cp1258",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gb18030": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 "
    "x-gbk gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc-jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022-jp": "csiso2022jp iso-2022-jp",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
    "ksc5601 ksc_5601 windows-949",
    "utf-16-be": "unicodefffe utf-16be",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
}
_CODEC_BY_LABEL = {
    label: codec for codec, labels in _LABELS_BY_CODEC.items() for label in labels.split()
}
_ASCII_WHITESPACE = "\t\n\f\r "


def charset_codec(label: str | bytes) -> str | None:
    """The Python codec for a WHATWG charset label ('Latin1' -> 'windows-1252'), or None."""
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    return _CODEC_BY_LABEL.get(label.strip(_ASCII_WHITESPACE).lower())


# --- sniffing -----------------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
_CHARSET_PARAM = re.compile(
    r"charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r ;\"']+))", re.I
)
_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.S)
_META = re.compile(rb"<meta[\t\n\f\r /]([^>]*)", re.I)
_ATTR = re.compile(
    rb"([^\t\n\f\r /=>][^\t\n\f\r /=>]*)"
    rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r >]*)))?"
)
_CSS_CHARSET = re.compile(rb'@charset "([^"]*)";')
_PRESCAN_BYTES = 1024


def sniff_charset(body: bytes, content_type: str | None, default: str = "utf-8") -> str:
    """The codec to decode an HTML body with: BOM > HTTP charset > <meta> prescan > default.

    Labels are read the WHATWG way ('latin1' means windows-1252); a label that is unknown,
    'replacement' or 'x-user-defined' is skipped for the next source. Never raises.
    """
    return (
        _bom(body)
        or _header_charset(content_type)
        or _prescan(body[:_PRESCAN_BYTES])
        or charset_codec(default)
        or "utf-8"
    )


def css_charset(body: bytes, content_type: str | None) -> str:
    """The charset of a stylesheet, by the CSS rule (used to read it and to rewrite it)."""
    # CSS Syntax "determine the fallback encoding": BOM > HTTP charset > @charset > UTF-8.
    declared = _CSS_CHARSET.match(body[:_PRESCAN_BYTES])
    codec = charset_codec(declared.group(1)) if declared else None
    if codec and codec.startswith("utf-16"):
        codec = "utf-8"  # an @charset readable as ASCII cannot be right about UTF-16
    return _bom(body) or _header_charset(content_type) or codec or "utf-8"


def decode_text(body: bytes, codec: str) -> str:
    """body decoded with codec (one of the two above), without its BOM."""
    # errors="replace": a wrong declaration garbles some text but never stops extraction.
    return body.decode(codec, "replace").removeprefix("\ufeff")


def _bom(body: bytes) -> str | None:
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec
    return None


def _header_charset(content_type: str | None) -> str | None:
    label = _charset_param(content_type or "")
    return charset_codec(label) if label else None


def _charset_param(value: str) -> str | None:
    match = _CHARSET_PARAM.search(value)
    return next((group for group in match.groups() if group is not None), None) if match else None


def _prescan(head: bytes) -> str | None:
    # The HTML spec's prescan, simplified: <meta charset> or <meta http-equiv=Content-Type
    # content="...charset=..."> outside comments; the first usable one wins.
    for meta in _META.finditer(_COMMENT.sub(b"", head)):
        codec = _meta_charset(_attributes(meta.group(1)))
        if codec:
            # A page that could say this in ASCII is not UTF-16 (HTML spec).
            return "utf-8" if codec.startswith("utf-16") else codec
    return None


def _attributes(markup: bytes) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(markup):
        name = match.group(1).decode("latin-1").lower()
        value = next((v for v in match.groups()[1:] if v is not None), b"")
        attrs.setdefault(name, value.decode("latin-1"))
    return attrs


def _meta_charset(attrs: dict[str, str]) -> str | None:
    if "charset" in attrs:
        return charset_codec(attrs["charset"])
    if attrs.get("http-equiv", "").lower() == "content-type" and "content" in attrs:
        label = _charset_param(attrs["content"])
        return charset_codec(label) if label else None
    return None
