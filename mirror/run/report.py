"""End-of-run report: a JSON document and a terminal summary, both pure over the run's numbers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from mirror.model import UNFINISHED, ExitCode, RobotsCounts, RunState, UrlState
from mirror.run.browsernotes import BrowserFacts, browser_json, loaded_text, needing_text
from mirror.run.changes import KINDS, Changes

if TYPE_CHECKING:
    from mirror.run.health import Health


@dataclass(frozen=True)
class RunData:
    """Everything the report says, gathered from the manifest by the caller."""

    site: str
    run_id: int
    state: str
    exit_code: int
    resumed: bool
    started_at: str
    finished_at: str
    duration: float
    captures: int
    url_states: dict[str, int]
    status_classes: dict[str, int]
    content_types: dict[str, int]
    payload_bytes: int
    warc_bytes: int
    skipped: dict[str, int]
    top_errors: list[tuple[str, int]]
    failed: list[tuple[str, str]]
    broken_links: list[tuple[str, int | None, str]]
    warc_files: list[str]
    archive: str
    changes: Changes = field(default_factory=Changes)
    skipped_urls: dict[str, list[str]] = field(default_factory=dict)  # rule -> URLs
    broken_links_total: int = 0  # broken_links lists the first 50
    sitemap_only_pages: int = 0  # pages no link of the run reached, only a sitemap
    unreachable_hosts: list[tuple[str, str, int]] = field(default_factory=list)  # host, why, URLs
    needs_browser: list[tuple[str, str]] = field(default_factory=list)  # page, why
    # pages whose links were partly or not read (parse-budget: time, nesting, size), why
    parse_budget: list[tuple[str, str]] = field(default_factory=list)
    pages_stored: int = 0  # pages with a 2xx or 304 answer
    start_urls: list[tuple[str, str | None]] = field(default_factory=list)  # url, problem
    # pages that said noindex / nofollow (<meta name="robots">, X-Robots-Tag)
    meta_robots: RobotsCounts = field(default_factory=RobotsCounts)
    # learned trap patterns the run stopped (ManifestReader.patterns.learned_report)
    learned_patterns: list[dict[str, object]] = field(default_factory=list)
    # [browser]: pages loaded in a browser, failed renders (needs_browser: those left as fetched)
    browser: BrowserFacts = field(default_factory=BrowserFacts)

    def health(self) -> Health:
        """Whether the run archived what it was asked to (run.health)."""
        from mirror.run.health import RunNumbers, health  # here: `mirror status` needs not

        return health(RunNumbers(self.state not in UNFINISHED, self.pages_stored,
                                 self.failed, self.start_urls))


def build_report(d: RunData) -> dict[str, object]:
    """The JSON written to reports/<run-id>.json."""
    out = asdict(d)
    out["pages_per_second"] = round(d.captures / d.duration, 2) if d.duration > 0 else None
    out["top_errors"] = [{"error": e, "count": n} for e, n in d.top_errors]
    out["needs_browser"] = [{"url": u, "reason": r} for u, r in d.needs_browser]
    out["parse_budget"] = [{"url": u, "reason": r} for u, r in d.parse_budget]
    out["browser"] = browser_json(d.browser, d.needs_browser)
    out["unreachable_hosts"] = [{"host": h, "reason": r, "urls": n}
                                for h, r, n in d.unreachable_hosts]
    out["failed"] = [{"url": u, "error": e} for u, e in d.failed]
    out["start_urls"] = [{"url": u, "problem": p} for u, p in d.start_urls]
    out["meta_robots"] = {**asdict(d.meta_robots), "warning": nofollow_warning(d.meta_robots)}
    verdict = d.health()
    out["health"] = {"failed": verdict.failed, "problem": verdict.problem,
                     "reason": verdict.reason, "text": verdict.text()}
    out["broken_links"] = [
        {"url": u, "status": s, "linked_from": ref} for u, s, ref in d.broken_links
    ]
    listed = {kind: getattr(d.changes, kind) for kind in KINDS}  # the first REPORT_URLS
    out["changes"] = {**listed, "failed": [u for u, _ in d.failed],
                      "counts": {**d.changes.counts(), "failed": len(d.failed)}}
    return out


#: the setting that archives a site whose pages say nofollow all the same
META_ROBOTS_OFF = "[scope] meta_robots = false"


def nofollow_warning(c: RobotsCounts) -> str | None:
    """What a person must be told when a run followed few links because its pages said
    nofollow (some software marks every page so): every start page said it, or more than
    half of the pages stored said nofollow but not noindex (a wiki's edit, history and
    diff pages say both, and are rightly not followed: they do not count). Names the
    setting that archives the site anyway."""
    if not c.enabled or not c.nofollow:
        return None
    if c.start_pages and c.start_nofollow == c.start_pages:
        said = ("the start page says" if c.start_pages == 1
                else f"all {c.start_pages} start pages say")
    elif 2 * c.nofollow_indexed > c.pages:
        said = f"{c.nofollow_indexed} of {c.pages} pages say"
    else:
        return None
    return (f"{said} nofollow (<meta name=\"robots\"> or X-Robots-Tag), so their links "
            f"were not followed; to archive the site anyway, set {META_ROBOTS_OFF} "
            "in the site file")


def robots_line(c: RobotsCounts) -> str | None:
    """'3 pages noindex, 2 nofollow (their links not followed: rule meta-robots)'."""
    if not c.enabled or not (c.noindex or c.nofollow):
        return None
    return (f"{c.noindex} page{'' if c.noindex == 1 else 's'} noindex, {c.nofollow} nofollow "
            "(their links not followed: rule meta-robots)")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - loop always returns


def summary_line(d: RunData) -> str:
    """The one line a cron mail shows; a failed run (run.health) says so first, with why."""
    rate = d.captures / d.duration if d.duration > 0 else 0.0
    failed = d.url_states.get(UrlState.FAILED, 0)
    c = d.changes.counts()
    pending = f", {c['pending']} pending" if c["pending"] else ""
    return (
        f"{d.site}: run {d.run_id} {run_outcome(d)}: {d.captures} captures, "
        f"{failed} failed, {c['new']} new, {c['changed']} changed, {c['unchanged']} unchanged, "
        f"{c['gone']} gone{pending}, {human_bytes(d.payload_bytes)} in {d.duration:.1f}s "
        f"({rate:.1f} pages/s)"
    )


def run_outcome(d: RunData) -> str:
    """'complete (exit 0)', or 'FAILED: stored no page (connection refused: h:80); exit 3'."""
    verdict = d.health()
    if verdict.failed:
        return f"FAILED: {verdict.text()}; exit {d.exit_code}"
    return f"{d.state} (exit {d.exit_code})"


def shown_counts(counts: dict[str, int]) -> dict[str, int]:
    """The counts a person reads: `pending` only when a run left some (J2)."""
    return {k: v for k, v in counts.items() if v or k != "pending"}


def counts_text(counts: dict[str, int]) -> str:
    """'new 1, changed 0, unchanged 3, gone 0' (and 'pending 5' when a run left some)."""
    return ", ".join(f"{k} {v}" for k, v in shown_counts(counts).items())


def render_changes(title: str, changes: Changes, max_items: int = 50) -> str:
    """`mirror diff`: the counts, then the URLs of each kind of change."""
    counts = changes.counts()
    lines = [f"{title}: {counts_text(counts)}"]
    for kind in ("new", "changed", "gone"):
        urls: list[str] = getattr(changes, kind)
        if urls:
            lines.append(f"  {kind} ({counts[kind]}):")
            lines += [f"    {u}" for u in urls[:max_items]]
            if counts[kind] > max_items:
                lines.append(f"    ... and {counts[kind] - max_items} more")
    return "\n".join(lines)


def _counts(title: str, counts: dict[str, int]) -> list[str]:
    if not counts:
        return []
    parts = ", ".join(f"{k} {v}" for k, v in counts.items())
    return [f"  {title:<14} {parts}"]


def unreachable_line(hosts: list[tuple[str, str, int]], max_hosts: int = 5) -> str:
    """"3 hosts unreachable: name does not resolve (a.example, b.example), connection
    refused (127.0.0.1:9)", the failed URLs of hosts that never answered, by reason."""
    by_reason: dict[str, list[str]] = {}
    for host, reason, _ in hosts:
        if host not in by_reason.setdefault(reason, []):
            by_reason[reason].append(host)
    count = len({h for h, _, _ in hosts})
    parts = []
    for reason, names in by_reason.items():
        shown = ", ".join(names[:max_hosts]) + (" ..." if len(names) > max_hosts else "")
        parts.append(f"{reason} ({shown})")
    return f"{count} host{'' if count == 1 else 's'} unreachable: " + "; ".join(parts)


