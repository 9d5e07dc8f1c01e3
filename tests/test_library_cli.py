"""The library on the command line, as a user runs it from a fresh home: `mirror add` of two
sites on one host, `mirror status` of the whole library, `mirror remove`, `mirror demo` into
the library, and the app showing (and removing) what the command line did. Every command is
a `mirror` process of its own, with HOME and the current folder a temporary home holding the
default library ~/mirror."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TestSite
from test_schedule import crontab_command
from uiproc import UiProcess

from mirror.archive.lock import ArchiveLock

Mirror = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def mirror(home: Path, tmp_path: Path) -> Mirror:
    """`mirror(*args, input=...)`: the CLI in a process of its own, from `home`, with no
    systemd user manager and the test's own crontab spool (test_schedule.crontab_command)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MIRROR_LIBRARY", "XDG_RUNTIME_DIR", "PYTHONPATH")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               MIRROR_CRONTAB=crontab_command(tmp_path))

    def run(*args: str, input: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-P", "-m", "mirror", *args], cwd=home, env=env,
                              input=input, capture_output=True, text=True, timeout=timeout)
    return run


def small_site(site: TestSite, title: str) -> TestSite:
    site.page("/", f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
                   '<a href="/about.html">about</a></body></html>')
    site.page("/about.html", f"<html><head><title>About {title}</title></head>"
                             "<body><p>about</p></body></html>")
    site.page("/robots.txt", "", content_type="text/plain")
    return site


def port_name(base: str) -> str:
    port = re.search(r":(\d+)/$", base)
    assert port
    return f"127-0-0-1-{port[1]}"


def added(mirror: Mirror, url: str, *args: str) -> Path:
    proc = mirror("add", url, *args)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"^wrote (\S+\.toml):", proc.stdout, re.MULTILINE)
    assert found, proc.stdout
    return Path(found[1])


