"""The one URL normaliser (scope, fetch, WARC, CDXJ, export) and references joined to a base."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from fnmatch import translate
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import unquote, unquote_to_bytes, urljoin, urlparse

from mirror.errors import MirrorError

__all__ = [
    "DEFAULT_IGNORE_QUERY", "InvalidURL", "host_of", "join", "normalize", "resolve", "site_key",
]

# Tracking parameters, then session ids of common platforms (P6): Java servlets, PHP, classic
# ASP, ColdFusion, osCommerce, Zen Cart and the generic spellings. Matching ignores case.
# `sid` is left out on purpose: too many sites use it for content (a story or a sheet id).
DEFAULT_IGNORE_QUERY: tuple[str, ...] = (
    "utm_*", "fbclid", "gclid",
    "jsessionid", "phpsessid", "aspsessionid*", "cfid", "cftoken", "oscsid", "zenid",
    "sessionid", "session_id",
)

DEFAULT_PORTS = {"http": 80, "https": 443}

# WHATWG URL: strip leading/trailing C0 controls and space, drop every tab/CR/LF.
_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = {0x09: None, 0x0A: None, 0x0D: None}

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
# Anything matched here is rewritten: a %XX escape, or one character not allowed literally.
_PATH_FIX = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/]")
_QUERY_FIX = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")
_HOST_CHARS = _UNRESERVED | frozenset(_SUB_DELIMS)
_PATH_PARAM = re.compile(r";([^;/]*)")


class InvalidURL(MirrorError, ValueError):
    """A string that cannot be a fetchable http(s) URL; str(exc) says why.

    ``reason`` is one of:
      "relative"  no scheme at all (a relative reference, or an empty string)
      "scheme"    a scheme other than http/https (mailto:, javascript:, data:, file:, ...)
      "no-host"   http(s) URL with an empty host
      "bad-host"  host that is not a valid domain name, IPv4 or IPv6 address
      "bad-port"  port that is not a number in 0..65535
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Parts(NamedTuple):
    scheme: str
    authority: str
    path: str
    query: str | None


def normalize(url: str, ignore_query: Sequence[str] = DEFAULT_IGNORE_QUERY) -> str:
    """Canonical absolute http(s) URL. Raises InvalidURL.

    Pure, so results are cached: a site's pages share most of their links (navigation,
    stylesheets, images), and a crawl normalises each of them once per page.
    """
    if isinstance(ignore_query, tuple):
        return _normalize_cached(url, ignore_query)
    return _normalize(url, ignore_query)


@lru_cache(maxsize=1 << 15)
def _normalize_cached(url: str, ignore_query: tuple[str, ...]) -> str:
    return _normalize(url, ignore_query)


def _normalize(url: str, ignore_query: Sequence[str]) -> str:
    """normalize() without the cache.

    Lower-case scheme and host, IDN host in punycode, no trailing dot, no default port, no
    userinfo, no fragment, dot segments removed, percent-encoding normalised, '\\' in the
    path read as '/' (as browsers do). Parameters whose name matches an ``ignore_query``
    glob (ignoring case) are removed from the query and, as ``;name=value`` path
    parameters (``;jsessionid=...``), from every path segment.
    """
    parts = _split(url)
    netloc = _netloc(parts)
    path = _fix_percent(_PATH_FIX, parts.path) or "/"
    # before dot-segment removal, so that "/a/..;jsessionid=1" ends as "/" in one pass
    path = _remove_dot_segments(_strip_path_params(path, ignore_query))
    query = _filter_query(_fix_percent(_QUERY_FIX, parts.query or ""), ignore_query)
    return f"{parts.scheme}://{netloc}{path}{'?' + query if query else ''}"


def join(base: str, ref: str) -> str:
    """Resolve a reference found in a page against its base -> absolute URL, not yet normalised.

    Surrounding C0 controls/space and embedded tab/CR/LF are removed and, when the result is
    http(s), '\\' before the query counts as '/' (WHATWG URL). Raises InvalidURL ("bad-host")
    only when the reference cannot be parsed at all (e.g. an unclosed IPv6 bracket).
    """
    base, ref = _clean(base), _clean(ref)
    if not ref:  # urljoin would return base with its fragment; a browser drops it
        return base.partition("#")[0]
    if (_scheme_of(ref) or _scheme_of(base)) in DEFAULT_PORTS:
        ref = _slash_backslashes(ref)
    if _ABSOLUTE_HTTP.match(ref):
        base = _scheme_of(base) + "://_/"  # only the base's scheme plays a part (urljoin)
    elif (ref[0] == "/" and ref[1:2] != "/") or (ref[0] not in "?#/" and not _SCHEME.match(ref)):
        # a path: only the base's directory matters (RFC 3986 5.2.3), and pages of one folder
        # share their links, so the cache below answers most of them
        base = _directory(base)
    return _join(base, ref)