def learned_lines(patterns: list[dict[str, object]], max_items: int = 5) -> list[str]:
    """A line per learned trap pattern the run stopped: the pattern, its rule, the URLs
    skipped under it, a sample URL (`mirror explain` it to see why)."""
    lines = []
    for p in patterns[:max_items]:
        samples = p["samples"]
        sample = samples[0] if isinstance(samples, list) and samples else ""
        lines.append(f"  {'learned':<14} {p['pattern']}: {p['rule']} ({p['why']}), "
                     f"{p['skipped']} URLs skipped, e.g. {sample}")
    if len(patterns) > max_items:
        lines.append(f"  {'':<14} ... and {len(patterns) - max_items} more patterns "
                     "(reports/<run>.json: learned_patterns)")
    return lines


def render_summary(d: RunData, max_items: int = 10) -> str:
    """A plain-text summary; readable in a terminal, a log file and a cron mail alike."""
    lines = [summary_line(d)]
    warning = nofollow_warning(d.meta_robots)
    if warning:
        lines.append(f"  NOTE: {warning}")
    lines += _counts("status", dict(sorted(d.status_classes.items())))
    lines += _counts("content types", {k or "(none)": v for k, v in d.content_types.items()})
    lines += _counts("skipped", d.skipped)
    lines += _counts("changes", shown_counts({**d.changes.counts(), "failed": len(d.failed)}))
    lines.append(f"  {'bytes':<14} payload {human_bytes(d.payload_bytes)}, "
                 f"WARC {human_bytes(d.warc_bytes)}")
    if d.unreachable_hosts:
        lines.append(f"  {'unreachable':<14} {unreachable_line(d.unreachable_hosts)}")
    if loaded := loaded_text(d.browser):
        lines.append(f"  {'browser':<14} {loaded}")
        lines += [f"    {u}  (browser: {why})" for u, why in d.browser.failed[:max_items]]
    if d.needs_browser:
        lines.append(f"  {'needs browser':<14} {needing_text(d.browser, len(d.needs_browser))}"
                     f", e.g. {d.needs_browser[0][0]}")
    if d.parse_budget:
        n = len(d.parse_budget)
        lines.append(f"  {'parse budget':<14} {n} page{'s' if n > 1 else ''} over the parse "
                     f"budget, links partly or not read, e.g. {d.parse_budget[0][0]} "
                     f"({d.parse_budget[0][1]})")
    if robots := robots_line(d.meta_robots):
        lines.append(f"  {'meta robots':<14} {robots}")
    lines += learned_lines(d.learned_patterns)
    if d.sitemap_only_pages:
        lines.append(f"  {'sitemaps':<14} {d.sitemap_only_pages} pages reached only "
                     "through a sitemap")
    if d.top_errors:
        lines.append("  most frequent errors:")
        lines += [f"    {n:>5}  {e}" for e, n in d.top_errors[:max_items]]
    if d.failed:
        lines.append(f"  failed URLs ({len(d.failed)}):")
        lines += [f"    {u}  ({e})" for u, e in d.failed[:max_items]]
    if d.broken_links:
        lines.append(f"  broken links ({max(d.broken_links_total, len(d.broken_links))}):")
        lines += [
            f"    {u}  [{s if s is not None else 'failed'}]  linked from {ref}"
            for u, s, ref in d.broken_links[:max_items]
        ]
    lines.append(f"  archive        {d.archive}")
    return "\n".join(lines)


