"""Debian's MediaWiki 1.39 on 127.0.0.1, for tests/test_wiki.py and bench/wiki.py (issue 33).

`build(folder)` installs a wiki of its own into `folder` (SQLite, Vector, no short URLs: the
`/index.php/Title` paths MediaWiki picks by itself) with `maintenance/install.php`, then fills
it with its maintenance scripts: `importDump.php` of a generated XML dump (ARTICLES linked
articles of 3-5 revisions each, talk pages, categories, templates), `importImages.php` of
small generated PNGs, `runJobs.php`. `serve(folder)` runs PHP's own web server on it
(`php -S`, a few workers) and logs every request; `requests(log)` reads that log back.
Nothing outside `folder` is written: the code is Debian's /usr/share/mediawiki, found by
symlinks, and the settings are named by MW_CONFIG_FILE.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

MEDIAWIKI = Path("/usr/share/mediawiki")
ARTICLES = 150
GROUPS = 10  # categories
IMAGES = 20
WORKERS = 4  # php -S processes
START_SECONDS = 30.0
#: what MediaWiki's pages are called in the dump and the wiki
TITLE = "Topic {}"
#: a request's URL kinds that are traps for an archive: views for editors, not readers
TRAP_KINDS = frozenset({"edit", "history", "diff", "oldid", "info", "action", "special"})
#: what the wait for the server asks, left out of `requests`
PROBE = "index.php/Special:BlankPage?wikisrv=probe"
LOG_LINE = re.compile(r"\[(\d{3})\]: (\S+) (\S+)")


def missing() -> str | None:
    """Why the wiki cannot run here, or None."""
    if shutil.which("wget") is None:
        return "no wget, to compare with (Debian: apt-get install wget)"
    if shutil.which("php") is None:
        return "no php (Debian: apt-get install php-cli php-sqlite3)"
    if not (MEDIAWIKI / "maintenance" / "install.php").is_file():
        return "no MediaWiki in /usr/share/mediawiki (Debian: apt-get install mediawiki)"
    probe = subprocess.run(["php", "-r", "echo class_exists('SQLite3') ? 1 : 0;"],
                           capture_output=True, text=True, timeout=30)
    if probe.stdout.strip() != "1":
        return "php has no SQLite (Debian: apt-get install php-sqlite3)"
    return None


def title(n: int) -> str:
    return TITLE.format(n)


def url_title(n: int) -> str:
    return title(n).replace(" ", "_")


# -- the content ------------------------------------------------------------------------------

def png(n: int) -> bytes:
    """A 24x24 PNG of one colour, different for each n."""
    width = height = 24
    colour = bytes(((n * 53) % 256, (n * 97) % 256, (n * 29) % 256))
    raw = b"".join(b"\x00" + colour * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def article(n: int, revision: int) -> str:
    """Wikitext of article n as of a revision: links forward (every article is reachable
    from Topic 1), an infobox, a navbox, a category, now and then a picture."""
    links = sorted({(n % ARTICLES) + 1, (n * 7) % ARTICLES + 1, (n * 13 + 5) % ARTICLES + 1})
    said = ", ".join(f"[[{title(k)}]]" for k in links)
    picture = f"[[File:Picture {n % IMAGES + 1}.png]]\n" if n % 3 == 0 else ""
    body = "\n\n".join(
        f"Paragraph {p} of {title(n)}, revision {revision}: the text a reader comes for, "
        f"with words that change from one revision to the next ({revision * p})."
        for p in range(1, 2 + revision))
    return (f"{{{{Infobox|name={title(n)}|group=Group {n % GROUPS}}}}}\n"
            f"'''{title(n)}''' is article {n}. See also {said}.\n\n"
            f"== History ==\n{body}\n\n{picture}== See also ==\n{said}\n\n"
            f"{{{{Navbox}}}}\n[[Category:Group {n % GROUPS}]]\n")


INFOBOX = ('{| class="infobox" style="float:right;border:1px solid #aaa"\n'
           "! {{{name}}}\n|-\n| Group: [[:Category:{{{group}}}|{{{group}}}]]\n|}\n")


def navbox() -> str:
    groups = " · ".join(f"[[:Category:Group {g}|Group {g}]]" for g in range(GROUPS))
    return f'<div class="navbox">[[Main Page]] · {groups}</div>'


def main_page() -> str:
    groups = "\n".join(f"* [[:Category:Group {g}]]" for g in range(GROUPS))
    return (f"Welcome to the test wiki. Start with [[{title(1)}]] or a group:\n{groups}\n\n"
            f"[[File:Picture 1.png]]\n")


def pages() -> Iterator[tuple[int, str, list[str]]]:
    """(namespace, title, wikitext of each revision, oldest first) of every page."""
    yield 10, "Template:Infobox", [INFOBOX]
    yield 10, "Template:Navbox", [navbox().replace("Main Page", "Main_Page"), navbox()]
    for n in range(1, ARTICLES + 1):
        yield 0, title(n), [article(n, r) for r in range(1, 4 + n % 3)]
        if n % 3 == 0:
            yield 1, f"Talk:{title(n)}", [f"Is {title(n)} right? ~~~~", "Fixed it. ~~~~"][
                :1 + n % 2]
    for g in range(GROUPS):
        yield 14, f"Category:Group {g}", [f"Articles of group {g}.", f"The articles of group {g}."]


def dump() -> str:
    """The pages as a MediaWiki XML export (format 0.11), for importDump.php."""
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" '
           'xml:lang="en">']
    stamp = 1_600_000_000
    for ns, name, texts in pages():
        out.append(f"<page><title>{escape(name)}</title><ns>{ns}</ns>")
        for text in texts:
            stamp += 3600
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
            out.append(f"<revision><timestamp>{when}</timestamp><contributor><username>Admin"
                       f"</username></contributor><comment>edit</comment><model>wikitext"
                       f"</model><format>text/x-wiki</format><text xml:space=\"preserve\">"
                       f"{escape(text)}</text></revision>")
        out.append("</page>")
    out.append("</mediawiki>")
    return "\n".join(out)


# -- building ---------------------------------------------------------------------------------

SETTINGS = """
# added by tests/wikisrv.py
$wgServer = getenv( 'WIKI_SERVER' ) ?: $wgServer;
$wgEnableUploads = true;
$wgUseImageMagick = false;
$wgUploadDirectory = __DIR__ . '/w/images';
$wgUploadPath = '/images';
$wgJobRunRate = 0;
$wgCacheDirectory = __DIR__ . '/cache';
"""


def _env(folder: Path, server: str = "") -> dict[str, str]:
    env = {**os.environ, "MW_CONFIG_FILE": str(folder / "LocalSettings.php"),
           "MW_INSTALL_PATH": str(MEDIAWIKI)}
    if server:
        env["WIKI_SERVER"] = server
    return env


def _php(folder: Path, script: str, *args: str, stdin: str = "", timeout: float = 600) -> None:
    done = subprocess.run(["php", str(MEDIAWIKI / "maintenance" / script), *args],
                          env=_env(folder), input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stderr or done.stdout}")


def _docroot(folder: Path) -> None:
    """folder/w: Debian's files by symlink, the bundled extensions, images of its own."""
    root = folder / "w"
    root.mkdir(parents=True)
    for entry in MEDIAWIKI.iterdir():
        if entry.name not in ("LocalSettings.php", "images", "extensions", "config"):
            (root / entry.name).symlink_to(entry)
    (root / "extensions").symlink_to(MEDIAWIKI / "extensions-core")
    (root / "images").mkdir()
    (folder / "cache").mkdir()
    (folder / "data").mkdir()


