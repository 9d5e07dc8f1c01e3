"""wget and mirror on the test wiki (tests/wikisrv.py), measured the same way, for
tests/test_wiki.py and bench/wiki.py (issue 33).

A run is bounded: at `timeout` seconds the program gets SIGINT (mirror stops cleanly and keeps
what it fetched), then SIGKILL if it has not ended GRACE seconds later. What a run did is read
from the wiki's own request log, not from the program's word.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import wikisrv

from mirror.replay.exportpath import export_path

GRACE = 60.0
WGET = ["wget", "-q", "-m", "-p", "-k", "-E", "-np"]
HREF = re.compile(r'href="([^"#]*)')


@dataclass
class Outcome:
    """One program's run on the wiki."""

    name: str
    wall: float
    ended: bool  # by itself, before the timeout
    targets: list[str] = field(default_factory=list)  # path and query of each request

    @property
    def trap_share(self) -> float:
        return wikisrv.trap_share(self.targets)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in wikisrv.kinds(self.targets).most_common())
        end = "ended by itself" if self.ended else "stopped at the timeout"
        return (f"{self.name}: {len(self.targets)} requests in {self.wall:.1f} s, {end}; "
                f"trap share {self.trap_share:.1%} ({kinds})")


def bounded(argv: list[str], timeout: float, *, cwd: Path | None = None) -> tuple[float, bool]:
    """Run argv in a process group of its own for at most `timeout` seconds: (wall, ended)."""
    began = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout)
        return time.monotonic() - began, True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return time.monotonic() - began, False


def measured(wiki: wikisrv.Wiki, name: str, argv: list[str], timeout: float,
             cwd: Path | None = None) -> Outcome:
    since = len(wikisrv.requests(wiki.log))
    wall, ended = bounded(argv, timeout, cwd=cwd)
    time.sleep(0.5)  # php -S writes a request's line once it has answered
    return Outcome(name, wall, ended, [t for _, _, t in wikisrv.requests(wiki.log, since)])


def run_wget(wiki: wikisrv.Wiki, dest: Path, timeout: float) -> Outcome:
    dest.mkdir(parents=True)
    return measured(wiki, "wget", [*WGET, "-P", str(dest), wiki.start_url], timeout)


def site_file(folder: Path, wiki: wikisrv.Wiki, extra: str = "") -> Path:
    """The README's smallest site file: a name, the start page, an output folder (and
    `extra`, TOML sections of a variant, e.g. with the built-in rules off)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "site.toml"
    path.write_text(f'[site]\nname = "wiki"\nstart_urls = ["{wiki.start_url}"]\n'
                    f'output_dir = "archive"\n{extra}', "utf-8")
    return path


def run_mirror(wiki: wikisrv.Wiki, folder: Path, timeout: float, extra: str = "") -> Outcome:
    config = site_file(folder, wiki, extra)
    return measured(wiki, "mirror", [sys.executable, "-m", "mirror", "run", "--quiet",
                                     str(config)], timeout, cwd=folder)


def export(folder: Path, out: Path, timeout: float = 600) -> None:
    subprocess.run([sys.executable, "-m", "mirror", "export", str(folder / "site.toml"),
                    "--to", str(out)], cwd=folder, check=True, timeout=timeout,
                   capture_output=True)


def article_file(out: Path, wiki: wikisrv.Wiki, n: int) -> Path:
    return out / export_path(wiki.article_url(n), "text/html")


def reachable(out: Path, start: Path) -> set[Path]:
    """The exported HTML files a reader reaches from `start` by following links on file://."""
    seen = {start.resolve()}
    todo = [start.resolve()]
    while todo:
        page = todo.pop()
        for ref in HREF.findall(page.read_text("utf-8", "replace")):
            if not ref or "://" in ref or ref.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(ref.replace("&amp;", "&"))).resolve()
            if target.suffix == ".html" and target.is_file() and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def browsable(out: Path, wiki: wikisrv.Wiki) -> list[int]:
    """The articles whose exported page a reader reaches from the exported Main Page."""
    start = out / export_path(wiki.start_url, "text/html")
    if not start.is_file():
        return []
    found = reachable(out, start)
    return [n for n in range(1, wikisrv.ARTICLES + 1)
            if article_file(out, wiki, n).resolve() in found]
