"""The fuzzy matcher of replay (mirror.replay.fuzzy), case by case: which parameters it
ignores, which it keeps, how it chooses among several, and the JSONP callback it renames."""

from __future__ import annotations

import pytest

from mirror.replay.fuzzy import best_matches, fuzzy_key, is_volatile, rename_callback

API = "http://site.test/api/items"


@pytest.mark.parametrize("value", [
    "1712345678", "1712345678901", "1712345678.123", "0.8314455962389", ".831445596",
    "3fa85f6457174562b3fc2c963f66afa6", "k2j4h5g6f7d8", "123456789012345678",
])
def test_times_and_random_values_are_volatile(value: str) -> None:
    assert is_volatile(value)


@pytest.mark.parametrize("value", ["2", "1.2.3", "2024", "en", "main", "abcdefghijkl", "42x"])
def test_versions_words_and_small_numbers_are_not(value: str) -> None:
    assert not is_volatile(value)


@pytest.mark.parametrize("query", [
    "_=1712345678901", "cb=12345", "cb=0.5", "_ga=2.1234.5678", "nocache=99", "cachebust=7",
    "uncache=3", "t=1712345678901", "ts=1712345678", "v=0.28371928371", "r=0.5512345678",
    "time=1712345678901", "timestamp=1712345678", "rnd=k2j4h5g6f7d8", "utm_source=feed",
    "fbclid=abc", "buster=1712345678901",
])
def test_cache_busting_parameters_are_ignored(query: str) -> None:
    assert fuzzy_key(f"{API}?{query}") == API
    assert fuzzy_key(f"{API}?page=2&{query}") == f"{API}?page=2"


@pytest.mark.parametrize("query", ["t=2", "v=1.2.3", "v=3", "r=main", "page=1712345678901",
                                   "id=0.5", "q=cache", "_=abc"])
def test_parameters_with_content_are_kept(query: str) -> None:
    assert fuzzy_key(f"{API}?{query}") == f"{API}?{query}"


def test_callbacks_made_per_request_keep_only_their_kind() -> None:
    asked = f"{API}?callback=jQuery3110_1712345678901&_=1712345678902"
    stored = f"{API}?callback=jQuery3110_1700000000000&_=1700000000001"
    assert fuzzy_key(asked) == fuzzy_key(stored) == f"{API}?callback=jquery"
    assert fuzzy_key(f"{API}?cb=jsonp12") == f"{API}?cb=jsonp"  # a name, not a number
    assert fuzzy_key(f"{API}?callback=jsonp12") == f"{API}?callback=jsonp"


def test_the_order_of_parameters_does_not_matter() -> None:
    assert fuzzy_key(f"{API}?b=2&a=1&_=5") == fuzzy_key(f"{API}?a=1&b=2")


def test_only_urls_equal_but_for_busters_match() -> None:
    stored = [f"{API}?page=1&_=1700000000001", f"{API}?page=2&_=1700000000002",
              "http://site.test/api/other?_=1700000000003", f"{API}?page=1&sort=new"]
    assert best_matches(f"{API}?page=1&_=1712345678901", stored) == [stored[0]]
    assert best_matches(f"{API}?page=2&_=1", stored) == [stored[1]]
    assert best_matches(f"{API}?page=3&_=1712345678901", stored) == []  # page is content


def test_several_equal_matches_all_come_back_for_the_caller_to_choose_by_time() -> None:
    stored = [f"{API}?_=1700000000001", f"{API}?_=1700000000002", f"{API}?q=x"]
    assert best_matches(f"{API}?_=1712345678901", stored) == stored[:2]


def test_a_file_path_falls_back_to_the_most_alike_query() -> None:
    js = "http://site.test/app.js"
    stored = [f"{js}?v=1.2.3", f"{js}?v=1.2.4&lang=en", "http://site.test/app.css?v=1"]
    assert best_matches(f"{js}?v=1.2.4&lang=fr", stored) == [stored[1]]
    assert best_matches(f"{js}?build=9", stored) == [stored[0]]  # fewer extra names
    assert best_matches(f"{js}", stored) == [stored[0]]
    # a path without a file extension (a page, an API) never matches another query
    assert best_matches(f"{API}?id=1", [f"{API}?id=2"]) == []


def test_the_asked_url_itself_is_never_a_fuzzy_match() -> None:
    assert best_matches(f"{API}?_=1", [f"{API}?_=1"]) == []


def test_a_jsonp_answer_calls_the_callback_the_request_named() -> None:
    asked = f"{API}?callback=jQuery3110_1712345678901&_=1712345678902"
    stored = f"{API}?callback=jQuery3110_1700000000000&_=1700000000001"
    body = b'/**/ jQuery3110_1700000000000({"items": [1]});'
    assert rename_callback(body, asked, stored) == b'/**/ jQuery3110_1712345678901({"items": [1]});'
    # not a call of the stored name: left alone
    assert rename_callback(b'{"a": 1}', asked, stored) == b'{"a": 1}'
    assert rename_callback(b"other(1)", asked, stored) == b"other(1)"
    # nothing to rename when the request names no callback, or the same one
    assert rename_callback(body, API, stored) == body
    assert rename_callback(body, stored, stored) == body


def test_only_a_name_is_ever_written_into_a_script() -> None:
    stored = f"{API}?callback=jsonp1"
    asked = f"{API}?callback=jsonp2;alert(1)//"
    assert rename_callback(b"jsonp1({})", asked, stored) == b"jsonp1({})"
