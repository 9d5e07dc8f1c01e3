"""Site files a user or an attacker got wrong, as real files given to the real `mirror`
command (issue 32: findings 10, 16, 19): numbers past their ceiling, header names the HTTP
layer writes, control characters in header values, hosts '..' and 'xn--', a TOML file
nested thousands deep, and output folders a run must never write into. Each one is
`mirror check` exit 2 naming the file, the key and what is expected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirror.crawl.parsepool import helper_count
from mirror.outputdir import is_archive, output_dir_problem, system_folder

ROOT = Path(__file__).resolve().parent.parent
SITE = '[site]\nname = "ex"\nstart_urls = ["http://127.0.0.1:9/"]\n'


def mirror(*args: str, cwd: Path, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "mirror", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def check(tmp_path: Path, text: str, home: Path | None = None) -> tuple[int, str]:
    (tmp_path / "site.toml").write_text(text, encoding="utf-8")
    done = mirror("check", "site.toml", cwd=tmp_path, home=home)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stderr


@pytest.mark.parametrize(("lines", "message"), [
    ("[crawl]\nworkers = 100000000000000000000",
     "[crawl] workers: expected an integer from 1 to 1,000, found 100000000000000000000"),
    ("[crawl]\nper_host = 101", "[crawl] per_host: expected an integer from 1 to 100, found 101"),
    ("[crawl]\nparse_processes = 40",
     "[crawl] parse_processes: expected an integer from 0 to 32, found 40"),
    ("[crawl]\ntimeout = 7200", "[crawl] timeout: expected a number > 0 and <= 3600, found 7200"),
    ("[crawl]\nconnect_timeout = 1e9", "[crawl] connect_timeout: expected a number > 0 and "
     "<= 3600, found 1000000000.0"),
    ("[crawl]\nread_timeout = 3601", "[crawl] read_timeout: expected a number > 0 and <= 3600"),
    ("[crawl]\ndelay = 86400", "[crawl] delay: expected a number from 0 to 3600, found 86400"),
    ("[crawl]\nmax_response_bytes = 1_000_000_000_000",
     "[crawl] max_response_bytes: expected an integer from 1 to 100,000,000,000"),
    ("[scope]\nmax_pages = 9223372036854775807",
     "[scope] max_pages: expected an integer from 0 to 1,000,000,000"),
    ("[hooks]\ntimeout = 1e300", "[hooks] timeout: expected a number > 0 and <= 86400"),
    ('[crawl]\nheaders = { "Content-Length" = "5" }',
     "[crawl] headers.Content-Length: Content-Length is written by the HTTP layer for each "
     "request; remove it from [crawl] headers"),
    ('[crawl]\nheaders = { "transfer-encoding" = "chunked" }',
     "[crawl] headers.transfer-encoding: transfer-encoding is written by the HTTP layer"),
    ('[crawl]\nheaders = { Host = "example.org" }', "[crawl] headers.Host: Host is written"),
    ('[crawl]\nheaders = { Connection = "close" }', "[crawl] headers.Connection: Connection"),
    ('[crawl]\nheaders = { X-A = "a\\u0001b" }',
     "[crawl] headers.X-A: expected a string without control characters (a tab is allowed), "
     "found 'a\\x01b' (a string)"),
    ('[crawl]\nheaders = { X-A = "a\\u001b]0;owned\\u0007" }',
     "[crawl] headers.X-A: expected a string without control characters"),
    ('[crawl]\nheaders = { Authorization = "Bearer \\u007f" }',
     "[crawl] headers.Authorization: expected a string without control characters (a tab is "
     "allowed), found <redacted>"),
    ('[crawl]\nuser_agent = "bot\\u0085"', "[crawl] user_agent: expected a non-empty string "
     "without control characters"),
])
def test_check_refuses_a_bad_value_with_file_key_and_expected(
        tmp_path: Path, lines: str, message: str) -> None:
    code, err = check(tmp_path, f"{SITE}{lines}\n")
    assert code == 2
    assert err.startswith(f"mirror: site.toml: {message}"), err


def test_a_tab_in_a_header_value_is_allowed(tmp_path: Path) -> None:
    code, err = check(tmp_path, f'{SITE}[crawl]\nheaders = {{ X-A = "a\\tb" }}\n')
    assert (code, err) == (0, "")


@pytest.mark.parametrize("url", ["http://../", "http://xn--/", "https://xn--abc.example/",
                                 "http://a..b/"])
def test_check_and_add_refuse_a_host_no_one_can_fetch(tmp_path: Path, url: str) -> None:
    code, err = check(tmp_path, f'[site]\nname = "ex"\nstart_urls = ["{url}"]\n')
    assert code == 2
    assert err.startswith("mirror: site.toml: [site] start_urls[0]: expected an absolute "
                          f"http(s) URL such as 'https://example.com/', found '{url}'"), err
    added = mirror("add", url, "--library", "lib", "--name", "x", cwd=tmp_path)
    assert added.returncode == 2 and "Traceback" not in added.stderr
    assert "start_urls" in added.stderr and not (tmp_path / "lib" / "x.toml").exists()


def test_check_refuses_a_scope_host_with_a_bad_punycode_label(tmp_path: Path) -> None:
    code, err = check(tmp_path, f'{SITE}[scope]\nhosts = ["ok.example", "xn--"]\n')
    assert code == 2
    assert err.startswith("mirror: site.toml: [scope] hosts[1]: expected a host name"), err


def test_a_valid_punycode_host_is_accepted(tmp_path: Path) -> None:
    code, err = check(tmp_path, '[site]\nname = "ex"\n'
                                'start_urls = ["http://xn--bcher-kva.example/"]\n')
    assert (code, err) == (0, "")


@pytest.mark.parametrize("depth", [2000, 100_000])
def test_a_toml_file_nested_thousands_deep_is_an_error_naming_the_file(
        tmp_path: Path, depth: int) -> None:
    code, err = check(tmp_path, f'{SITE}[scope]\nhosts = {"[" * depth}{"]" * depth}\n')
    assert code == 2
    assert err == ("mirror: site.toml: invalid TOML: arrays or tables nested too deeply "
                   "(hundreds of levels); a site file needs at most three\n")


# --- output_dir ------------------------------------------------------------------------------

ADVICE = ("choose a new or empty folder of its own, e.g. 'archive/<site name>' beside the "
          "site file (the default)")


@pytest.mark.parametrize(("folder", "reason"), [
    ("/", "/ is a system folder that holds other folders"),
    ("/etc", "/etc is a system folder"),
    ("/usr/share/doc", "/usr/share/doc is a system folder (in /usr)"),
    ("/var", "/var is a system folder that holds other folders"),
    ("/proc/self", "/proc/self is a system folder (in /proc)"),
])
def test_check_refuses_a_system_folder(tmp_path: Path, folder: str, reason: str) -> None:
    code, err = check(tmp_path, f'{SITE}output_dir = "{folder}"\n')
    assert code == 2
    assert err == f"mirror: site.toml: [site] output_dir: {reason}; {ADVICE}\n"


def test_check_refuses_the_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "me"
    home.mkdir()
    code, err = check(tmp_path, f'{SITE}output_dir = "~"\n', home=home)
    assert code == 2
    assert err == f"mirror: site.toml: [site] output_dir: {home} is your home folder; {ADVICE}\n"


def listing(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def test_a_run_into_an_unrelated_folder_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "reports").mkdir(parents=True)
    (docs / "index.cdxj").write_text("my own index\n")
    (docs / "reports" / "1.json").write_text('{"mine": true}\n')
    (docs / "notes.txt").write_text("keep me\n")
    before = listing(docs)
    (tmp_path / "site.toml").write_text(f'{SITE}output_dir = "docs"\n')
    for command in (["check", "site.toml"], ["run", "site.toml"]):
        done = mirror(*command, cwd=tmp_path)
        assert done.returncode == 2, done
        assert done.stderr.startswith(
            f"mirror: site.toml: [site] output_dir: {docs} holds other files (3: 'index.cdxj', "
            "'notes.txt', 'reports') and is not a mirror archive"), done.stderr
        assert listing(docs) == before


def test_a_folder_filled_after_check_is_refused_when_the_run_starts(tmp_path: Path) -> None:
    (tmp_path / "site.toml").write_text(f'{SITE}output_dir = "out"\n')
    (tmp_path / "out").mkdir()
    assert mirror("check", "site.toml", cwd=tmp_path).returncode == 0
    (tmp_path / "out" / "thesis.tex").write_text("years of work\n")
    done = mirror("run", "site.toml", cwd=tmp_path)
    assert done.returncode == 2 and "is not a mirror archive" in done.stderr
    assert listing(tmp_path / "out") == {"thesis.tex": b"years of work\n"}


def test_what_counts_as_an_archive(tmp_path: Path) -> None:
    empty, early, warc, manifest, worker, other = (tmp_path / n for n in
                                                   ("e", "s", "w", "m", "k", "o"))
    for folder in (empty, early, warc, manifest, worker, other):
        folder.mkdir()
    (early / ".lock").write_text("")
    (early / "mirror.log").write_text("")
    (warc / "warc").mkdir()
    (manifest / "manifest.sqlite3").write_bytes(b"")
    (manifest / "my-notes.txt").write_text("")
    (worker / "worker.json").write_text("{}")
    (other / "index.cdxj").write_text("")
    assert [is_archive(f) for f in (empty, early, warc, manifest, worker, other)] == \
        [True, True, True, True, True, False]
    assert output_dir_problem(tmp_path / "absent", home=tmp_path / "home") is None
    (tmp_path / "file").write_text("")
    assert output_dir_problem(tmp_path / "file", home=tmp_path / "home") == \
        f"{tmp_path / 'file'} is a file, not a folder; {ADVICE}"


def test_system_folders_are_a_pure_rule() -> None:
    home = Path("/home/me")
    assert system_folder(Path("/home/me"), home) == "/home/me is your home folder"
    assert system_folder(Path("/home/me/mirror/archive"), home) is None
    assert system_folder(Path("/var/lib/mirror"), home) is None
    assert system_folder(Path("/etcetera"), home) is None
    assert system_folder(Path("/tmp"), home) == "/tmp is a system folder that holds other folders"


def test_a_run_starts_at_most_one_parse_helper_per_core() -> None:
    assert [helper_count(n, 2) for n in (0, 1, 2, 40)] == [0, 1, 2, 2]
