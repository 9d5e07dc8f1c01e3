"""Pages built by scripts (issue 35): a mixed site crawled with [browser] mode off, auto and
always.

    python bench/browser.py --plain 1000 --apps 20 [--modes off,auto,always]

The site is tests/spasite.py (plain pages and app pages of five kinds, on 127.0.0.1, in a
thread of this process). Each mode runs `mirror run -q` in its own process over a fresh
archive; every 0.1 s the RSS of that process and of all its descendants (the parse helpers,
the browser and its renderer, GPU and utility processes: /proc/*/stat's parent links) is
summed, the peak kept. Printed per mode: wall time, peak RSS, the pages loaded in the
browser (the report's browser.loads) and rendered, the browser's restarts (mirror.log, with
the first one's reason), the requests the site received, pages
per second (HTML pages stored / wall), the median and the sum of the renders' times (tab
time: renders in parallel tabs overlap), the load average at the start and the end; then
the ratio auto/off of the wall times (the issue's target: at most 1.5).

--latency S makes the site answer each request after S seconds (a site across a network);
--spread links the app pages among the plain ones (by default all of them come last, so every
render happens after the plain crawl: the worst case).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import spasite  # noqa: E402  (the fixture of the tests, parameterised by counts)

from mirror.browser import find_browser  # noqa: E402

#: mirror.log's line for each page rendered (mirror/browser/page.py)
RENDERED = re.compile(r"browser: rendered \S+ in ([0-9.]+) s")


def descendants_rss(root: int) -> int:
    """RSS in bytes of `root` and every process below it (from /proc)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    kids: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        kids.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += kids.get(pid, [])
    return total


def descendants(root: int) -> list[int]:
    """`root` and every process below it (from /proc's parent links)."""
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += kids.get(pid, [])
    return found


def descendants_pss(root: int) -> int:
    """Proportional set size in bytes of `root` and the processes below it: a page shared by
    N of them counts 1/N in each (smaps_rollup), so the sum is the memory they hold
    together, where summed RSS counts the browser's shared pages once per process."""
    total = 0
    for pid in descendants(root):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) * 1024 for line in rollup.splitlines()
                       if line.startswith("Pss:")), 0)
    return total


def site_file(folder: Path, base: str, mode: str, browser: Path, extra: str,
              crawl: str = "") -> Path:
    path = folder / "site.toml"
    path.write_text(
        f'[site]\nname = "spa"\nstart_urls = ["{base}"]\noutput_dir = "archive"\n'
        "[scope]\nrobots = false\nsitemaps = false\n"
        f"[crawl]\ntimeout = 30\n{crawl}"
        f'[browser]\nmode = "{mode}"\nexecutable = "{browser}"\n{extra}', encoding="utf-8")
    return path


def one_mode(site: spasite.SpaSite, mode: str, browser: Path, extra: str, crawl: str = ""
             ) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"mirror-browserbench-{mode}-") as tmp:
        folder = Path(tmp)
        path = site_file(folder, site.base, mode, browser, extra, crawl)
        hits = len(site.hits)
        load0 = os.getloadavg()[0]
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "mirror", "run", "-q", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = peak_pss = 0
        while proc.poll() is None:
            peak = max(peak, descendants_rss(proc.pid))
            peak_pss = max(peak_pss, descendants_pss(proc.pid))
            time.sleep(0.1)
        wall = time.monotonic() - start
        report = json.loads((folder / "archive" / "reports" / "1.json").read_text())
        log = (folder / "archive" / "mirror.log").read_text(errors="replace")
    restarts = [line.split("restarting it ", 1)[1] for line in log.splitlines()
                if "browser: restarting it " in line]
    renders = sorted(float(m.group(1)) for m in RENDERED.finditer(log))
    b = report.get("browser", {})
    html = report["content_types"].get("text/html", 0)
    return {"mode": mode, "exit": proc.returncode, "wall_s": round(wall, 1),
            "peak_rss_mb": round(peak / 1e6), "peak_pss_mb": round(peak_pss / 1e6),
            "browser_loads": b.get("loads"),
            "rendered": b.get("rendered"), "render_failures": len(b.get("failed", [])),
            "render_s_median": round(statistics.median(renders), 2) if renders else None,
            "render_s_sum": round(sum(renders), 1),
            "browser_restarts": len(restarts), "first_restart": restarts[:1],
            "requests": len(site.hits) - hits, "captures": report["captures"],
            "html_pages": html, "pages_per_s": round(html / wall, 2),
            "load": f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"}


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--plain", type=int, default=1000)
    args.add_argument("--apps", type=int, default=20)
    args.add_argument("--modes", default="off,auto,always")
    args.add_argument("--max-rss-mb", type=int, help="[browser] max_rss_mb (default: its own)")
    args.add_argument("--tabs", type=int, help="[browser] tabs (default: its own, 2)")
    args.add_argument("--latency", type=float, default=0.0,
                      help="seconds the site takes to answer each request (a site across a "
                           "network; default 0, loopback's own)")
    args.add_argument("--spread", action="store_true",
                      help="the home page links the app pages spread among the plain ones "
                           "(default: all after them, the worst case: renders only at the end)")
    args.add_argument("--delay", type=float, default=0.0,
                      help="[crawl] delay between two requests to the host (default 0, as "
                           "mirror's own default; a real site is crawled with one)")
    opts = args.parse_args()
    extra = f"max_rss_mb = {opts.max_rss_mb}\n" if opts.max_rss_mb else ""
    extra += f"tabs = {opts.tabs}\n" if opts.tabs else ""
    crawl = f"delay = {opts.delay}\n" if opts.delay else ""
    browser = find_browser()
    if browser is None:
        print("no Chromium-family browser found", file=sys.stderr)
        return 2
    results = {}
    with spasite.serve(plain=opts.plain, apps=opts.apps, lifetime=6 * 3600,
                       latency=opts.latency, spread=opts.spread) as site:
        for mode in opts.modes.split(","):
            results[mode] = one_mode(site, mode, browser, extra, crawl)
            print(json.dumps(results[mode]), flush=True)
    if "off" in results and "auto" in results:
        ratio = float(results["auto"]["wall_s"]) / float(results["off"]["wall_s"])  # type: ignore[arg-type]
        print(f"auto/off wall time: {ratio:.2f} (target: at most 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