@lru_cache(maxsize=1 << 15)
def _join(base: str, ref: str) -> str:
    try:
        return urljoin(base, ref)
    except ValueError as exc:
        raise InvalidURL("bad-host", f"unparsable reference {ref!r}: {exc}") from exc


_ABSOLUTE_HTTP = re.compile(r"https?://[^/\\]", re.IGNORECASE)


def _directory(base: str) -> str:
    """The base URL up to the last '/' of its path (no query, no fragment)."""
    base = base.partition("#")[0].partition("?")[0]
    authority = base.find("://")
    slash = base.rfind("/")
    if authority < 0 or slash <= authority + 2:  # not hierarchical, or no path at all
        return base
    return base[: slash + 1]


def resolve(base: str, ref: str) -> str | None:
    """ref made absolute against base, or None when there is nothing to fetch.

    None for an empty or fragment-only reference, a relative one against a data: base (it
    has no hierarchy), and anything that cannot be parsed. Every scheme is kept otherwise:
    the crawler decides what to fetch and counts what it rejects.
    """
    ref = ref.strip(_C0_AND_SPACE)
    if not ref or ref.startswith("#"):
        return None
    if not _SCHEME.match(ref) and base[:5].lower() == "data:":
        return None
    try:
        url = join(base, ref)
    except ValueError:  # InvalidURL: e.g. an unclosed IPv6 bracket
        return None
    return url if _SCHEME.match(url) else None


