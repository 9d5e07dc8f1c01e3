"""`mirror check` (a site file's effective settings) and `mirror explain` (a URL's canonical
form and whether the site's run would crawl it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from mirror.cli.command import Command

if TYPE_CHECKING:
    from mirror.config import SiteConfig


def cmd_check(args: argparse.Namespace) -> int:
    from mirror.config import load_config
    from mirror.model import ExitCode

    cfg = load_config(args.config)
    print(f"{cfg.path}: OK")
    for section, values in cfg.effective().items():
        print(f"[{section}]")
        for key, value in values.items():
            print(f"  {key} = {value!r}")
    from mirror.crawl.traprules import rule_lines

    print("\n".join(rule_lines(cfg.scope.traps)))
    print(f"archive: {cfg.site.output_dir}")
    print(browser_line(cfg))
    if cfg.schedule.every is not None:
        from datetime import datetime

        from mirror.schedule.listing import next_text

        print(f"next scheduled run: {next_text(cfg.schedule.every, datetime.now())} "
              f"(once `mirror schedule apply {cfg.path}` has installed its timer)")
    return ExitCode.OK


def browser_line(cfg: SiteConfig) -> str:
    """Which browser the run will load pages built by scripts in, or how to have one."""
    mode = cfg.browser.mode
    if mode == "off":
        return "browser: off ([browser] mode = \"off\"): pages are stored as the server sends them"
    from mirror.browser.find import find_browser
    from mirror.browserconfig import enable_advice, this_system

    found = find_browser(cfg.browser.executable)
    if found is None:
        return (f"browser: none found ([browser] mode = \"{mode}\"): pages built by scripts "
                f"will be stored as the server sends them; {enable_advice(*this_system())}")
    which = "every HTML page" if mode == "always" else "the pages built by scripts"
    return f"browser: {found} loads {which} ([browser] mode = \"{mode}\")"


def explain_arguments(explain: argparse.ArgumentParser) -> None:
    explain.add_argument("url", help="the URL to explain")
    explain.add_argument("--depth", type=int, default=1,
                         help="links away from a start URL (default 1)")
    explain.add_argument("--offline", action="store_true",
                         help="never fetch robots.txt; use the archived copy only")


def cmd_explain(args: argparse.Namespace) -> int:
    import asyncio

    from mirror.config import load_config
    from mirror.crawl.robotslookup import robots_rules
    from mirror.explain import explain
    from mirror.explainarchive import archive_lines
    from mirror.model import ExitCode
    from mirror.terminal import say

    cfg = load_config(args.config)
    rules, source = asyncio.run(robots_rules(cfg, args.url, offline=args.offline))
    say("\n".join(explain(cfg, args.url, args.depth, rules, source, learned(cfg))
                  + archive_lines(cfg, args.url)))
    return ExitCode.OK


def learned(cfg: SiteConfig) -> dict[str, Any] | None:
    """The learned trap patterns the archive's last run stopped (None: no manifest yet)."""
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader

    path = ArchiveLayout(cfg.site.output_dir).manifest
    if not path.exists():
        return None
    manifest = ManifestReader(path)
    try:
        last = manifest.runs.last()
        return manifest.patterns.stopped(last.id) if last else {}
    finally:
        manifest.close()


COMMANDS = (
    Command("check", "validate a site file and print the effective settings", cmd_check),
    Command("explain", "show the canonical form of a URL and whether it would be crawled",
            cmd_explain, explain_arguments),
)
