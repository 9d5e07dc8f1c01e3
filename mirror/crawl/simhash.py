"""SimHash: a 64-bit fingerprint of a page's visible text, near for near-identical texts
(Charikar 2002), and an index that finds a stored fingerprint near a new one (pure).

The features are the text's lines (extract.visible_text gives a line per block:
paragraph, list item, cell), each weighted by its length rounded up to a power of two, so
a page's own paragraphs outweigh its menu items. A feature is hashed with CRC-32 (in C) spread to 64
bits: the whole fingerprint costs a few microseconds per line, not per word (measured in
bench/README.md), and is the same in every process and on every machine."""

from __future__ import annotations

import zlib
from collections.abc import Set as AbstractSet

BITS = 64
MASK = (1 << BITS) - 1
#: fingerprints at most this many bits apart are near-duplicates: about 99% of the
#: weighted text alike (a page with a paragraph of its own in a shared template is further)
NEAR = 3
# odd: multiplying by it mod 2^64 is a bijection of the low 32 bits (spreads a CRC-32)
_MIX = 0x9E3779B97F4A7C15
#: the index splits a fingerprint in NEAR + 1 blocks: two fingerprints at most NEAR bits
#: apart agree on at least one block (pigeonhole), so only fingerprints sharing a block
#: with the new one are compared
_BLOCKS = NEAR + 1
#: bit-sliced counters: enough for any text (weights below 2^40 in all)
_PLANES = 48
_BLOCK_BITS = BITS // _BLOCKS
_BLOCK_MASK = (1 << _BLOCK_BITS) - 1


def line_keys(text: str) -> frozenset[int]:
    """The CRC-32 of each line of a text: a host's template is its first page's (the
    navigation, header and footer every page of the host repeats)."""
    return frozenset(zlib.crc32(line) for line in
                     text.encode("utf-8", "surrogatepass").split(b"\n") if line)


def simhash(text: str) -> int:
    """The 64-bit SimHash of `text` (fingerprint() with no template)."""
    return fingerprint(text)[0]


def fingerprint(text: str, template: AbstractSet[int] = frozenset()) -> tuple[int, int]:
    """The 64-bit SimHash of the lines of `text` that are not in `template` (line_keys of
    the host's first page), and how many bytes those lines hold: the page's own text, not
    the navigation every page repeats. Bit b is set when the lines whose hash has bit b
    outweigh those whose hash has not. Identical texts have equal fingerprints, whatever
    the order of their lines; an empty text: 0.

    The weighted votes are counted bit-sliced: planes[i] holds bit i of the 64 counters,
    a feature of weight 2^k is added as a ripple of carries from plane k (two or three
    integer operations on average), and the 64 majorities are read with one comparison
    of all counters at once (_over)."""
    planes = [0] * _PLANES
    total = own = 0
    # surrogatepass: any str has a fingerprint (a lone surrogate is not valid UTF-8)
    for feature in text.encode("utf-8", "surrogatepass").split(b"\n"):
        size = len(feature)
        if not size:
            continue
        crc = zlib.crc32(feature)
        if crc in template:
            continue
        own += size
        k = size.bit_length()
        total += 1 << k
        carry = (crc * _MIX) & MASK
        while carry:
            plane = planes[k]
            planes[k] = plane ^ carry
            carry &= plane
            k += 1
    return _over(planes[:total.bit_length() + 1], total >> 1), own


def _over(planes: list[int], threshold: int) -> int:
    """The 64-bit mask of the bit-sliced counters greater than `threshold`: from the top
    plane down, a counter is greater once it has a 1 where the threshold has a 0 while
    all bits above were equal."""
    greater, equal = 0, MASK
    for i in range(len(planes) - 1, -1, -1):
        plane = planes[i]
        if (threshold >> i) & 1:
            equal &= plane
        else:
            greater |= equal & plane
            equal &= ~plane & MASK
    return greater


def distance(a: int, b: int) -> int:
    """Hamming distance of two fingerprints."""
    return (a ^ b).bit_count()


def near(a: int, b: int) -> bool:
    """Whether two fingerprints are near-duplicates (at most NEAR bits apart)."""
    return (a ^ b).bit_count() <= NEAR


def to_signed(h: int) -> int:
    """A fingerprint as SQLite's signed 64-bit INTEGER stores it."""
    return h - (1 << BITS) if h >> (BITS - 1) else h


def from_signed(v: int) -> int:
    return v & MASK


class NearIndex:
    """The first fingerprint of each URL's page (a URL's later ones are not added: what
    the manifest keeps, so a resumed crawl has the same index); `match` finds
    one within NEAR bits of a new fingerprint (held by another URL) by looking only at the
    fingerprints that share a block with it: a handful on a site of any size, as a block's
    16 bits spread fingerprints over 65,536 buckets."""

    def __init__(self) -> None:
        self._owner: dict[int, int] = {}  # fingerprint -> the first URL id that had it
        self._shared: set[int] = set()  # fingerprints more than one URL had
        self._urls: set[int] = set()
        self._buckets: list[dict[int, list[int]]] = [{} for _ in range(_BLOCKS)]

    def __len__(self) -> int:
        return len(self._owner)

    def add(self, h: int, url_id: int) -> bool:
        """Add a URL's fingerprint; False (nothing added) when the URL has one already."""
        if url_id in self._urls:
            return False
        self._urls.add(url_id)
        owner = self._owner.get(h)
        if owner is not None:
            self._shared.add(h)
            return True
        self._owner[h] = url_id
        for i, bucket in enumerate(self._buckets):
            bucket.setdefault((h >> (i * _BLOCK_BITS)) & _BLOCK_MASK, []).append(h)
        return True

    def match(self, h: int, url_id: int, *, exact: bool = False) -> int | None:
        """A stored fingerprint near `h` (equal to it if `exact`) whose URL is not
        `url_id`, or None."""
        if h in self._owner and self._other(h, url_id):
            return h
        if exact:
            return None
        for i, bucket in enumerate(self._buckets):
            for other in bucket.get((h >> (i * _BLOCK_BITS)) & _BLOCK_MASK, ()):
                if other != h and (other ^ h).bit_count() <= NEAR and self._other(other, url_id):
                    return other
        return None

    def _other(self, h: int, url_id: int) -> bool:
        """Whether a URL other than `url_id` had the stored fingerprint `h`."""
        return self._owner[h] != url_id or h in self._shared