def build(folder: Path) -> float:
    """Install and fill a wiki in `folder` (new or empty); the seconds it took."""
    began = time.monotonic()
    _docroot(folder)
    subprocess.run(
        ["php", str(MEDIAWIKI / "maintenance" / "install.php"), "--dbtype", "sqlite",
         "--dbpath", str(folder / "data"), "--dbname", "wiki", "--server", "http://127.0.0.1",
         "--scriptpath", "", "--confpath", str(folder), "--pass", "Adm1n-pass-for-tests",
         "--skins", "Vector", "--quiet", "Test Wiki", "Admin"],
        env={**os.environ, "MW_INSTALL_PATH": str(MEDIAWIKI)}, check=True,
        capture_output=True, timeout=300)
    settings = folder / "LocalSettings.php"
    text = re.sub(r'(?m)^\$wgSQLiteDataDir = .*$', "$wgSQLiteDataDir = __DIR__ . '/data';",
                  settings.read_text("utf-8"))
    settings.write_text(text + SETTINGS, "utf-8")  # a folder that can be copied and moved
    (folder / "dump.xml").write_text(dump(), encoding="utf-8")
    _php(folder, "importDump.php", "--quiet", str(folder / "dump.xml"))
    pictures = folder / "pictures"
    pictures.mkdir()
    for k in range(1, IMAGES + 1):
        (pictures / f"Picture {k}.png").write_bytes(png(k))
    _php(folder, "importImages.php", "--quiet", "--comment=a test picture", str(pictures))
    # the installer wrote a Main Page of its own, newer than the dump's dates: an edit on top
    _php(folder, "edit.php", "--user", "Admin", "--summary", "welcome", "Main Page",
         stdin=main_page())
    for script in ("rebuildrecentchanges.php", "initSiteStats.php", "runJobs.php"):
        _php(folder, script, "--quiet")
    return time.monotonic() - began


