"""Tables and property tests for mirror.web.urls, the one URL normaliser."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mirror.web.urls import (
    DEFAULT_IGNORE_QUERY,
    InvalidURL,
    canonical_site,
    host_of,
    join,
    normalize,
    site_key,
)

# A strict RFC 3986 absolute http(s) URI as normalize() produces it: lower-case host,
# upper-case %XX, brackets only around an IPv6 host, no userinfo, no fragment.
_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-F]{2})"
RFC3986 = re.compile(
    r"https?://"
    r"(?:[a-z0-9\-._~!$&'()*+,;=]+|\[[0-9a-f:.]+\])"
    r"(?::[0-9]{1,5})?"
    rf"(?:/{_PCHAR}*)+"
    rf"(?:\?(?:{_PCHAR}|[/?])+)?\Z"
)
_ENCODED_UNRESERVED = re.compile(r"%(?:4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE]|3[0-9]|2[DE])")

NORMALIZE_CASES = [
    # scheme and host case
    ("lower-scheme-host", "HTTP://Example.COM/Path", "http://example.com/Path"),
    ("https-mixed-case", "hTTpS://EXAMPLE.com/", "https://example.com/"),
    # IDN, trailing dot, IP hosts
    ("idn-punycode", "http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ("idn-uts46-fullwidth-dot", "http://bücher\u3002example/", "http://xn--bcher-kva.example/"),
    ("punycode-kept", "http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"),
    ("underscore-host", "http://My_Host.example/", "http://my_host.example/"),
    ("host-percent-decoded", "http://ex%41mple.com/", "http://example.com/"),
    ("trailing-dot", "http://example.com./a", "http://example.com/a"),
    ("ipv4", "http://192.168.0.1:8080/", "http://192.168.0.1:8080/"),
    ("ipv4-shorthand", "http://127.1/", "http://127.0.0.1/"),
    ("ipv4-hex-octal", "http://0x7f.0.0.010/", "http://127.0.0.8/"),
    ("ipv4-integer", "http://2130706433/", "http://127.0.0.1/"),
    ("ipv6-compressed", "http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"),
    ("ipv6-port", "https://[::1]:8443/x", "https://[::1]:8443/x"),
    # ports
    ("http-default-port", "http://example.com:80/", "http://example.com/"),
    ("https-default-port", "https://example.com:443/", "https://example.com/"),
    ("http-443-kept", "http://example.com:443/", "http://example.com:443/"),
    ("port-leading-zeros", "http://example.com:0080/", "http://example.com/"),
    ("empty-port", "http://example.com:/", "http://example.com/"),
    ("non-default-port", "https://example.com:8443/", "https://example.com:8443/"),
    # userinfo (P9)
    ("userinfo", "http://user:pw@host/", "http://host/"),
    ("userinfo-last-at", "http://a@b:c@host:81/", "http://host:81/"),
    ("userinfo-empty", "http://@host/", "http://host/"),
    # fragment
    ("fragment", "http://host/a#frag", "http://host/a"),
    ("fragment-after-query", "http://host/a?b=1#x?y", "http://host/a?b=1"),
    ("fragment-only-hash", "http://host/#", "http://host/"),
    # path
    ("empty-path", "http://host", "http://host/"),
    ("empty-path-query", "http://host?a=1", "http://host/?a=1"),
    ("dot-segments", "http://host/a/./b/../c", "http://host/a/c"),
    ("dot-above-root", "http://host/../a", "http://host/a"),
    ("dot-trailing", "http://host/a/b/..", "http://host/a/"),
    ("dot-single-trailing", "http://host/a/.", "http://host/a/"),
    ("dot-encoded", "http://host/a/%2E%2e/b", "http://host/b"),
    ("double-slash-kept", "http://host//a//b", "http://host//a//b"),
    ("backslash-path", "http://host\\a\\b", "http://host/a/b"),
    ("backslash-after-scheme", "https:\\\\host\\x", "https://host/x"),
    ("extra-slashes-after-scheme", "http:///host/x", "http://host/x"),
    ("no-slash-after-scheme", "http:host/x", "http://host/x"),
    ("backslash-query-encoded", "http://host/a?b\\c", "http://host/a?b%5Cc"),
    # percent-encoding
    ("hex-upper", "http://host/%e2%82%ac", "http://host/%E2%82%AC"),
    ("unreserved-decoded", "http://host/%41%7e%2D%5f%2e%30", "http://host/A~-_.0"),
    ("reserved-kept-path", "http://host/a%2Fb%3Fc%23d%25", "http://host/a%2Fb%3Fc%23d%25"),
    ("reserved-kept-query", "http://host/?a=%26%3D%2b", "http://host/?a=%26%3D%2B"),
    ("space-path", "http://host/a b", "http://host/a%20b"),
    ("space-query", "http://host/?q=a b", "http://host/?q=a%20b"),
    ("plus-kept", "http://host/?q=a+b", "http://host/?q=a+b"),
    ("non-ascii-path", "http://host/café", "http://host/caf%C3%A9"),
    ("non-ascii-query", "http://host/?q=日本", "http://host/?q=%E6%97%A5%E6%9C%AC"),
    ("controls", "http://host/a\x00b\x7f", "http://host/a%00b%7F"),
    ("unsafe-ascii", 'http://host/"<>^`{|}', "http://host/%22%3C%3E%5E%60%7B%7C%7D"),
    ("brackets-path-query", "http://host/[a]?[b]", "http://host/%5Ba%5D?%5Bb%5D"),
    ("lone-percent", "http://host/100%/%zz%4", "http://host/100%25/%25zz%254"),
    ("query-slash-question-literal", "http://host/p?a=/b?c", "http://host/p?a=/b?c"),
    ("sub-delims-kept", "http://host/!$&'()*+,;=:@", "http://host/!$&'()*+,;=:@"),
    ("lone-surrogate", "http://host/\ud800", "http://host/%EF%BF%BD"),
    # WHATWG whitespace handling
    ("surrounding-space", "  http://host/a \n", "http://host/a"),
    ("embedded-tab-newline", "http://ho\tst/a\r\nb", "http://host/ab"),
    # query filtering
    ("utm-removed", "http://host/?utm_source=x&a=1&utm_medium=y", "http://host/?a=1"),
    ("fbclid-gclid", "http://host/?fbclid=1&b=2&gclid=3", "http://host/?b=2"),
    ("all-removed", "http://host/p?utm_source=x&fbclid=y", "http://host/p"),
    ("order-kept", "http://host/?z=1&a=2&m=3", "http://host/?z=1&a=2&m=3"),
    ("exact-bytes-kept", "http://host/?b=1&&c&utm_x=9&d==", "http://host/?b=1&&c&d=="),
    ("names-ignore-case", "http://host/?UTM_source=x&FBCLID=1&b", "http://host/?b"),
    ("values-not-matched", "http://host/?a=fbclid&b=utm_x", "http://host/?a=fbclid&b=utm_x"),
    # session ids (P6): query parameters, any case, and ;jsessionid= path parameters
    ("jsessionid-query", "http://host/p?JSESSIONID=A1B2&x=1", "http://host/p?x=1"),
    ("phpsessid", "http://host/p?x=1&PHPSESSID=0123abcd", "http://host/p?x=1"),
    ("aspsessionid", "http://host/p?ASPSESSIONIDQASDTRRB=KLM&x", "http://host/p?x"),
    ("coldfusion", "http://host/p?CFID=1&CFTOKEN=2&x=3", "http://host/p?x=3"),
    ("oscommerce-zencart", "http://host/p?osCsid=a&zenid=b&x", "http://host/p?x"),
    ("sessionid-generic", "http://host/p?SessionID=a&session_id=b&x", "http://host/p?x"),
    ("sid-kept", "http://host/p?sid=5&ssid=6", "http://host/p?sid=5&ssid=6"),
    ("session-lookalikes-kept", "http://host/p?session=1&sessionids=2&mysessionid=3",
     "http://host/p?session=1&sessionids=2&mysessionid=3"),
    ("jsessionid-path", "http://host/a/b.jsp;jsessionid=0A1B2C?x=1", "http://host/a/b.jsp?x=1"),
    ("jsessionid-path-case", "http://host/a;JSessionId=0A1B2C", "http://host/a"),
    ("jsessionid-path-middle", "http://host/a;jsessionid=1/b", "http://host/a/b"),
    ("path-params-kept", "http://host/a;v=1;jsessionid=2;w=3", "http://host/a;v=1;w=3"),
    ("path-param-encoded-name", "http://host/a;jsess%49onid=1", "http://host/a"),
    ("path-param-no-value", "http://host/a;jsessionid", "http://host/a"),
    ("path-param-before-dots", "http://host/a/b/..;jsessionid=1", "http://host/a/"),
    ("path-semicolon-encoded-kept", "http://host/a%3Bjsessionid=1", "http://host/a%3Bjsessionid=1"),
    ("path-param-utm", "http://host/a;utm_source=x", "http://host/a"),
    ("semicolon-in-query-kept", "http://host/a?q=1;jsessionid=2", "http://host/a?q=1;jsessionid=2"),
    ("encoded-name-matched", "http://host/?utm%5Fsource=x&a", "http://host/?a"),
    ("name-without-value", "http://host/?fbclid&a=1", "http://host/?a=1"),
    ("empty-query", "http://host/a?", "http://host/a"),
    ("only-ampersand-kept", "http://host/a?&", "http://host/a?&"),
]


@pytest.mark.parametrize(
    ("url", "expected"), [c[1:] for c in NORMALIZE_CASES], ids=[c[0] for c in NORMALIZE_CASES]
)
def test_normalize(url: str, expected: str) -> None:
    assert normalize(url) == expected
    assert normalize(expected) == expected


def test_normalize_custom_ignore_query() -> None:
    url = "http://host/?PHPSESSID=1&sid=2&utm_source=3&a=4"
    assert normalize(url, ignore_query=("PHPSESSID", "s?d")) == "http://host/?utm_source=3&a=4"
    assert normalize(url, ignore_query=("phpsessid",)) == "http://host/?sid=2&utm_source=3&a=4"
    assert normalize(url, ignore_query=()) == url
    path = "http://host/a;jsessionid=1;b=2"
    assert normalize(path, ignore_query=()) == path  # path parameters follow the same list
    assert normalize(path, ignore_query=("B",)) == "http://host/a;jsessionid=1"


def test_session_id_rotation_gives_one_url() -> None:
    """Each visit of a page that links to itself with a fresh session id: one canonical URL."""
    urls = {normalize(f"http://host/shop;jsessionid={n:032X}?PHPSESSID={n}&item=7")
            for n in range(50)}
    assert urls == {"http://host/shop?item=7"}


INVALID_CASES = [
    ("mailto", "mailto:someone@example.com", "scheme"),
    ("javascript", "javascript:alert(1)", "scheme"),
    ("data", "data:text/html,hi", "scheme"),
    ("file", "file:///etc/passwd", "scheme"),
    ("ftp", "ftp://example.com/x", "scheme"),
    ("tel", "tel:+123", "scheme"),
    ("host-port-no-scheme", "localhost:8080/x", "scheme"),
    ("relative-path", "a/b.html", "relative"),
    ("absolute-path", "/a/b", "relative"),
    ("protocol-relative", "//example.com/x", "relative"),
    ("empty", "", "relative"),
    ("whitespace", " \t\n", "relative"),
    ("scheme-only", "http:", "no-host"),
    ("empty-authority", "http:///", "no-host"),
    ("userinfo-only", "https://user:pw@/x", "no-host"),
    ("port-only", "http://:80/", "no-host"),
    ("port-letters", "http://host:8o/", "bad-port"),
    ("port-too-big", "http://host:65536/", "bad-port"),
    ("port-huge", "http://host:" + "9" * 5000 + "/", "bad-port"),
    ("port-unicode-digits", "http://host:\u0668\u0660/", "bad-port"),
    ("port-negative", "http://host:-1/", "bad-port"),
    ("host-space", "http://ho st/", "bad-host"),
    ("host-bracket", "http://ho[st/", "bad-host"),
    ("host-angle", "http://a<b/", "bad-host"),
    ("host-control", "http://a%00b/", "bad-host"),
    ("host-empty-label", "http://a..b/", "bad-host"),
    ("host-label-too-long", "http://" + "a" * 64 + ".com/", "bad-host"),
    ("host-bad-utf8", "http://%ff/", "bad-host"),
    ("host-idna-invalid", "http://a\u200db.example/", "bad-host"),
    ("ipv6-unclosed", "http://[::1/", "bad-host"),
    ("ipv6-invalid", "http://[::g]/", "bad-host"),
    ("ipv6-zone-id", "http://[fe80::1%25eth0]/", "bad-host"),
    ("ipv6-junk-after", "http://[::1]x/", "bad-host"),
    ("ipv4-five-parts", "http://1.2.3.4.5/", "bad-host"),
    ("ipv4-part-too-big", "http://1.256.3.4/", "bad-host"),
    ("ipv4-last-too-big", "http://1.2.65536/", "bad-host"),
    ("ends-in-number", "http://example.123/", "bad-host"),
    ("ipv4-bad-octal", "http://1.2.3.09/", "bad-host"),
]


@pytest.mark.parametrize(
    ("url", "reason"), [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES]
)
def test_normalize_rejects(url: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        normalize(url)
    assert info.value.reason == reason
    assert isinstance(info.value, ValueError)
    assert str(info.value)


def test_invalid_url_message_names_the_scheme() -> None:
    with pytest.raises(InvalidURL, match="unsupported scheme 'mailto'"):
        normalize("MAILTO:x@example.com")


BASE = "http://example.com/a/b/c.html?q=1#top"
JOIN_CASES = [
    ("relative-file", "d.html", "http://example.com/a/b/d.html"),
    ("relative-dir", "d/", "http://example.com/a/b/d/"),
    ("dot-dot", "../x", "http://example.com/a/x"),
    ("dot-dot-above-root", "../../../../x", "http://example.com/x"),
    ("absolute-path", "/root", "http://example.com/root"),
    ("protocol-relative", "//other.org/x", "http://other.org/x"),
    ("absolute", "https://other.org/y", "https://other.org/y"),
    ("query-only", "?p=2", "http://example.com/a/b/c.html?p=2"),
    ("fragment-only", "#frag", "http://example.com/a/b/c.html?q=1#frag"),
    ("empty", "", "http://example.com/a/b/c.html?q=1"),
    ("surrounding-whitespace", " \t\n d.html \r\n", "http://example.com/a/b/d.html"),
    ("embedded-tab-newline", "d\t.h\ntm\rl", "http://example.com/a/b/d.html"),
    ("backslash-protocol-relative", "\\\\other.org\\x", "http://other.org/x"),
    ("backslash-relative", "x\\y?z\\w", "http://example.com/a/b/x/y?z\\w"),
    ("same-scheme-no-slash", "http:d.html", "http://example.com/a/b/d.html"),
    ("mailto-kept", "mailto:x@example.com", "mailto:x@example.com"),
    ("javascript-kept", " javascript:void(0)", "javascript:void(0)"),
    ("javascript-backslash-kept", "javascript:a\\b", "javascript:a\\b"),
]


@pytest.mark.parametrize(
    ("ref", "expected"), [c[1:] for c in JOIN_CASES], ids=[c[0] for c in JOIN_CASES]
)
def test_join(ref: str, expected: str) -> None:
    assert join(BASE, ref) == expected


def test_join_unparsable_reference_raises() -> None:
    with pytest.raises(InvalidURL) as info:
        join(BASE, "http://[::1/x")
    assert info.value.reason == "bad-host"


HOST_CASES = [
    ("plain", "http://Example.COM/x", "example.com", "example.com"),
    ("default-port", "https://example.com:443/", "example.com", "example.com"),
    ("port", "http://example.com:8080/", "example.com", "example.com:8080"),
    ("https-port-80", "https://example.com:80/", "example.com", "example.com:80"),
    ("userinfo", "http://u:p@example.com:81/", "example.com", "example.com:81"),
    ("idn", "http://Bücher.example./", "xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("ipv4", "http://10.0.0.1:8000/", "10.0.0.1", "10.0.0.1:8000"),
    ("ipv6", "http://[::1]:8000/", "[::1]", "[::1]:8000"),
]


@pytest.mark.parametrize(
    ("url", "host", "key"), [c[1:] for c in HOST_CASES], ids=[c[0] for c in HOST_CASES]
)
def test_host_of_and_site_key(url: str, host: str, key: str) -> None:
    assert host_of(url) == host
    assert site_key(url) == key
    assert site_key(normalize(url)) == key


@pytest.mark.parametrize("url", ["", "/relative", "mailto:x@y", "file:///etc", "http:///"])
def test_host_of_none(url: str) -> None:
    assert host_of(url) == ""


def test_site_key_rejects_non_http() -> None:
    with pytest.raises(InvalidURL):
        site_key("mailto:x@example.com")


def test_default_ignore_query() -> None:
    assert DEFAULT_IGNORE_QUERY[:3] == ("utm_*", "fbclid", "gclid")
    assert {"jsessionid", "phpsessid", "aspsessionid*", "cfid", "cftoken"} <= set(
        DEFAULT_IGNORE_QUERY)
    assert "sid" not in DEFAULT_IGNORE_QUERY  # too many sites use it for content
    assert all(p == p.lower() for p in DEFAULT_IGNORE_QUERY)


# -- properties --------------------------------------------------------------------------

HOSTS = st.sampled_from(
    [
        "example.com",
        "EXAMPLE.com.",
        "Bücher.example",
        "xn--bcher-kva.example",
        "a_b.example",
        "127.0.0.1",
        "0x7f.1",
        "[::1]",
        "[2001:DB8::0:1]",
        "ex%41mple.org",
        "日本.jp",
    ]
)
_SAFE_USER = st.text(st.characters(exclude_characters="/\\?#@[]", min_codepoint=0x21))
USERINFO = st.one_of(st.just(""), st.builds("{}@".format, _SAFE_USER))
PORTS = st.one_of(st.just(""), st.just(":"), st.integers(0, 65535).map(":{}".format))
SEGMENTS = st.lists(
    st.text(max_size=8)
    | st.sampled_from([";jsessionid=1", "a;JSESSIONID=x;b=2", "..;jsessionid=", ";", ".."]),
    max_size=5,
)
PARAMS = st.lists(
    st.tuples(
        st.sampled_from(["a", "utm_source", "fbclid", "q", "", "PHPSESSID", "JSessionID"])
        | st.text(max_size=4),
        st.text(max_size=6),
    ),
    max_size=4,
)


@st.composite
def structured_urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTTpS"]))
    path = "/".join(draw(SEGMENTS))
    url = f"{scheme}://{draw(USERINFO)}{draw(HOSTS)}{draw(PORTS)}/{path}"
    params = draw(PARAMS)
    if params or draw(st.booleans()):
        url += "?" + "&".join(f"{k}={v}" for k, v in params)
    if draw(st.booleans()):
        url += "#" + draw(st.text(max_size=6))
    return url


def _check_canonical(url: str) -> None:
    canonical = normalize(url)
    assert normalize(canonical) == canonical
    assert RFC3986.match(canonical), canonical
    assert "#" not in canonical
    assert "@" not in canonical.split("/")[2]
    assert not _ENCODED_UNRESERVED.search(canonical), canonical
    assert site_key(canonical) == canonical.split("/")[2]
    assert host_of(canonical) == host_of(url)


@settings(max_examples=200)
@given(structured_urls())
@example("http://a/%2e%2E/.%2e/b?utm_x=1&&#x")
def test_structured_urls_normalise_idempotently(url: str) -> None:
    _check_canonical(url)


@settings(max_examples=200)
@given(st.one_of(st.text(), st.builds("http://{}".format, st.text())))
def test_any_text_normalises_idempotently_or_raises(url: str) -> None:
    try:
        normalize(url)
    except InvalidURL as exc:
        assert exc.reason in {"relative", "scheme", "no-host", "bad-host", "bad-port"}
        return
    _check_canonical(url)


_PLAIN = st.text(st.characters(exclude_characters="/?#\\%\t\r\n&=", exclude_categories=["Cs"]))


@settings(max_examples=200)
@given(st.lists(_PLAIN.filter(lambda s: s not in (".", "..")), max_size=4), _PLAIN, _PLAIN)
def test_percent_encoding_keeps_meaning(segments: list[str], name: str, value: str) -> None:
    path = "/" + "/".join([*segments, "end"])
    canonical = normalize(f"http://host{path}?{name}={value}&z", ignore_query=())
    got_path, _, got_query = canonical.removeprefix("http://host").partition("?")
    assert unquote(got_path) == path
    assert [unquote(p) for p in got_query.split("&")] == [f"{name}={value}", "z"]


@settings(max_examples=200)
@given(st.text(max_size=20))
def test_join_then_normalise_is_stable(ref: str) -> None:
    try:
        canonical = normalize(join(BASE, ref))
    except InvalidURL:
        return
    assert normalize(canonical) == canonical
    assert RFC3986.match(canonical), canonical


def _join_without_shortcuts(base: str, ref: str) -> str:
    """join() as first written: clean, slash the backslashes, urljoin the whole base."""
    from urllib.parse import urljoin

    from mirror.web.urls import _clean, _scheme_of, _slash_backslashes

    base, ref = _clean(base), _clean(ref)
    if not ref:
        return base.partition("#")[0]
    if (_scheme_of(ref) or _scheme_of(base)) in ("http", "https"):
        ref = _slash_backslashes(ref)
    return urljoin(base, ref)


_REF_PIECES = st.sampled_from(["", ".", "..", "a", "b.html", "?q=1", "#f", "/", "//h2/x",
                               "\\\\", ";p=1", "../c/./d", "http://o.test/p", " x ", "%2e",
                               "HTTPS://O.test", "http:x", "https:", "//[::1", "ftp://f/"])


@settings(max_examples=1000)
@given(st.sampled_from(["http://h.test", "http://h.test/", "http://h.test/a/b.html?x#y",
                        "https://h.test/a/b/", "http://h.test/a;p/b?q", "http://h.test?q",
                        "http://h.test/a\\b/c"]),
       st.lists(_REF_PIECES, min_size=1, max_size=4).map("".join))
def test_join_shortcuts_change_nothing(base: str, ref: str) -> None:
    """join() resolves path references against the base's directory and caches: the
    result must be what resolving against the whole base gives."""
    try:
        expected = _join_without_shortcuts(base, ref)
    except ValueError:
        return
    assert join(base, ref) == expected


@given(st.sampled_from(["http://Example.COM:80/a", "https://h.test:8443/x?y", "http://[::1]:8080/",
                        "http://[2001:DB8::1]/", "http://user:pw@h.test./p", "https://127.1/",
                        "http://xn--bcher-kva.example:81", "http://Bücher.example/"]),
       st.text(max_size=20))
def test_canonical_site_agrees_with_the_parsing_functions(url: str, path: str) -> None:
    canonical = normalize(url + "/" + path.replace("#", ""))
    assert canonical_site(canonical) == (site_key(canonical), host_of(canonical))
