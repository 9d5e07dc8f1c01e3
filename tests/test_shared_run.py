"""One crawl shared by workers (`mirror run --db`): a commit fenced off by a lost host lease
is cut off the WARC file; a worker killed at every crash point of its steps and started
again leaves every URL stored exactly once in the uploaded files; a forgotten worker's
files are fetched again and deleted; the options say what is wrong with them."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from conftest import write_config
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from mirror import crashpoints
from mirror.archive import workerfolder
from mirror.archive.warcwriter import WarcWriter, default_info, sha1_digest
from mirror.crawl.store import CaptureStore
from mirror.manifest.writer import Manifest, NewUrl
from mirror.model import NOTHING, Exchange
from mirror.store.objstore import WARC_PREFIX, open_store

ROOT = Path(__file__).resolve().parent.parent
PAGES = 24
DUP = "<!doctype html><title>dup</title><p>the same body in three places"
#: lease length for the tests: [crawl] timeout 1 + sharedfrontier.MARGIN + 1
TTL = "4"
TIMEOUT = 90


def build_site(site: Any) -> None:
    """A tree of pages, bodies shared by three URLs (revisits within a worker's own
    files), a redirect, a 404, a robots.txt that disallows one URL and names no sitemap."""
    for i in range(PAGES):
        kids = "".join(f"<a href='/p{j}'>p{j}</a>" for j in (2 * i + 1, 2 * i + 2)
                       if j < PAGES)
        extra = "".join(f"<a href='/{p}'>{p}</a>" for p in (
            "dup0", "dup1", "dup2", "old", "missing", "private")) if i == 0 else ""
        site.page("/" if i == 0 else f"/p{i}",
                  f"<!doctype html><title>p{i}</title><p>{'words ' * 60} {kids}{extra}")
    for k in range(3):
        site.page(f"/dup{k}", DUP)
    site.redirect("/old", "/p1")
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n",
              content_type="text/plain")


def worker_folder(tmp_path: Path, name: str, base: str, store: str,
                  max_pages: int = 0) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    write_config(folder, [base],
                 scope={"robots": True, "sitemaps": False, "max_pages": max_pages},
                 crawl={"timeout": 1, "delay": 0, "workers": 4},
                 archive={"store": store, "warc_max_bytes": 6000})
    return folder / "site.toml"


def run_worker(site_toml: Path, dsn: str, name: str, *extra: str,
               crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(crashpoints.ENV, None)
    if crash_at:
        env[crashpoints.ENV] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "mirror", "run", str(site_toml), "--db", dsn, "--worker-id",
         name, "--lease-ttl", TTL, "-q", *extra],
        env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def check_exactly_once(dsn: str, store_url: str, state_is: str = "complete") -> set[str]:
    """The shared run against the bucket: the run complete with nothing pending or leased
    (`state_is` limit: stopped at max_pages, with nothing but pages pending); each URL
    captured once; every capture's file uploaded; the bucket's WARC records exactly the
    committed captures, each file valid (warcio's checker). Returns the URLs."""
    with psycopg.connect(dsn) as db:
        last = db.execute("SELECT id, state FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        assert last is not None
        run, state = last
        left = db.execute("SELECT url, state FROM urls WHERE state IN ('pending', 'leased') "
                          "AND via != 'robots'" + (" AND (mode != 'page' OR state = 'leased')"
                                                   if state_is == "limit" else "")).fetchall()
        captures = db.execute('SELECT filename, "offset", url FROM captures WHERE run_id=%s',
                              (run,)).fetchall()
        files: dict[str, str] = dict(db.execute("SELECT name, state FROM files").fetchall())
    assert state == state_is and not left, (state, left)
    per_url = collections.Counter(url for _, _, url in captures)
    assert not [u for u, n in per_url.items() if n > 1], per_url
    assert {files.get(f) for f, _, _ in captures} == {"uploaded"}, files
    store = open_store(store_url)
    objects = store.list(WARC_PREFIX)
    tmp = Path(tempfile.mkdtemp(prefix="shared-check-"))
    assert {k[len(WARC_PREFIX):] for k in objects} == {
        n for n, s in files.items() if s == "uploaded"}
    records = {}
    for key in objects:
        data = store.get_bytes(key)
        name = key[len(WARC_PREFIX):]
        it = ArchiveIterator(io.BytesIO(data))
        for record in it:
            if record.rec_type in ("response", "revisit"):
                records[name, it.get_record_offset()] = record.rec_headers.get_header(
                    "WARC-Target-URI")
        problems = warcio_check(tmp / name, data)
        assert not problems, f"warcio check: {name}: {problems}"
    shutil.rmtree(tmp)
    assert set(records) == {(f, o) for f, o, _ in captures}
    return set(per_url)


def warcio_check(path: Path, data: bytes) -> str:
    """What `warcio check` says of a WARC file (its digests), or '' when it is valid."""
    path.write_bytes(data)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = Checker(SimpleNamespace(inputs=[str(path)], verbose=False)).process_all()
    return out.getvalue() or ("failed" if code else "")


@pytest.fixture
def shared(site_in_thread: Any, tmp_path: Path, pg_dsn: str, s3: Any) -> Any:
    site = site_in_thread()
    build_site(site)
    return type("Shared", (), {"site": site, "dsn": pg_dsn, "store": s3.url,
                               "tmp": tmp_path})


def uncrashed_urls(shared: Any) -> set[str]:
    toml = worker_folder(shared.tmp, "w1", shared.site.base, shared.store)
    done = run_worker(toml, shared.dsn, "w1")
    assert done.returncode == 0, done.stderr
    return check_exactly_once(shared.dsn, shared.store)


def run_workers_at_once(shared: Any, tomls: list[Path]) -> tuple[list[int], list[str]]:
    """Workers w1, w2, ... of these site files started together: their exit codes and
    what each printed (stdout and stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "mirror", "run", str(t), "--db", shared.dsn, "--worker-id",
         f"w{i}", "--lease-ttl", TTL, "-q"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i, t in enumerate(tomls, 1)]
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [p.returncode for p in procs], [out + err for out, err in outs]


def test_two_workers_share_one_run_and_every_url_is_stored_once(shared: Any) -> None:
    tomls = [worker_folder(shared.tmp, f"w{i}", shared.site.base, shared.store)
             for i in (1, 2)]
    codes, outs = run_workers_at_once(shared, tomls)
    assert codes == [0, 0], outs
    urls = check_exactly_once(shared.dsn, shared.store)
    assert f"{shared.site.base}p{PAGES - 1}" in urls and f"{shared.site.base}private" \
        not in urls
    for i, toml in enumerate(tomls, 1):  # one host: maybe only one worker fetched
        names = [p.name for p in (toml.parent / "archive" / "warc").glob("*")]
        assert all(n.startswith(f"test-w{i}-") for n in names), names
    assert any("the run is complete" in out for out in outs)
    assert shared.site.count("/robots.txt") >= 1


#: every step a worker passes (the capture's, the file's, the upload's), some of them deep
#: in the run, and of one kind of capture
CRASHES = ["run:started", "append:before", "append:between", "append:unflushed",
           "commit:before", "commit:inside", "commit:after", "commit:before#9",
           "commit:inside#20", "commit:after/robots",
           "commit:before/revisit-other-url-same-run", "commit:after/redirect",
           "open:unflushed#2", "rotate:before-rename", "rotate:after-rename",
           "upload:before", "upload:before-mark", "upload:before-mark#2"]


@pytest.mark.parametrize("spec", CRASHES)
def test_a_worker_killed_at_a_crash_point_and_started_again_stores_every_url_once(
        shared: Any, spec: str) -> None:
    toml = worker_folder(shared.tmp, "w1", shared.site.base, shared.store)
    crashed = run_worker(toml, shared.dsn, "w1", crash_at=spec)
    assert crashed.returncode == crashpoints.EXIT_STATUS, (spec, crashed.stderr)
    again = run_worker(toml, shared.dsn, "w1", "--join")
    assert again.returncode == 0, again.stderr
    urls = check_exactly_once(shared.dsn, shared.store)
    assert len(urls) == PAGES + 3 + 3  # the pages, dup0-2, /old, /missing, robots.txt


@pytest.mark.parametrize("spec", ["commit:before#5", "upload:before-mark"])
def test_a_dead_workers_hosts_are_taken_over_and_its_files_uploaded_when_it_returns(
        shared: Any, spec: str) -> None:
    """w1 dies; w2 (another folder) waits for w1's lease to expire, takes the host over
    and finishes the run; w1 comes back (--join: no run to join) and uploads its files."""
    one = worker_folder(shared.tmp, "w1", shared.site.base, shared.store)
    two = worker_folder(shared.tmp, "w2", shared.site.base, shared.store)
    assert run_worker(one, shared.dsn, "w1", crash_at=spec).returncode == 137
    started = time.monotonic()
    finish = run_worker(two, shared.dsn, "w2", "--join")
    assert finish.returncode == 0, finish.stderr
    assert "the run is complete" in finish.stdout
    assert re.search(r"worker w1 is silent and has \d+ WARC files with captures of this "
                     r"run not uploaded .*--forget-worker w1", finish.stderr), finish.stderr
    back = run_worker(one, shared.dsn, "w1", "--join")
    assert back.returncode == 0 and "no unfinished run to join" in back.stdout, back
    assert time.monotonic() - started < TIMEOUT
    urls = check_exactly_once(shared.dsn, shared.store)
    assert len(urls) == PAGES + 3 + 3


def test_a_forgotten_workers_files_are_fetched_again_and_deleted_when_it_returns(
        shared: Any) -> None:
    one = worker_folder(shared.tmp, "w1", shared.site.base, shared.store)
    two = worker_folder(shared.tmp, "w2", shared.site.base, shared.store)
    # w1 dies with a closed file recorded but not uploaded, and its open file
    assert run_worker(one, shared.dsn, "w1", crash_at="upload:before").returncode == 137
    finish = run_worker(two, shared.dsn, "w2", "--forget-worker", "w1")
    assert finish.returncode == 0, finish.stderr
    with psycopg.connect(shared.dsn) as db:
        lost = [n for (n,) in db.execute("SELECT name FROM files WHERE worker='w1' "
                                         "AND state='lost'")]
    assert lost
    back = run_worker(one, shared.dsn, "w1", "--join")
    assert back.returncode == 0, back.stderr
    assert not any((one.parent / "archive" / "warc" / n).exists() for n in lost)
    assert len(check_exactly_once(shared.dsn, shared.store)) == PAGES + 3 + 3


def test_a_commit_whose_lease_was_taken_over_is_cut_off_the_warc_file(
        pg_dsn: str, tmp_path: Path) -> None:
    mine, other = Manifest(pg_dsn), Manifest(pg_dsn)
    try:
        url = "http://h.test/a"
        run = mine.sharedrun.join_or_start_run("t", "d", [NewUrl(url, "h.test", 0, 5, "page",
                                                        "start", "link")])
        assert run is not None
        lease = mine.sharedrun.lease_hosts("a", 1, 0.2)[0]
        [item] = mine.sharedrun.lease_urls(lease, 1)
        store = CaptureStore(
            mine, tmp_path / "warc", lambda *_: False, group_size=1,
            writer=WarcWriter(tmp_path / "warc", "t-a", 10**9, default_info("d", "t")),
            lease_of=lambda _item: lease)
        body = b"<p>fetched too late"
        ex = Exchange(url, "GET", "/a", (("Host", "h.test"),), "1.1", 200, "OK",
                      (("Content-Type", "text/html"),), io.BytesIO(body), len(body),
                      payload_digest=sha1_digest(hashlib.sha1(body)))
        time.sleep(0.3)  # the lease expires; another worker takes the host over
        [taken] = other.sharedrun.lease_hosts("b", 1, 30)
        assert taken.epoch == lease.epoch + 1
        store.store(run.run_id, item, ex, None, None, NOTHING)
        store.close()
        [path] = (tmp_path / "warc").iterdir()
        with open(path, "rb") as f:
            kinds = [r.rec_type for r in ArchiveIterator(f)]
        assert kinds == ["warcinfo"]  # the record is cut off again
        assert mine.sql.execute("SELECT COUNT(*) FROM captures").fetchone()[0] == 0
        assert [i.url for i in other.sharedrun.lease_urls(taken, 5)] == [url]  # w2 fetches it
    finally:
        mine.close()
        other.close()


def test_a_page_budget_is_the_runs_and_a_takeover_gives_its_pages_back(pg_dsn: str) -> None:
    """[scope] max_pages in a shared run: pages leased by one worker are taken from every
    worker's budget; past it only requisites are leased, a host with nothing else is not
    leased, and the run counts as over with only pages pending; a lease taken over gives
    its pages back to the budget."""
    def url(host: str, path: str, mode: str) -> NewUrl:
        return NewUrl(f"http://{host}/{path}", host, 1, 5, mode, "link", "link")
    seeds = [*(url("a.test", f"p{i}", "page") for i in range(4)),
             url("a.test", "style.css", "requisite"),
             *(url("b.test", f"p{i}", "page") for i in range(3)),
             url("b.test", "logo.png", "requisite"),
             url("c.test", "p0", "page")]
    one, two = Manifest(pg_dsn), Manifest(pg_dsn)
    try:
        run = one.sharedrun.join_or_start_run("t", "d", seeds)
        assert run is not None
        budget = (run.run_id, 3)
        [a] = one.sharedrun.lease_hosts("w1", 1, 0.3)
        assert a.site == "a.test"
        assert [i.url for i in one.sharedrun.lease_urls(a, 16, budget)] == [
            f"http://a.test/p{i}" for i in range(3)]
        assert one.sharedrun.pages_left(*budget) == 0
        [b] = two.sharedrun.lease_hosts("w2", 1, 30, pages=False)  # c.test has only a page pending
        assert b.site == "b.test"
        assert [i.url for i in two.sharedrun.lease_urls(b, 16, budget)] == ["http://b.test/logo.png"]
        assert two.sharedrun.lease_hosts("w2", 1, 30, pages=False) == []
        # the pages left pending do not hold the run open once its budget is spent
        assert two.sharedrun.unfinished(run.run_id) == 10 \
            and two.sharedrun.unfinished(run.run_id, False) == 5
        time.sleep(0.35)  # w1's lease expires: w2 takes a.test over, and its pages
        [taken] = two.sharedrun.lease_hosts("w2", 1, 30, pages=False)
        assert taken.site == "a.test" and two.sharedrun.pages_left(*budget) == 3
        assert [i.url for i in two.sharedrun.lease_urls(taken, 2, budget)] == [
            "http://a.test/p0", "http://a.test/p1"]
        assert [i.url for i in two.sharedrun.lease_urls(taken, 16, budget)] == ["http://a.test/p2"]
        assert [i.url for i in two.sharedrun.lease_urls(taken, 16, budget)] == [
            "http://a.test/style.css"]
        assert [i.url for i in two.sharedrun.lease_urls(taken, 16, None)] == ["http://a.test/p3"]
    finally:
        one.close()
        two.close()


def test_two_workers_stop_at_the_runs_max_pages_together(shared: Any) -> None:
    tomls = [worker_folder(shared.tmp, f"w{i}", shared.site.base, shared.store,
                           max_pages=7) for i in (1, 2)]
    codes, outs = run_workers_at_once(shared, tomls)
    assert codes == [4, 4], outs
    with psycopg.connect(shared.dsn) as db:
        pages = dict(db.execute("SELECT state, count(*) FROM urls WHERE mode='page' "
                                "GROUP BY state").fetchall())
        runs = db.execute("SELECT state, exit_code FROM runs").fetchall()
    assert pages.get("done", 0) + pages.get("failed", 0) == 7 and "leased" not in pages
    assert pages["pending"] > 0 and runs == [("limit", 4)]
    assert any("the run stopped at [scope] max_pages" in out for out in outs), outs
    assert len(check_exactly_once(shared.dsn, shared.store, "limit")) >= 7


def test_a_workers_folder_is_not_read_as_the_runs_archive(shared: Any) -> None:
    """A worker's folder holds its own WARC files and no manifest: the commands that read
    a local archive say so and name what reads the run (its store, its database), and
    `mirror index` does not rewrite the index from that part of the run."""
    toml = worker_folder(shared.tmp, "w1", shared.site.base, shared.store)
    assert run_worker(toml, shared.dsn, "w1").returncode == 0
    archive = toml.parent / "archive"
    index_before = (archive / "index.cdxj").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def mirror(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mirror", args[0], str(toml), *args[1:]],
                              capture_output=True, text=True, env=env, timeout=60, check=False)
    for args in (["status"], ["runs"], ["search", "words"], ["verify"], ["index"],
                 ["export", "--to", str(shared.tmp / "local")], ["prune", "--keep-last", "1"]):
        out = mirror(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert f"{archive} is the folder of worker w1 of a crawl shared through PostgreSQL" \
            in out.stderr and "--from-store" in out.stderr, (args, out.stderr)
    assert (archive / "index.cdxj").read_bytes() == index_before
    assert not (shared.tmp / "local").exists()
    out = mirror("export", "--from-store", "--to", str(shared.tmp / "whole"))
    assert out.returncode == 0 and (shared.tmp / "whole" / "index.html").is_file(), out.stderr
    # a later run of its own in that folder (no --db) makes it a local archive again
    assert workerfolder.shared_worker_note(archive) is not None
    Manifest(archive / "manifest.sqlite3").close()
    assert workerfolder.shared_worker_note(archive) is None


@pytest.mark.parametrize(("args", "message"), [
    (["--join"], "--join works only with --db"),
    (["--db", "sqlite:///x"], "expected a PostgreSQL URL"),
    (["--db", "postgresql://u@127.0.0.1:1/x", "--worker-id", "a b"], "worker id 'a b'"),
    (["--db", "postgresql://u@127.0.0.1:1/x", "--lease-ttl", "5"],
     "--lease-ttl 5: expected at least 63 seconds"),
    (["--db", "postgresql://u@127.0.0.1:1/x", "--new-run"], "--new-run does not go with"),
])
def test_the_shared_options_say_what_is_wrong(tmp_path: Path, args: list[str],
                                              message: str) -> None:
    toml = write_config(tmp_path, ["http://127.0.0.1:9/"])
    out = subprocess.run([sys.executable, "-m", "mirror", "run", str(toml), *args],
                         capture_output=True, text=True, timeout=30,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert out.returncode == 2 and message in out.stderr, out.stderr