def _cache_key() -> str:
    version = (MEDIAWIKI / "includes" / "Defines.php").stat()
    source = Path(__file__).read_bytes() + f"{version.st_size} {version.st_mtime}".encode()
    return hashlib.sha256(source).hexdigest()[:16]


def prepared(dest: Path) -> tuple[float, bool]:
    """A filled wiki in `dest` (new): a copy of the one built earlier by this same code
    (kept under the system's temporary folder), built first when there is none. Returns
    the seconds it took and whether it was built now."""
    began = time.monotonic()
    cache = Path(tempfile.gettempdir()) / f"mirror-test-wiki-{_cache_key()}"
    built = not (cache / "built").is_file()
    if built:
        work = Path(tempfile.mkdtemp(prefix=cache.name + "-", dir=cache.parent))
        build(work / "wiki")
        (work / "wiki" / "built").write_text("ok\n")
        shutil.rmtree(cache, ignore_errors=True)
        (work / "wiki").rename(cache)
        work.rmdir()
    shutil.copytree(cache, dest, symlinks=True)
    return time.monotonic() - began, built


# -- serving ----------------------------------------------------------------------------------

@dataclass
class Wiki:
    base: str  # http://127.0.0.1:PORT/
    log: Path  # php -S's stderr: one line per request

    @property
    def start_url(self) -> str:
        return self.base + "index.php/Main_Page"

    def article_url(self, n: int) -> str:
        return self.base + "index.php/" + url_title(n)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"php -S ended ({proc.returncode}) before it answered")
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the wiki did not answer {url} within {START_SECONDS:.0f} s")


@contextmanager
def serve(folder: Path, log: Path) -> Iterator[Wiki]:
    """The wiki in `folder` on 127.0.0.1 until the block ends; its requests go to `log`
    (those of the wait for it to answer are left out by `requests`)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}/"
    env = {**_env(folder, base.rstrip("/")), "PHP_CLI_SERVER_WORKERS": str(WORKERS)}
    with open(log, "ab") as out:
        proc = subprocess.Popen(["php", "-S", f"127.0.0.1:{port}", "-t", str(folder / "w")],
                                env=env, stdout=out, stderr=out, start_new_session=True)
    try:
        _wait_until_up(base + PROBE, proc)
        yield Wiki(base, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def requests(log: Path, since: int = 0) -> list[tuple[int, str, str]]:
    """(status, method, path and query) of each request answered after the server was up;
    `since`: how many of them to leave out (those of an earlier client)."""
    text = log.read_text("utf-8", "replace")
    return [(int(m[1]), m[2], m[3]) for m in LOG_LINE.finditer(text) if m[3] != "/" + PROBE
            ][since:]


def url_kind(target: str) -> str:
    """What a wiki URL (path and query) shows: article, talk, category, file, template,
    edit, history, diff, oldid, info, action (any other action=), special, asset, image."""
    parts = urlsplit(target)
    query = parse_qs(parts.query)
    path = unquote(parts.path)
    name = (query.get("title") or [path.removeprefix("/index.php/")])[0]
    action = (query.get("action") or ["view"])[0]
    if "diff" in query:
        return "diff"
    if "oldid" in query:
        return "oldid"
    if action in ("edit", "submit") or "veaction" in query:
        return "edit"
    if action in ("history", "info"):
        return action
    if action not in ("view", "raw") or name.startswith("Special:"):
        return "action" if action != "view" else "special"
    if path.startswith("/images/"):
        return "image"
    if not path.startswith("/index.php") or action == "raw":
        return "asset"
    for prefix, kind in (("Talk:", "talk"), ("Category:", "category"), ("File:", "file"),
                         ("Template:", "template")):
        if name.startswith(prefix):
            return kind
    return "article"


def kinds(targets: list[str]) -> Counter[str]:
    return Counter(url_kind(t) for t in targets)


def trap_share(targets: list[str]) -> float:
    """The share of requests to edit, history, diff, old-revision, info and Special: URLs."""
    counts = kinds(targets)
    return sum(counts[k] for k in TRAP_KINDS) / max(1, len(targets))
