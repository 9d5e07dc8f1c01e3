"""Shared fixtures: a declarative test site on 127.0.0.1; helpers to crawl it and read results."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from mirror.archive.warcwriter import utc_now
from mirror.config import SiteConfig, load_config
from mirror.crawl.crawler import Crawler, RunResult
from mirror.manifest.reader import ManifestReader
from mirror.run.runreport import write_missing_report, write_report
from mirror.verify import check_archive

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class TestSite:
    """Routes by path (query included when given), a request log and an in-flight gauge."""

    __test__ = False  # not a test class for pytest

    routes: dict[str, Handler] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    latency: float = 0.0
    base: str = ""

    def page(self, path: str, body: str | bytes, *, status: int = 200,
             content_type: str = "text/html; charset=utf-8",
             headers: dict[str, str] | None = None) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body

        async def handler(request: web.Request) -> web.StreamResponse:
            hdrs = {"Content-Type": content_type, **(headers or {})}
            return web.Response(body=data, status=status, headers=hdrs)

        self.routes[path] = handler

    def redirect(self, path: str, target: str, status: int = 301) -> None:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": target})

        self.routes[path] = handler

    def handler(self, path: str, fn: Handler) -> None:
        self.routes[path] = fn

    def count(self, path: str) -> int:
        return self.log.count(path)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        key = request.path_qs
        self.log.append(key)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            fn = self.routes.get(key) or self.routes.get(request.path)
            if fn is None:
                return web.Response(status=404, text="not found", content_type="text/html")
            return await fn(request)
        finally:
            self.in_flight -= 1

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app


@pytest.fixture
async def make_site(aiohttp_server: Any) -> Callable[[], Awaitable[TestSite]]:
    """`site = await make_site()` then add routes; the server runs on 127.0.0.1 until teardown."""

    async def factory() -> TestSite:
        site = TestSite()
        server = await aiohttp_server(site.app(), host="127.0.0.1")
        site.base = str(server.make_url("/"))
        return site

    return factory


@pytest.fixture
def site_in_thread() -> Iterator[Callable[[], TestSite]]:
    """`site = site_in_thread()` for a synchronous test, one that calls `mirror.cli.main`
    (which runs an event loop of its own): the server runs on 127.0.0.1 in a thread with its
    own event loop until teardown."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-site", daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    async def serve(site: TestSite) -> str:
        runner = web.AppRunner(site.app())
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}/"

    def factory() -> TestSite:
        site = TestSite()
        site.base = asyncio.run_coroutine_threadsafe(serve(site), loop).result(10)
        return site

    try:
        yield factory
    finally:
        for runner in runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def write_config(folder: Path, start_urls: list[str], **sections: dict[str, Any]) -> Path:
    """A site.toml in `folder`; `sections` maps section name -> extra keys.

    robots.txt is off unless a test turns it on: most tests assert the exact request log,
    and robots.txt has tests of its own (test_faults, test_cli). So is the browser
    ([browser] mode = "off"): a small fixture page with a script and little text is
    flagged as built by scripts, and the default mode ("auto") would load it in Chromium;
    the tests about the browser set the mode they test."""
    sections = {**sections, "scope": {"robots": False, **sections.get("scope", {})},
                "browser": {"mode": "off", **sections.get("browser", {})}}
    lines = ["[site]", 'name = "test"', f"start_urls = {_toml(start_urls)}",
             'output_dir = "archive"']
    for section, values in sections.items():
        if section == "site":
            lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
            continue
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
    path = folder / "site.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


@dataclass
class Crawl:
    """What a finished crawl left behind, for assertions."""

    result: RunResult
    root: Path

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.archive / "warc")

    def responses(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.records():
            if r["type"] == "response":
                out.setdefault(r["uri"], []).append(r)
        return out

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.archive / "manifest.sqlite3")

    def states(self) -> dict[str, str]:
        with self.db() as db:
            return dict(db.execute("SELECT url, state FROM urls"))

    def assert_verifies(self) -> None:
        """`mirror verify` finds nothing wrong: WARC files, manifest and index agree."""
        manifest = ManifestReader(self.archive / "manifest.sqlite3")
        try:
            verdict = check_archive(self.archive, manifest)
        finally:
            manifest.close()
        assert verdict.problems == (), verdict.problems

    def skipped(self) -> dict[str, str]:
        with self.db() as db:
            return dict(db.execute("SELECT url, reason FROM urls WHERE state='skipped'"))


