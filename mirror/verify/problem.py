"""Problem: one thing `mirror verify` found wrong, as every check reports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong, where it is, and a stable token naming the check that failed."""

    where: str  # "warc/x.warc.gz@1234", "manifest: capture 17", "index.cdxj:5"
    check: str
    detail: str
