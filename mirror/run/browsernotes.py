"""What a run's report says of pages built by scripts ([browser], issue 35): how many were
loaded in a browser, which renders failed and why, and for the pages left as fetched, how to
have them loaded in one. Pure over the numbers the caller gathers (run/runreport.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: how a failed render's note begins (crawl/render.py NOTE): `browser: timeout after 30 s`
FAILED = "browser: "
#: the setting that has the flagged pages loaded in a browser
AUTO = '[browser] mode = "auto"'


@dataclass(frozen=True)
class BrowserFacts:
    """The run's browser, as the report tells it."""

    mode: str = "off"  # [browser] mode of the site file
    found: bool = False  # a browser was found for it (mode auto or always)
    rendered: int = 0  # pages stored with their rendered DOM (reader.renders.count)
    loads: int | None = None  # page loads by the run's process (None: not known here)
    failed: list[tuple[str, str]] = field(default_factory=list)  # page, why its render failed
    install: str = ""  # how to have a browser here (browserconfig.enable_advice)


def split_notes(notes: list[tuple[str, str]], rendered: set[str]
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A run's browser notes as (pages still needing a browser, failed renders with their
    reason): a page whose render failed has the failure as its note; a page rendered keeps
    its flag (why it needed the browser) but needs nothing more."""
    needing = [(u, n) for u, n in notes if not n.startswith(FAILED) and u not in rendered]
    failed = [(u, n.removeprefix(FAILED)) for u, n in notes if n.startswith(FAILED)]
    return needing, failed


def _pages(n: int) -> str:
    return f"{n} page{'' if n == 1 else 's'}"


def needing_text(b: BrowserFacts, n: int) -> str:
    """What to say of the `n` pages flagged as built by scripts and stored as fetched."""
    if b.mode != "off" and not b.found:
        return (f"{_pages(n)} need{'s' if n == 1 else ''} a browser (scripts build them) and "
                f"none was found: {b.install or 'install a Chromium-family browser'}")
    if b.mode == "off":
        return (f"{_pages(n)} may need a browser to archive (scripts build them); "
                f"{AUTO} would load them in one")
    return f"{_pages(n)} may need a browser to archive (scripts build them), not loaded in one"


def loaded_text(b: BrowserFacts) -> str | None:
    """'3 pages loaded in a browser (4 page loads), 1 failed'; None when the run used none."""
    if not (b.rendered or b.failed or b.loads):
        return None
    loads = f" ({b.loads} page load{'' if b.loads == 1 else 's'})" if b.loads is not None else ""
    failed = f", {len(b.failed)} failed" if b.failed else ""
    return f"{_pages(b.rendered)} loaded in a browser{loads}{failed}"


def browser_json(b: BrowserFacts, needing: list[tuple[str, str]]) -> dict[str, object]:
    """The report's `browser` object."""
    return {"mode": b.mode, "found": b.found, "rendered": b.rendered, "loads": b.loads,
            "failed": [{"url": u, "reason": r} for u, r in b.failed],
            "text": loaded_text(b),
            "needing": needing_text(b, len(needing)) if needing else None}