def test_two_sites_on_one_host_are_added_by_port_and_both_run(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    one, two = small_site(site_in_thread(), "One"), small_site(site_in_thread(), "Two")
    first, second = added(mirror, one.base), added(mirror, two.base)
    assert (first.stem, second.stem) == (port_name(one.base), port_name(two.base))
    assert first.parent == second.parent == home / "mirror"
    for path in (first, second):
        proc = mirror("run", "-q", str(path))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {"/", "/about.html"} <= set(one.log) and {"/", "/about.html"} <= set(two.log)

    proc = mirror("status")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"library {home / 'mirror'}: 2 sites"
    assert lines[1].split() == ["site", "state", "last", "run", "pages", "on", "disk",
                                "next", "run"]
    for name, line in zip(sorted((first.stem, second.stem)), lines[2:], strict=True):
        assert re.fullmatch(rf"{name}\s+idle\s+run 1, \d+ s ago, exit 0 \(complete\)\s+\d+"
                            r"\s+\d+\.\d KB\s+not scheduled", line), line
    # with a site file it is the one site's status, as before
    proc = mirror("status", str(first))
    assert proc.returncode == 0 and "library" not in proc.stdout


def test_add_recognises_mediawiki_and_writes_its_rules_as_comments(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    wiki = site_in_thread()
    wiki.page("/", '<html><head><meta charset="UTF-8"><title>Main Page</title>'
                   '<meta name="generator" content="MediaWiki 1.39.4"></head><body>'
                   '<a href="/index.php?title=Main_Page&amp;action=edit">Edit</a></body></html>')
    proc = mirror("add", wiki.base)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('the start page looks like MediaWiki (<meta name="generator" '
                                  'content="MediaWiki 1.39.4">)\n'), proc.stdout
    path = added(mirror, wiki.base, "--name", "wiki2", "--overlap")
    text = path.read_text(encoding="utf-8")
    scope = text[text.index("[scope]"):text.index("[crawl]")]
    for name in ("mediawiki-edit", "mediawiki-history", "mediawiki-info", "mediawiki-special",
                 "login", "account", "returnto"):
        assert re.search(rf"^#   trap:{name} +\S", scope, re.MULTILINE), name
    assert "trap:phpbb-posting" not in scope  # only the rules made for it, and generic ones
    assert re.search(r'^# traps = \["replytocom", ', scope, re.MULTILINE)
    # uncommented, the traps line is the default: the file says what the crawl does anyway
    check = mirror("check", str(path))
    assert check.returncode == 0, check.stderr
    assert "  on   trap:mediawiki-special" in check.stdout
    lines = [line[2:] if re.match(r'# traps = |#\s+"', line) else line
             for line in text.splitlines()]
    uncommented = path.with_name("wiki2-uncommented.toml")  # output_dir is relative to it
    uncommented.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check2 = mirror("check", str(uncommented))
    assert check2.returncode == 0, check2.stderr
    assert check2.stdout.split("OK", 1)[1] == check.stdout.split("OK", 1)[1]


def test_add_offline_says_so_and_writes_the_generic_file(mirror: Mirror, home: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    proc = mirror("add", url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("could not look at the start page (connect: cannot connect "
                                  "to 127.0.0.1:"), proc.stdout
    assert proc.stdout.splitlines()[0].endswith("): writing the generic site file")
    path = added(mirror, url, "--name", "again", "--overlap")
    assert "# mirror could not look at the start page (" in path.read_text(encoding="utf-8")
    assert mirror("check", str(path)).returncode == 0


def test_a_taken_name_says_how_to_choose_another(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    one, two = small_site(site_in_thread(), "One"), small_site(site_in_thread(), "Two")
    taken = added(mirror, one.base).stem
    proc = mirror("add", two.base, "--name", taken)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"mirror: {home / 'mirror' / taken}.toml: a site named '{taken}' is in the library "
        f"already; choose another name, e.g. {taken}-2:\n"
        f"  mirror add {two.base} --name {taken}-2\n")
    assert added(mirror, two.base, "--name", f"{taken}-2").stem == f"{taken}-2"


def test_a_url_another_site_covers_is_refused_naming_that_site(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    one = small_site(site_in_thread(), "One")
    name = added(mirror, one.base).stem
    for url in (one.base, one.base + "about.html"):
        proc = mirror("add", url, "--name", "again")
        assert proc.returncode == 2
        assert proc.stderr.startswith(
            f"mirror: {url}: the site '{name}' ({home / 'mirror' / name}.toml) covers this "
            "URL already (its scope crawls it)"), proc.stderr
        assert proc.stderr.endswith("; or add it anyway with --overlap\n")
    assert sorted(p.name for p in (home / "mirror").glob("*.toml")) == [f"{name}.toml"]
    assert added(mirror, one.base + "about.html", "--overlap", "--name", "about").stem == "about"


def run_site(mirror: Mirror, site: TestSite) -> Path:
    path = added(mirror, site.base)
    proc = mirror("run", "-q", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path


def test_remove_keeps_the_archive_unless_asked_and_confirmed(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    kept, deleted = (run_site(mirror, small_site(site_in_thread(), t)) for t in ("A", "B"))
    archive = home / "mirror" / "archive"
    proc = mirror("remove", kept.stem)
    assert proc.returncode == 0, proc.stderr
    size = re.search(rf"kept its archive {archive / kept.stem} \((\d+\.\d KB) on disk\); "
                     rf"`rm -r {archive / kept.stem}` deletes it", proc.stdout)
    assert size, proc.stdout
    assert proc.stdout.startswith(f"removed {kept.stem} from the library: deleted {kept}\n")
    assert not kept.exists() and (archive / kept.stem / "manifest.sqlite3").exists()

    # --delete-archive asks, naming the size; anything but yes removes nothing
    for answer in ("", "n\n", "whatever\n"):
        proc = mirror("remove", deleted.stem, "--delete-archive", input=answer)
        assert proc.returncode == 2
        assert re.fullmatch(
            rf"delete the site '{deleted.stem}' and its archive {archive / deleted.stem} "
            r"\(\d+\.\d KB on disk\)\? \[y/N\] nothing removed\n", proc.stderr), proc.stderr
        assert deleted.exists() and (archive / deleted.stem / "warc").is_dir()
    proc = mirror("remove", deleted.stem, "--delete-archive", input="y\n")
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"deleted its archive {archive / deleted.stem} \(\d+\.\d KB\)",
                     proc.stdout)
    assert not deleted.exists() and not (archive / deleted.stem).exists()
    assert (archive / kept.stem).is_dir()
    assert mirror("status").stdout.strip() == f"{home / 'mirror'}: no site files yet " \
                                               "(`mirror add URL` writes one)"
    proc = mirror("remove", "nothing-here")
    assert proc.returncode == 2
    assert proc.stderr == (f"mirror: {home / 'mirror'}: no site 'nothing-here' in the library "
                           "(its sites: none)\n")


def test_remove_is_refused_while_a_run_holds_the_archive(
        site_in_thread: Callable[[], TestSite], mirror: Mirror, home: Path) -> None:
    path = run_site(mirror, small_site(site_in_thread(), "A"))
    archive = home / "mirror" / "archive" / path.stem
    with ArchiveLock(archive):
        for extra in ((), ("--delete-archive", "--yes")):
            proc = mirror("remove", path.stem, *extra)
            assert proc.returncode == 2
            assert proc.stderr == (f"mirror: {path.stem}: a mirror process (pid {os.getpid()}) "
                                   "is using its archive; stop it (or wait for it to end), "
                                   "then remove the site\n")
            assert path.exists() and (archive / "manifest.sqlite3").exists()
    proc = mirror("remove", path.stem, "--delete-archive", "--yes")
    assert proc.returncode == 0 and not archive.exists() and not path.exists()


def test_remove_takes_the_sites_timer_along(mirror: Mirror, home: Path) -> None:
    path = added(mirror, "http://127.0.0.1:9/")
    with path.open("a", encoding="utf-8") as f:
        f.write('\n[schedule]\nevery = "daily 03:15"\n')
    other = added(mirror, "http://127.0.0.1:10/")
    with other.open("a", encoding="utf-8") as f:
        f.write('\n[schedule]\nevery = "hourly"\n')
    proc = mirror("schedule", "apply", "--timer", "systemd")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    units = home / ".config" / "systemd" / "user"
    assert len(list(units.glob("mirror-*.timer"))) == 2
    proc = mirror("remove", path.stem)
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"^{path.stem}: removed its systemd mirror-\S+\.timer \(the site was "
                     r"removed from the library\)$", proc.stdout, re.M), proc.stdout
    left = list(units.glob("mirror-*.timer"))
    assert len(left) == 1 and str(other) in left[0].read_text()
    assert len(list(units.glob("mirror-*.service"))) == 1
    listed = mirror("schedule", "list").stdout
    assert other.stem in listed and path.stem not in listed


def test_demo_goes_into_the_library_and_the_app_shows_it(
        mirror: Mirror, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for run in (1, 2):  # twice: the same site file, an incremental run
        proc = mirror("demo", "-q")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"run {run} complete (exit 0)" in proc.stdout
    library = home / "mirror"
    assert [p.name for p in library.glob("*.toml")] == ["demo.toml"]
    assert f"archive: {library / 'archive' / 'demo'}\n" in proc.stdout
    assert proc.stdout.endswith("see it in the library: mirror ui\n")
    proc = mirror("status")
    assert re.search(r"^demo\s+idle\s+run 2, .*exit 0 \(complete\)\s+\d+\s+\d+\.\d KB",
                     proc.stdout, re.M), proc.stdout
    monkeypatch.setenv("HOME", str(home))
    app = UiProcess.start(library)
    try:
        import urllib.request

        request = urllib.request.Request(app.base, headers={"Cookie": f"mirror_ui={app.cookie}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            page = answer.read().decode()
    finally:
        app.stop()
    row = re.search(r'<tr id="site-demo" class="site" data-state="idle">(.*?)</tr>', page, re.S)
    assert row and '<a href="/site/demo">demo</a>' in row[1]
    # a demo.toml that is the user's own is not overwritten
    (library / "demo.toml").write_text('[site]\nname = "mine"\nstart_urls = ["http://x.test/"]\n')
    proc = mirror("demo", "-q")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"mirror: {library / 'demo.toml'}: a site file that "
                                  "`mirror demo` did not write is there")


def test_status_of_a_library_escapes_control_characters(mirror: Mirror, home: Path) -> None:
    library = home / "mirror"
    library.mkdir()
    (library / "evil.toml").write_text('[site]\nname = "e\\u001b[31mvil"\n')
    proc = mirror("status")
    assert proc.returncode == 0
    assert "\x1b" not in proc.stdout and "\\x1b[31m" in proc.stdout