class _Resolver:
    """resolve() against one base, memoised, with a fast path for relative paths.

    join costs about 10 us a call, mostly in cleaning and re-parsing the base for every
    reference. A page's references are mostly relative paths ('img/a.png', '../b.html',
    '/c?d'); for those this merges the path with the base's directory, split once, and
    removes dot segments as urljoin does, which is what join does with them. Any other shape
    (a scheme, '//', '?' or '#' first, ';' params, '\\', tab or newline), and any base that
    is not a plain http(s) URL, goes through resolve(). tests/test_extract.py checks that
    both ways agree.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self._memo: dict[str, str | None] = {}
        self._origin = ""  # 'scheme://netloc' of a base the fast path can use, else ''
        self._dir = "/"  # the base path up to its last '/', its empty segments dropped
        try:
            scheme, netloc, path, _params, _query, _fragment = urlparse(base)
        except ValueError:  # e.g. an unclosed IPv6 bracket: join raises on every reference
            return
        if scheme in ("http", "https") and netloc and _clean(base) == base:
            self._origin = f"{scheme}://{netloc}"
            self._dir += "".join(f"{segment}/" for segment in path.split("/")[1:-1] if segment)

    def __call__(self, ref: str) -> str | None:
        if ref not in self._memo:
            self._memo[ref] = self._resolve(ref)
        return self._memo[ref]

    def _resolve(self, ref: str) -> str | None:
        ref = ref.strip(_C0_AND_SPACE)
        if not (self._origin and _RELATIVE_PATH.match(ref)):
            return resolve(self.base, ref)
        path, _, fragment = ref.partition("#")
        path, _, query = path.partition("?")
        # urljoin removes dot segments as RFC 3986 does, but for one quirk: '..' can remove
        # the root, and an empty segment after it takes its place ('/..//a' is '/a', not
        # '//a'). Merged paths have no empty segment but the last; other paths with one go
        # to join.
        if path[0] != "/":
            path = self._merge(path)
        elif "//" in path and "/." in path:
            return resolve(self.base, ref)
        if "/." in path:
            path = _remove_dot_segments(path)
        url = self._origin + path
        if query:
            url += "?" + query
        return url + "#" + fragment if fragment else url

    def _merge(self, path: str) -> str:
        # urljoin (RFC 3986 5.2.3) drops the empty segments between the base's root and the
        # reference's last segment: 'a//b' on '/x//y' is '/x/a/b'.
        if "//" in path:
            *head, last = path.split("/")
            path = "/".join([*filter(None, head), last])
        return self._dir + path


# A relative-path reference, the shape _Resolver joins itself. Anything else goes to join.
_RELATIVE_PATH = re.compile(
    r"(?=[^?#])(?!//)"  # a path comes first, and not '//' (a network-path reference)
    r"[^:/?#;\\\t\n\r]*"  # first segment: no ':' (it could be read as a scheme)
    r"(?:/[^?#;\\\t\n\r]*)?"  # the rest of the path: no ';' (urlparse splits off params)
    r"(?:[?#][^\\\t\n\r]*)?\Z"  # query and fragment; join drops tab/CR/LF, turns '\' to '/'
)


def host_of(url: str) -> str:
    """Lower-case host (punycode) of an absolute URL, without port; '' if none.

    An IPv6 host keeps its brackets. Any string that is not a valid http(s) URL gives ''.
    """
    try:
        return _host_port(_split(url).authority)[0]
    except InvalidURL:
        return ""


def canonical_site(url: str) -> tuple[str, str]:
    """(site_key, host_of) of a URL that normalize() produced, without parsing it again:
    its authority is already 'host[:port]' in canonical form. The crawler asks this for
    every link of every page."""
    site = url.split("/", 3)[2]
    if site.endswith("]") or ":" not in site:
        return site, site
    return site, site.rpartition(":")[0]


def site_key(url: str) -> str:
    """'host[:port]' of a normalised URL, the key used for per-host politeness.

    The port is kept only when it is not the scheme's default. Raises InvalidURL.
    """
    return _netloc(_split(url))


# -- splitting ---------------------------------------------------------------------------


def _clean(url: str) -> str:
    return url.strip(_C0_AND_SPACE).translate(_TAB_NEWLINE)


def _scheme_of(url: str) -> str:
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else ""


def _slash_backslashes(url: str) -> str:
    """'\\' -> '/' before the query or fragment; browsers do this for http(s) URLs."""
    end = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[:end].replace("\\", "/") + url[end:]


def _split(url: str) -> _Parts:
    """Split an absolute http(s) URL the WHATWG way: any run of '/' or '\\' after 'http:'."""
    url = _clean(url)
    match = _SCHEME.match(url)
    if not match:
        raise InvalidURL("relative", f"no scheme in {url[:80]!r}")
    scheme = match.group(1).lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidURL("scheme", f"unsupported scheme {scheme!r}")
    rest = url[match.end() :].partition("#")[0]
    before, has_query, query = rest.partition("?")
    authority, slash, path = before.replace("\\", "/").lstrip("/").partition("/")
    return _Parts(scheme, authority, slash + path, query if has_query else None)


# -- host and port -----------------------------------------------------------------------


def _netloc(parts: _Parts) -> str:
    """Canonical 'host[:port]', the port only when it is not the scheme's default."""
    host, port = _host_port(parts.authority)
    return host if port in (None, DEFAULT_PORTS[parts.scheme]) else f"{host}:{port}"


