"""`mirror explain`'s word from the archive: why the last run did not fetch a URL, when a
page's robots meta tag is the reason (the scope rules alone cannot say it)."""

from __future__ import annotations

from mirror.config import SiteConfig
from mirror.explain import RULES
from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.model import META_ROBOTS
from mirror.web.urls import InvalidURL, normalize


def archive_lines(cfg: SiteConfig, raw: str) -> list[str]:
    """A line when the archive's last run skipped `raw` under META_ROBOTS, naming the
    pages that link to it; none otherwise (no archive yet, or another outcome)."""
    path = ArchiveLayout(cfg.site.output_dir).manifest
    try:
        url = normalize(raw, cfg.scope.ignore_query)
        if not path.exists():
            return []
        manifest = ManifestReader(path)
    except (InvalidURL, ManifestError):
        return []
    try:
        found = manifest.robots.not_followed(url)
    finally:
        manifest.close()
    return [] if found is None else nofollow_lines(*found)


def nofollow_lines(run_id: int, referrers: list[tuple[str, bool]]) -> list[str]:
    """'in run 3   not fetched: rule meta-robots: ...' and the pages that link to it,
    with (nofollow) after those that said it."""
    lines = [f"{f'in run {run_id}':<20} not fetched: rule {META_ROBOTS}: {RULES[META_ROBOTS]}"]
    lines += [f"{'':<20} linked from {u}{' (nofollow)' if said else ''}"
              for u, said in referrers]
    return lines
