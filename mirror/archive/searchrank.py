"""The order of search results, one spec for the app, `mirror search` and an export's page.

A result's score is SQLite FTS5's bm25 with the manifest's column weights; the manifest asks
FTS5 for it (`bm25(TITLE_WEIGHT, BODY_WEIGHT)`), an export's search.js computes the same
formula in the browser, and `score` below is the reference both are tested against:

    for each term t of the query (a word, or a prefix*):
        idf(t) = ln((N - n(t) + 0.5) / (n(t) + 0.5)), or 1e-6 when that is <= 0
        f(t)   = TITLE_WEIGHT * (t's tokens in the title) + BODY_WEIGHT * (... in the text)
        score += idf(t) * f(t) * (K1 + 1) / (f(t) + K1 * (1 - B + B * D / avgdl))

N is the number of texts searched (for the newest captures: the newest text of each page,
manifest/latestindex.py), n(t) how many of them hold t, D a text's tokens (title
and text together) and avgdl their mean over the N texts. Tokens are `tokens()`: runs of
letters and digits, lower case, accents removed (FTS5's unicode61 remove_diacritics 2).

Best first; equal scores by URL. Then each page once: results whose URLs differ only in
their query string (`?page=2`, `?ref=related`) fold under the best-ranked of them
(`fold_key`, `fold`), the others kept as its variants.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

#: FTS5's bm25 constants (fixed in SQLite's fts5_aux.c)
K1, B = 1.2, 0.75
#: the columns' weights: a word of the title counts as much as four of the text
TITLE_WEIGHT, BODY_WEIGHT = 4.0, 1.0
#: the idf of a term found in half the texts or more
IDF_FLOOR = 1e-6

T = TypeVar("T")


def fold_key(url: str) -> str:
    """What makes two results one page: scheme, host (with its port) and path, without the
    query string or fragment. `/list?page=2` folds under `/list`: a listing's next page
    shows the same kind of content, and a result per page of it buries the other pages."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path or '/'}"


@dataclass(frozen=True)
class Folded(Generic[T]):
    """One page among the results: its best-ranked result and the other variants found."""

    best: T
    variants: tuple[T, ...] = ()


def ranked(items: Iterable[T], score: Callable[[T], float], url: Callable[[T], str]) -> list[T]:
    """Best first; equal scores in URL order (so every side cuts pages the same way)."""
    return sorted(items, key=lambda item: (-score(item), url(item)))


def fold(items: Sequence[T], url: Callable[[T], str]) -> list[Folded[T]]:
    """Ranked results, each page once, in the order of its best result."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(fold_key(url(item)), []).append(item)
    return [Folded(group[0], tuple(group[1:])) for group in groups.values()]


def count_pages(urls: Iterable[str]) -> int:
    """How many pages these URLs are once folded."""
    return len({fold_key(u) for u in urls})


def tokens(text: str) -> list[str]:
    """The words of a text as FTS5's unicode61 tokenizer (remove_diacritics 2) sees them:
    runs of letters, digits and combining marks, lower case, the marks dropped."""
    out: list[str] = []
    word: list[str] = []
    for char in unicodedata.normalize("NFD", text):
        category = unicodedata.category(char)
        if category[0] in "LN" or category == "Co":
            word.append(char)
        elif category[0] == "M" and word:
            continue  # an accent: part of its word, then dropped
        elif word:
            out.append("".join(word).lower())
            word = []
    if word:
        out.append("".join(word).lower())
    return [unicodedata.normalize("NFC", w) for w in out]


#: a run of letters and digits (\\w without the underscore, which FTS5 counts a separator)
_WORD = re.compile(r"[^\W_]+")


def token_count(text: str) -> int:
    """len(tokens(text)), quickly: what an export writes as each page's D."""
    return len(_WORD.findall(unicodedata.normalize("NFC", text)))


@dataclass(frozen=True)
class Text:
    """A searched text, tokenized."""

    title: Sequence[str]
    body: Sequence[str]

    @property
    def size(self) -> int:
        return len(self.title) + len(self.body)


def _count(words: Sequence[str], term: str) -> int:
    if term.endswith("*"):
        return sum(w.startswith(term[:-1]) for w in words)
    return sum(w == term for w in words)


def idf(texts: int, holding: int) -> float:
    value = math.log((texts - holding + 0.5) / (holding + 0.5))
    return value if value > 0 else IDF_FLOOR


def score(terms: Sequence[str], text: Text, corpus: Sequence[Text]) -> float:
    """The reference score of `text` for a query of all `terms` (each a folded word, or a
    prefix ending in '*'), among the `corpus` texts searched."""
    avgdl = sum(t.size for t in corpus) / len(corpus)
    total = 0.0
    for term in terms:
        holding = sum(1 for t in corpus if _count(t.title, term) or _count(t.body, term))
        freq = TITLE_WEIGHT * _count(text.title, term) + BODY_WEIGHT * _count(text.body, term)
        total += idf(len(corpus), holding) * (freq * (K1 + 1)) / (
            freq + K1 * (1 - B + B * text.size / avgdl))
    return total