def read_records(warc_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, no_record_parse=False):
                http = rec.http_headers
                out.append({
                    "file": path.name,
                    "type": rec.rec_type,
                    "uri": rec.rec_headers.get_header("WARC-Target-URI"),
                    "headers": rec.rec_headers,
                    "http": http,
                    "status": int(http.get_statuscode()) if http and rec.rec_type == "response"
                    else None,
                    "payload": rec.raw_stream.read() if rec.rec_type == "response" else b"",
                })
    return out


class RunClock:
    """WARC dates for a test of several runs, without sleeping into the next second: the
    real time, 30 days back, plus an hour for each `next_run()`. So every run's 14-digit
    timestamps are later than the run before's, and all are in the past."""

    def __init__(self) -> None:
        self.shift = timedelta(days=-30)

    def next_run(self) -> None:
        self.shift += timedelta(hours=1)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.shift


async def crawl_to_end(cfg: SiteConfig, timeout: float = 60, **options: Any) -> RunResult:
    """One in-process `mirror run` as the CLI makes it: a report lost in a crash written
    first, the run, its report. `options` go to the Crawler (clock, warc_opener...)."""
    crawler = Crawler(cfg, **{"backoff_base": 0.01, "seed": 1, **options})
    try:
        write_missing_report(cfg, crawler.manifest)
        result = await asyncio.wait_for(crawler.run(), timeout=timeout)
        write_report(cfg, crawler.manifest, result.run_id)
    finally:
        crawler.close()
    return result


@pytest.fixture
def crawl(tmp_path: Path) -> Callable[..., Awaitable[Crawl]]:
    """`await crawl([start], crawl={"workers": 2})` runs one in-process crawl to the end;
    `clock=` sets the WARC dates (a `RunClock` to tell runs apart)."""

    async def run(start_urls: list[str], warc_opener: Any = None,
                  clock: Callable[[], datetime] | None = None,
                  **sections: dict[str, Any]) -> Crawl:
        sections.setdefault("crawl", {})
        sections["crawl"].setdefault("timeout", 10)
        cfg = load_config(write_config(tmp_path, start_urls, **sections))
        result = await crawl_to_end(cfg, warc_opener=warc_opener, clock=clock or utc_now)
        return Crawl(result, tmp_path)

    return run


@pytest.fixture(scope="session", autouse=True)
def ui_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`mirror ui` keeps its token and ports in $XDG_STATE_HOME (app/uistate.py): in a
    folder of the test session, never the home of whoever runs the tests; the processes
    the tests start inherit it."""
    folder = tmp_path_factory.mktemp("xdg-state")
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(folder)
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session", autouse=True)
def localhost_names() -> Iterator[None]:
    """Names under localhost are loopback (RFC 6761): browsers resolve them so, and so does
    a system with nss-myhostname or systemd-resolved; this one's resolver may not, so the
    test clients (aiohttp, urllib) get them from here. The app binds 127.0.0.1 and is known
    by such a name (webapp.local_name)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.lower().rstrip(".").endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]


@pytest.fixture
def ui(library: Path) -> Iterator[Any]:
    """A real `mirror ui` process over the test module's `library` fixture, stopped after."""
    from uiproc import UiProcess  # here: uiproc imports this module

    app = UiProcess.start(library)
    try:
        yield app
    finally:
        app.stop()


