"""Fuzzy matching for replay (pure): a script's request that carries a cache-busting query
parameter (`?_=1712345678901`, `&cb=0.3187`, `&callback=jQuery3110_1712345678901`) never
matches the URL the crawl stored, whose value was another; it is answered by the archived
URL of the same path that differs only by such parameters.

The facts, from the two replayers people compare with:
- pywb (rules.yaml `default_filters.url_normalize`, applied to the asked and the stored URL
  alike): drops `_`, `cb`, `uncache` with digits, `utm_*`, `fbclid`, a name holding `bust` or
  `ts` with a 13-16 digit value starting with 1 (a time in ms), and keeps `callback=jsonp` and
  `<name>=jquery` without the digits that follow. A path with a file extension (other than
  asp, aspx, jsp, php, pl, exe, dll) also matches the same path with any query.
- wabac.js (ReplayWeb.page, fuzzymatcher.ts, its generic rule): drops `_`, `cb`, `_ga` and
  any name holding `cache` with a value of digits, dots and minus signs, `utm_*`, the
  jsonp and jQuery callbacks; for .js .json .css and media, any query of the same path;
  among several, the one whose query is most alike (keys starting with `_` weigh little).

Ours: the union of those rules, plus the short names scripts use for a time or a random
value (`t`, `ts`, `v`, `r`, `rnd`, `time`, `timestamp`, `nocache`...) when the value looks
like one (a Unix time in seconds or ms, Math.random(), a long hex or base-36 token). An
exact URL that exists always wins (the caller asks here only on a miss)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl

__all__ = ["base_of", "best_matches", "fuzzy_key", "is_volatile", "rename_callback"]

#: names whose value is dropped when it is a number (pywb, wabac.js) or volatile
_BUSTERS = re.compile(r"_|cb|_ga|uncache|nocache|rnd|rand|random|nonce|\w*cache\w*|\w*bust\w*",
                      re.I)
#: short names that hold a time or a random value in scripts, but may be content: dropped
#: only when the value looks volatile
_MAYBE = re.compile(r"t|ts|_t|_ts|v|_v|r|_r|time|timestamp|stamp|ver|version|\w*ts\w*", re.I)
_NUMBER = re.compile(r"-?[\d.]+")
#: a Unix time in seconds (2001-2286) or milliseconds, possibly with a fraction
_TIME = re.compile(r"1\d{9}(?:\d{3})?(?:\.\d+)?")
#: Math.random() (0.xxxx, or its digits) and random tokens: long hex or base-36 runs
_RANDOM = re.compile(r"0?\.\d{6,}|\d{15,}|[0-9a-f]{12,}|(?=[a-z]*\d)(?=\d*[a-z])[0-9a-z]{10,}",
                     re.I)
#: callback values made per request: jQuery's `jQuery<version><random>_<time>`, and jsonp<n>
_CALLBACK = re.compile(r"(jquery)\d+_\d+|(jsonp)[\w.]+", re.I)
_TRACKERS = re.compile(r"utm_\w+|fbclid|gclid", re.I)
#: a file path whose query pywb and wabac.js ignore when nothing closer is archived
_FILE_EXT = re.compile(r"\.(?:js|mjs|json|css|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|otf|"
                       r"mp3|mp4|webm|ogg|m3u8|mpd|ts|m4s|pdf|xml|txt)$", re.I)


def base_of(url: str) -> str:
    """The URL without its query and fragment: the captures a request may stand for share it."""
    return url.partition("#")[0].partition("?")[0]


def is_volatile(value: str) -> bool:
    """A value made at request time: a time, a random number or token."""
    return bool(_TIME.fullmatch(value) or _RANDOM.fullmatch(value))


def _ignored(name: str, value: str) -> bool:
    if _TRACKERS.fullmatch(name):
        return True
    if _BUSTERS.fullmatch(name) and (_NUMBER.fullmatch(value) or is_volatile(value)):
        return True
    return bool(_MAYBE.fullmatch(name)) and is_volatile(value)


def _params(url: str) -> list[tuple[str, str]]:
    query = url.partition("#")[0].partition("?")[2]
    return parse_qsl(query, keep_blank_values=True)


def fuzzy_key(url: str) -> str:
    """The URL as fuzzy matching compares it: cache-busting and tracking parameters dropped,
    a per-request callback name reduced to its kind (`jquery`, `jsonp`), the rest sorted."""
    kept = []
    for name, value in _params(url):
        if _ignored(name, value):
            continue
        callback = _CALLBACK.fullmatch(value)
        if callback:
            value = (callback.group(1) or callback.group(2)).lower()
        kept.append(f"{name}={value}")
    return base_of(url) + ("?" + "&".join(sorted(kept)) if kept else "")


def _likeness(asked: list[tuple[str, str]], stored: list[tuple[str, str]]) -> float:
    """How alike two queries are: a shared name counts, a shared value more; names starting
    with `_` weigh a hundredth of the others (wabac.js weighs them 0.1 against 10)."""
    theirs = dict(stored)
    score = 0.0
    for name, value in asked:
        weight = 0.01 if name.startswith("_") else 1.0
        if name in theirs:
            score += weight * (2.0 if theirs[name] == value else 0.5)
    return score - 0.1 * len(set(theirs) - {n for n, _ in asked})


def best_matches(asked: str, stored: Iterable[str]) -> list[str]:
    """The stored URLs (of the same base) that stand for `asked`: those equal to it once the
    varying parameters are ignored; failing those, for a file path (.js, .json, .css, an
    image...), the ones whose query is most alike. Empty when none may stand for it."""
    base = base_of(asked)
    same_base = [url for url in stored if base_of(url) == base and url != asked]
    key = fuzzy_key(asked)
    equal = [url for url in same_base if fuzzy_key(url) == key]
    if equal or not same_base or not _FILE_EXT.search(base):
        return equal
    want = _params(asked)
    scores = {url: _likeness(want, _params(url)) for url in same_base}
    top = max(scores.values())
    return [url for url in same_base if scores[url] == top]


def _callback_of(url: str) -> tuple[str, str] | None:
    for name, value in _params(url):
        if _CALLBACK.fullmatch(value):
            return name, value
    return None


_JS_NAME = re.compile(r"[A-Za-z_$][\w$.]*")


def rename_callback(body: bytes, asked: str, archived: str) -> bytes:
    """A JSONP answer calls the callback named in the URL it was fetched by; replayed for
    another request, it must call the one this request named (as pywb's jsonp rewriter
    does), else the page's script never gets its data. Other bodies are returned as given."""
    mine, theirs = _callback_of(asked), _callback_of(archived)
    if mine is None or theirs is None or mine[0] != theirs[0] or mine[1] == theirs[1]:
        return body
    if not _JS_NAME.fullmatch(mine[1]):  # never write anything but a name into a script
        return body
    old = theirs[1].encode()
    head = re.match(rb"\s*(?:/\*.*?\*/\s*|//[^\n]*\n\s*)*", body, re.S)
    at = head.end() if head else 0
    end = at + len(old)
    if body[at:end] != old or body[end : end + 1] not in (b"(", b" "):
        return body
    return body[:at] + mine[1].encode() + body[end:]
