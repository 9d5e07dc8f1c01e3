"""A run on a terminal (rich): the live progress display and the summary table; never used
when stdout is not a terminal."""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from mirror.crawl.growth import Dominant, explain_hint
from mirror.model import UrlState
from mirror.run.browsernotes import loaded_text, needing_text
from mirror.run.progressfile import LiveProgress
from mirror.run.report import (
    RunData,
    human_bytes,
    nofollow_warning,
    robots_line,
    run_outcome,
    unreachable_line,
)
from mirror.terminal import printable_lines

BAR_WIDTH = 30


class ProgressDisplay:
    """A bar of done out of (done + queued) and the run's numbers, redrawn at each
    `update`; log records are printed above it. On stderr, so stdout keeps the summary."""

    def __init__(self, site: str, config: str = "site.toml") -> None:
        self.site, self.config = site, config
        self.console = Console(stderr=True)
        self.live = Live(Text(f"{site}: starting"), console=self.console,
                         auto_refresh=False, transient=True)

    def log_handler(self) -> logging.Handler:
        """Log records printed above the live display instead of through it."""
        return RichHandler(console=self.console, show_path=False, markup=False)

    def update(self, p: LiveProgress) -> None:
        self.live.update(progress_renderable(self.site, p, self.config), refresh=True)

    def __enter__(self) -> ProgressDisplay:
        self.live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.live.__exit__(exc_type, exc, tb)


def format_duration(seconds: float | None) -> str:
    """'0:07', '12:34', '1:02:03'; '--' for unknown."""
    if seconds is None:
        return "--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _numbers(p: LiveProgress) -> list[tuple[str, str]]:
    """The display's parts after the bar, each with its rich style."""
    parts = [
        (f"{p.done}/{p.done + p.queued}", "bold"),
        (f"{p.rate:.1f} pages/s", ""),
        (f"ETA {format_duration(p.eta)}", "cyan") if p.eta is not None or p.growth <= 0
        else (f"no ETA: queue +{p.growth:.1f}/s", "yellow"),
        (human_bytes(p.bytes), ""),
        (f"{p.failed} failed", "red" if p.failed else ""),
        (f"{p.retried} retries", "yellow" if p.retried else ""),
    ]
    if p.held_back:
        parts.append((f"{p.held_back} host{'' if p.held_back == 1 else 's'} held back",
                      "yellow"))
    parts.append((f"elapsed {format_duration(p.updated - p.started)}", "dim"))
    return parts


def render_progress(site: str, p: LiveProgress, config: str = "site.toml") -> str:
    """The display as one plain line (and the hint of a dominant pattern on a second)."""
    hint = pattern_hint(p, config)
    return f"{site}: " + ", ".join(text for text, _ in _numbers(p)) + (
        f"\n{hint}" if hint else "")


def pattern_hint(p: LiveProgress, config: str) -> str:
    """'83% of the new URLs are like ...; see why ...: mirror explain ...', or ""."""
    if not p.top_pattern:
        return ""
    return explain_hint(Dominant(p.top_pattern, p.top_share, p.top_sample), config)


def progress_renderable(site: str, p: LiveProgress,
                        config: str = "site.toml") -> RenderableType:
    """The display, two lines that fit 80 columns: the site, a bar, done/total, rate and
    ETA (or how fast the queue grows); then bytes, failures, retries, hosts held back and
    the time so far; and a third when one URL pattern supplies most new URLs."""
    parts = [Text(text, style=style) for text, style in _numbers(p)]
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        Text(site, style="bold"),
        ProgressBar(total=max(p.done + p.queued, 1), completed=p.done, width=BAR_WIDTH),
        Text("  ").join(parts[:3]),
    )
    lines: list[RenderableType] = [grid, Text(" " * (len(site) + 1)) + Text("  ").join(parts[3:])]
    if hint := pattern_hint(p, config):
        lines.append(Text(printable_lines(hint), style="yellow"))
    return Group(*lines)


def summary_table(d: RunData, max_items: int = 10) -> Table:
    """The end-of-run summary (report.render_summary's content) as a table."""
    rate = d.captures / d.duration if d.duration > 0 else 0.0
    table = Table(title=f"{d.site}: run {d.run_id} {run_outcome(d)}",
                  title_justify="left", show_header=False,
                  title_style="bold red" if d.health().failed else None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")

    def row(label: str, value: str | list[str], style: str = "") -> None:
        text = printable_lines(value if isinstance(value, str) else "\n".join(value))
        table.add_row(Text(label), Text(text, style=style))  # Text: URLs are not markup

    def listed(items: list[str], total: int) -> list[str]:
        more = [f"... and {total - max_items} more"] if total > max_items else []
        return items[:max_items] + more

    failed = d.url_states.get(UrlState.FAILED, 0)
    c = d.changes.counts()
    if warning := nofollow_warning(d.meta_robots):
        row("NOTE", warning, "bold yellow")
    row("captures", str(d.captures))
    row("failed", str(failed), "red" if failed else "")
    row("changes", f"{c['new']} new, {c['changed']} changed, {c['unchanged']} unchanged, "
                   f"{c['gone']} gone" + (f", {c['pending']} pending" if c["pending"] else ""))
    row("status", _joined(dict(sorted(d.status_classes.items()))))
    row("content types", _joined({k or "(none)": v for k, v in d.content_types.items()}))
    if d.skipped:
        row("skipped", _joined(d.skipped))
    row("bytes", f"payload {human_bytes(d.payload_bytes)}, WARC {human_bytes(d.warc_bytes)}")
    row("duration", f"{d.duration:.1f}s ({rate:.1f} pages/s)")
    if d.unreachable_hosts:
        row("unreachable", unreachable_line(d.unreachable_hosts), "red")
    if robots := robots_line(d.meta_robots):
        row("meta robots", robots)
    if d.sitemap_only_pages:
        row("sitemaps", f"{d.sitemap_only_pages} pages reached only through a sitemap")
    if loaded := loaded_text(d.browser):
        row("browser", [loaded] + listed([f"{u}  ({why})" for u, why in d.browser.failed],
                                         len(d.browser.failed)),
            "yellow" if d.browser.failed else "")
    if d.needs_browser:
        row("needs a browser", needing_text(d.browser, len(d.needs_browser))
            + " (see the report)", "yellow")
    if d.top_errors:
        row("most frequent errors",
            listed([f"{n:>5}  {e}" for e, n in d.top_errors], len(d.top_errors)), "red")
    if d.failed:
        row(f"failed URLs ({len(d.failed)})",
            listed([f"{u}  ({e})" for u, e in d.failed], len(d.failed)), "red")
    if d.broken_links:
        row(f"broken links ({len(d.broken_links)})", listed([
            f"{u}  [{s if s is not None else 'failed'}]  linked from {ref}"
            for u, s, ref in d.broken_links], len(d.broken_links)), "yellow")
    row("archive", d.archive)
    return table


def _joined(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def print_summary(d: RunData, report: Path) -> None:
    """The summary table and the report's path, on stdout (a terminal)."""
    console = Console()
    console.print(summary_table(d))
    console.print(Text(f"report  {report}"))