@dataclass(frozen=True)
class RunStatus:
    """One line of `mirror status`."""

    run_id: int
    state: str
    started_at: str
    finished_at: str | None
    exit_code: int | None
    captures: int
    payload_bytes: int


def render_status(
    archive: str,
    runs: list[RunStatus],
    url_states: dict[str, int],
    warc_files: list[tuple[str, int]],
    last_error: str | None,
    holder: str | None,
) -> str:
    """`mirror status`: the runs, the latest run's URLs, the WARC files, the last error."""
    lines = [f"archive  {archive}"]
    for r in runs:
        state = r.state
        if r is runs[-1] and r.state == RunState.RUNNING:
            state = f"running (pid {holder})" if holder else "died (resumes on the next run)"
        end = f" -> {r.finished_at}" if r.finished_at else ""
        code = f", exit {r.exit_code}" if r.exit_code is not None else ""
        if r.exit_code == ExitCode.UPLOAD_PENDING:  # its state says "complete"
            code += f" ({ExitCode.UPLOAD_PENDING.meaning}: `mirror push`)"
        lines.append(f"run {r.run_id:<4} {state:<14} {r.started_at}{end}{code}: "
                     f"{r.captures} captures, {human_bytes(r.payload_bytes)}")
    if not runs:
        lines.append("no runs yet")
    if url_states:
        order = (UrlState.DONE, UrlState.PENDING, UrlState.LEASED, UrlState.FAILED,
                 UrlState.SKIPPED)
        parts = [f"{s} {url_states[s]}" for s in order if s in url_states]
        lines.append(f"URLs of the latest run: {', '.join(parts)}")
    total = sum(size for _, size in warc_files)
    lines.append(f"WARC files: {len(warc_files)}, {human_bytes(total)}")
    if last_error:
        lines.append(f"last error: {last_error}")
    return "\n".join(lines)