@lru_cache(maxsize=8192)  # a crawl sees few authorities many times; IDNA and IPv4 checks cost
def _host_port(authority: str) -> tuple[str, int | None]:
    """Canonical host and port (None when absent or empty) of an authority; drops userinfo."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]") + 1
        host, port_text = hostport[:end], hostport[end:]
        if not end or (port_text and not port_text.startswith(":")):
            raise InvalidURL("bad-host", f"malformed IPv6 host in {authority!r}")
        port_text = port_text[1:]
    else:
        host, _, port_text = hostport.partition(":")
    if not host:
        raise InvalidURL("no-host", "URL has an empty host")
    canonical = _ipv6(host[1:-1]) if host.startswith("[") else _domain_or_ipv4(host)
    return canonical, _port(port_text)


def _port(text: str) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > 5:
        raise InvalidURL("bad-port", f"invalid port {text[:20]!r}")
    port = int(text)
    if port > 65535:
        raise InvalidURL("bad-port", f"port {port} out of range")
    return port


def _ipv6(text: str) -> str:
    try:
        if "%" in text:  # zone ids have no place in a URL to fetch
            raise ValueError(text)
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError:
        raise InvalidURL("bad-host", f"invalid IPv6 address {text[:60]!r}") from None


def _domain_or_ipv4(host: str) -> str:
    """Percent-decode, map to ASCII (IDNA), then parse as IPv4 if it ends in a number."""
    try:
        name = _to_ascii(unquote_to_bytes(host).decode("utf-8"))
    except UnicodeError:
        raise InvalidURL("bad-host", f"invalid host name {host[:60]!r}") from None
    name = name.removesuffix(".")
    if name and _ends_in_number(name):
        return _ipv4(name)
    labels = name.split(".")
    too_long = len(name) > 253 or max(map(len, labels)) > 63
    if too_long or "" in labels or not set(name) <= _HOST_CHARS:
        raise InvalidURL("bad-host", f"invalid host name {host[:60]!r}")
    return name


def _to_ascii(name: str) -> str:
    if name.isascii() and "xn--" not in name.lower():
        # nothing to map or to check: UTS #46 (std3 rules off) only lower-cases ASCII, and
        # the caller checks the characters; `mirror check` then loads no IDNA tables
        return name.lower()
    try:  # here, not at the top: `mirror check` loads this module and needs no IDNA tables
        import idna
    except ImportError:  # pragma: no cover - yarl, our HTTP stack's URL library, needs idna
        return name.encode("idna").decode("ascii").lower()  # IDNA2003, the stdlib codec
    # IDNA2008 with UTS #46 mapping; ASCII labels (even with '_') pass as they are.
    mapped = idna.uts46_remap(name, std3_rules=False, transitional=False)
    labels = [lb if lb.isascii() else idna.alabel(lb).decode("ascii") for lb in mapped.split(".")]
    for label in labels:
        if label[:4].lower() == "xn--":
            idna.ulabel(label)  # IDNAError (a UnicodeError) unless valid punycode, as browsers
    return ".".join(labels)


def _ipv4_number(part: str) -> int | None:
    """WHATWG IPv4 number: decimal, 0x-hex or 0-octal; None if it is not one."""
    base = 10
    if part[:2] in ("0x", "0X"):
        part, base = part[2:] or "0", 16
    elif len(part) > 1 and part.startswith("0"):
        part, base = part[1:], 8
    if not (part.isascii() and part.isalnum()):
        return None
    try:
        return int(part, base)
    except ValueError:
        return None


def _ends_in_number(name: str) -> bool:
    last = name.rpartition(".")[2]
    return (last.isascii() and last.isdigit()) or _ipv4_number(last) is not None


def _ipv4(name: str) -> str:
    """WHATWG IPv4 parser: '127.1', '0x7f.0.0.1' and '2130706433' all mean 127.0.0.1."""
    parts = name.split(".")
    numbers = [n for n in map(_ipv4_number, parts) if n is not None] if len(parts) <= 4 else []
    if len(numbers) != len(parts):
        raise InvalidURL("bad-host", f"invalid IPv4 address {name[:60]!r}")
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise InvalidURL("bad-host", f"invalid IPv4 address {name[:60]!r}")
    return str(ipaddress.IPv4Address(sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last))


# -- path and query ----------------------------------------------------------------------


def _fix_escape(match: re.Match[str]) -> str:
    """%XX: decode if unreserved, else upper-case; other characters: UTF-8 percent-encode."""
    text = match.group()
    if len(text) == 3:
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: browsers see U+FFFD
        data = "\ufffd".encode()
    return "".join(f"%{byte:02X}" for byte in data)


def _fix_percent(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(_fix_escape, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 on a path that starts with '/'."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def _filter_query(query: str, ignore: Sequence[str]) -> str:
    """Drop '&'-separated parameters whose decoded name matches a glob; keep the rest as is."""
    params = query.split("&")
    kept = [p for p in params if not _ignored(unquote(p.partition("=")[0]), ignore)]
    return query if len(kept) == len(params) else "&".join(kept)


def _strip_path_params(path: str, ignore: Sequence[str]) -> str:
    """Drop ';name[=value]' path parameters whose decoded name matches a glob."""
    if ";" not in path or not ignore:
        return path
    return _PATH_PARAM.sub(
        lambda m: "" if _ignored(unquote(m.group(1).partition("=")[0]), ignore) else m.group(),
        path,
    )


def _ignored(name: str, ignore: Sequence[str]) -> bool:
    return bool(ignore) and _ignore_pattern(tuple(ignore)).match(name) is not None


@lru_cache(maxsize=64)
def _ignore_pattern(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One case-insensitive regex for a list of fnmatch globs."""
    return re.compile("|".join(translate(g) for g in globs), re.IGNORECASE)
