"""`mirror ui` as a user starts it, in a process of its own, plus a library of local sites."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from conftest import TestSite

from mirror.layout import ArchiveLayout
from mirror.manifest.reader import ManifestError, ManifestReader
from mirror.webapp import session_value

ADDRESS = re.compile(r"open (http://\S+/)\?token=(\S+)")


@dataclass
class UiProcess:
    """A running `mirror ui --no-browser --port 0`; stopped by its pid."""

    library: Path
    proc: subprocess.Popen[str]
    base: str  # http://127.0.0.1:PORT/
    token: str
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, library: Path, *extra: str, timeout: float = 20.0,
              port: str | None = "0", command: list[str] | None = None,
              cwd: Path | None = None, env: dict[str, str] | None = None) -> UiProcess:
        """With `port` None, no --port: the port of the last start when it is free.
        command: what starts `mirror ui` (default: this Python's, over `library`)."""
        ports = ["--port", port] if port is not None else []
        proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", "mirror", "ui", str(library)]), "--no-browser",
             *ports, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=cwd, env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"})
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if found := ADDRESS.search(line):
                return cls(library, proc, found[1], found[2], lines)
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        raise AssertionError(f"mirror ui printed no address: {''.join(lines)}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.lines += self.proc.stdout.readlines()
            self.proc.stdout.close()
        return self.proc.returncode

    def session(self) -> aiohttp.ClientSession:
        """A client with the access cookie, as a browser has after opening the address (made
        for its address, 127.0.0.1); it keeps the cookies of servers
        known by an IP address too, as browsers do."""
        return aiohttp.ClientSession(cookies={"mirror_ui": self.cookie},
                                     cookie_jar=aiohttp.CookieJar(unsafe=True))

    @property
    def cookie(self) -> str:
        return session_value(self.token, "127.0.0.1")

    @property
    def origin(self) -> str:
        return self.base.rstrip("/")


def archive_runs(archive: Path) -> list[Any]:
    """The runs an archive's manifest holds; none while its first run is creating it."""
    try:
        manifest = ManifestReader(ArchiveLayout(archive).manifest)
    except ManifestError:  # none yet, or the first run is making it (no tables yet)
        return []
    try:
        return manifest.runs.all()
    finally:
        manifest.close()


async def crawl(site_file: Path, *args: str, timeout: float = 60) -> int:
    """`mirror run -q SITE_FILE` as from a terminal, awaited without blocking the event
    loop the test sites run on; its exit code."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", "run", "-q", *args, str(site_file),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        return await asyncio.wait_for(proc.wait(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf" content="([^"]+)"', page)
    assert found, "no CSRF field on the page"
    return found[1]


async def post(ui: UiProcess, session: aiohttp.ClientSession, path: str,
               data: dict[str, str], **headers: str) -> tuple[int, str]:
    """A form POST as the app's own page sends it (Origin and CSRF token unless overridden)."""
    async with session.get(ui.base) as home:
        token = csrf_of(await home.text())
    hdrs = {"Origin": ui.origin, **headers}
    async with session.post(ui.base + path.lstrip("/"), data={"csrf": token, **data},
                            headers=hdrs, allow_redirects=False) as r:
        return r.status, await r.text()


def site_file(library: Path, name: str, start: str, **crawl: Any) -> Path:
    """A site file in the library, archive beside it, robots.txt off (the sites have none),
    the browser off (a page with a script and little text would be loaded in Chromium:
    conftest.write_config says why)."""
    lines = ["# written by the test", "[site]", f'name = "{name}"', f'start_urls = ["{start}"]',
             f'output_dir = "archive/{name}"', "", "[scope]", "robots = false", "",
             "[browser]", 'mode = "off"', "", "[crawl]"]
    lines += [f"{k} = {v}" for k, v in crawl.items()]
    path = library / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def chain_site(site: TestSite, pages: int, *, extra_head: str = "") -> TestSite:
    """index -> p0..pN-1, each page linking to the next two (a crawl that takes a while at
    the site's latency); every page sets a cookie the replay must never pass on."""
    links = "".join(f'<a href="/p{i}.html">page {i}</a> ' for i in range(pages))
    cookie = {"Set-Cookie": "session=archived-secret; Path=/"}
    site.page("/", f"<html><head><title>Home</title>{extra_head}</head>"
                   f"<body><h1>Home</h1>{links}</body></html>", headers=cookie)
    for i in range(pages):
        site.page(f"/p{i}.html", f"<html><head><title>Page {i}</title></head><body>"
                  f'<p>text {i}</p><a href="/p{(i + 1) % pages}.html">next</a>'
                  f'<a href="/missing{i % 3}.html">gone</a></body></html>', headers=cookie)
    return site


async def until(predicate: Any, timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll `predicate` (a function, maybe async) without blocking the test's event loop,
    on which the test site runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def mirror_cmd(*args: str) -> tuple[int, str]:
    """`mirror ARGS...` in a process of its own: (exit code, what it printed on stdout)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode()