@pytest.fixture
async def session(ui: Any) -> AsyncIterator[aiohttp.ClientSession]:
    """A client of `ui` that holds its token cookie."""
    async with ui.session() as s:
        yield s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def server_process(argv: list[str], base: str, *, cwd: Path | None = None,
                         start_seconds: float = 30) -> AsyncIterator[str]:
    """Another program's server (pywb, kiwix-serve) started in a process group of its own,
    waited for until `base` answers 200 (at most start_seconds), stopped by its process id."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(int(start_seconds * 10)):
                try:
                    async with session.get(base) as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        yield base
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


async def crawl_twice(crawl: Callable[..., Awaitable[Crawl]], base: str,
                      before: Callable[[], None], after: Callable[[], None]
                      ) -> tuple[Crawl, Crawl]:
    """Two runs of the site at `base`: `before()` sets it up for the first, `after()` changes
    it for the second; the WARC dates of the second are an hour later (RunClock)."""
    clock = RunClock()
    before()
    first = await crawl([base], clock=clock)
    after()
    clock.next_run()
    return first, await crawl([base], clock=clock)


# -- PostgreSQL (the fleet): one real server per test session, a fresh database per test ---
@pytest.fixture(scope="session")
def pg_server_session() -> Iterator[Any]:
    """A real PostgreSQL server (tests/pgserver.py), or a skip that says why not."""
    import pgserver

    try:
        import psycopg  # noqa: F401 - the fleet extra
    except ImportError:
        pytest.skip("psycopg is not installed (pip install -e '.[fleet]')")
    reason = pgserver.why_not()
    if reason:
        pytest.skip(reason)
    with pgserver.pg_server() as server:
        yield server


@pytest.fixture
def pg_dsn(pg_server_session: Any, request: pytest.FixtureRequest) -> str:
    """The DSN of a new, empty database on the session's server."""
    import hashlib

    import pgserver

    name = "t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]
    return pgserver.create_database(pg_server_session, name)


# -- S3 (archives in object storage): moto for the fast tests, SeaweedFS as a real server ---
@pytest.fixture(scope="session")
def moto_server_session() -> Iterator[Any]:
    """moto's S3 server (tests/s3server.py) for the whole session, or a skip that says why."""
    import s3server

    reason = s3server.moto_available()
    if reason:
        pytest.skip(reason)
    with s3server.moto_s3() as server:
        yield server


@pytest.fixture
def s3(moto_server_session: Any, request: pytest.FixtureRequest,
       monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh bucket on the session's moto server: an `S3Server` whose `.url` is
    `s3://<bucket>`, with its AWS_* variables set in os.environ for the test."""
    import dataclasses
    import hashlib

    name = "t-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:20]
    url = moto_server_session.make_bucket(name)
    for key, value in moto_server_session.env.items():
        monkeypatch.setenv(key, value)
    return dataclasses.replace(moto_server_session, url=url)


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real SeaweedFS S3 server (`weed server -s3`) for the session, or a skip that says
    why. Its AWS_* variables are in `.env`; set them with monkeypatch in the test."""
    import s3server

    reason = s3server.seaweed_available()
    if reason:
        pytest.skip(reason)
    with s3server.seaweed_s3(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


# -- installs of mirror: the editable one the tests run in, a regular one in a fresh venv --
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def regular_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip install <this checkout>` (no -e) into a fresh venv without system site
    packages, its dependencies from pip's indexes and cache; the venv's bin folder. The
    source is copied first, so that the build leaves nothing in the checkout."""
    root = tmp_path_factory.mktemp("regular")
    source = root / "source"
    shutil.copytree(REPO / "mirror", source / "mirror",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                          "install", "--quiet", str(source)],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(params=["editable", pytest.param("regular", marks=pytest.mark.slow)])
def installed(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The bin folder of an install of mirror (its python, its `mirror` script), checked
    to be the kind the test names."""
    bin_dir = (Path(sys.executable).parent if request.param == "editable"
               else request.getfixturevalue("regular_install"))
    where = subprocess.run([str(bin_dir / "python"), "-c", "import mirror; print(mirror.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    inside = Path(where.stdout.strip()).is_relative_to(REPO)
    assert inside == (request.param == "editable"), where.stdout
    return bin_dir
