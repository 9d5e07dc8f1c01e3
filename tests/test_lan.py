"""`mirror serve --lan` and `mirror ui --lan`: read-only on the local network behind a token
that becomes a cookie, printed with a QR code. The servers run as a user starts them, in
processes of their own on loopback (`--lan --host 127.0.0.1`), stopped by their pid."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import offline_site as site_def
import pytest
import segno
from bs4 import BeautifulSoup
from uiproc import UiProcess, csrf_of, site_file

from mirror import lan
from mirror.cli.main import main
from mirror.webapp import session_value

START = 20.0  # seconds for a server to print its address
OPEN = re.compile(r"^\s*open (http://\S+/)\?token=(\S+)$")
HALF_BLOCKS = {" ": (True, True), "\u2580": (False, True), "\u2584": (True, False),
               "\u2588": (False, False)}  # (top dark, bottom dark): light is drawn


# -- the pure parts ----------------------------------------------------------------------------


@pytest.mark.parametrize(("candidates", "chosen"), [
    (["192.168.1.20"], "192.168.1.20"),
    (["127.0.0.1", "127.0.1.1", "10.0.0.7"], "10.0.0.7"),  # Debian names itself 127.0.1.1
    (["8.8.8.8", "172.16.4.2"], "172.16.4.2"),  # a public address is not the local network
    (["169.254.3.4"], "169.254.3.4"),  # link-local: two machines on one cable, no router
    (["0.0.0.0", "224.0.0.1", "fd00::5", "fe80::1", "not an address"], None),
    ([], None),
])
def test_the_lan_address_is_a_private_or_link_local_ipv4_one(
        candidates: list[str], chosen: str | None) -> None:
    assert lan.choose(candidates) == chosen


def test_without_a_local_network_the_error_says_what_to_do(monkeypatch: Any) -> None:
    monkeypatch.setattr(lan, "_routed", lambda: ["8.8.4.4"])
    monkeypatch.setattr(lan, "_named", lambda: ["127.0.1.1"])
    with pytest.raises(lan.LanError, match=r"^no local network address found; use --host"):
        lan.lan_address()
    monkeypatch.setattr(lan, "_named", lambda: ["127.0.1.1", "192.168.8.3"])
    assert lan.lan_address() == "192.168.8.3"


def test_the_machines_own_lan_address_if_it_has_one() -> None:
    try:
        found = lan.lan_address()
    except lan.LanError:
        return  # a machine on no network: the error is the answer (above)
    assert lan.is_lan(found)


def test_lan_host_is_the_given_address_or_the_lan_one_but_never_all(monkeypatch: Any) -> None:
    monkeypatch.setattr(lan, "lan_address", lambda: "10.1.2.3")
    assert lan.lan_host(None) == "10.1.2.3"
    assert lan.lan_host("127.0.0.1") == "127.0.0.1"
    for every in ("0.0.0.0", "::", "[::]"):
        with pytest.raises(lan.LanError, match="not all of them"):
            lan.lan_host(every)


def qr_modules(block: list[str]) -> list[list[bool]]:
    """The modules (True: dark) a QR code printed with half blocks shows."""
    rows: list[list[bool]] = []
    for line in block:
        pairs = [HALF_BLOCKS[c] for c in line]
        rows += [[top for top, _ in pairs], [bottom for _, bottom in pairs]]
    return rows


def qr_of(url: str) -> list[list[bool]]:
    """The modules of `url`'s QR code, quiet zone included; an odd last row is padded."""
    rows = [[bool(m) for m in row] for row in segno.make_qr(url).matrix_iter(border=4)]
    return rows + [[True] * len(rows[0])] * (len(rows) % 2)


def test_the_qr_code_is_the_urls_and_fits_a_terminal() -> None:
    url = "http://192.168.178.123:65535/?token=" + "x" * 32  # as long as they get
    block = lan.qr_text(url).splitlines()
    assert qr_modules(block) == qr_of(url)
    assert qr_modules(block) != qr_of(url.replace("x", "y", 1))
    width = len(block[0])
    assert width <= 80 and len(block) <= 30 and (width - 8 - 17) % 4 == 0  # a QR, not Micro


def test_the_notice_names_the_address_the_risk_and_the_token() -> None:
    text = lan.notice("http://10.0.0.2:8080/", "s3cret", "the archive")
    lines = text.splitlines()
    assert "read-only on the local network at http://10.0.0.2:8080/" in lines[0]
    assert "whoever on your network opens this address can read the archive" in lines[1]
    assert OPEN.match(lines[2]) and lines[2].endswith("http://10.0.0.2:8080/?token=s3cret")
    assert qr_modules(lines[4:]) == qr_of("http://10.0.0.2:8080/?token=s3cret")
    plain = lan.notice("http://10.0.0.2:8080/", "s3cret", "the archive", "latin-1")
    assert "no QR code" in plain and "\u2588" not in plain


def test_cli_lan_errors_are_usage_errors(tmp_path: Path, monkeypatch: Any,
                                         capsys: Any) -> None:
    config = history_site(tmp_path)
    monkeypatch.setattr(lan, "_routed", list)
    monkeypatch.setattr(lan, "_named", list)
    assert main(["serve", str(config), "--lan"]) == 2
    assert "no local network address found; use --host ADDRESS" in capsys.readouterr().err
    assert main(["ui", str(tmp_path), "--lan", "--host", "0.0.0.0"]) == 2
    assert "--lan --host 0.0.0.0: give one address" in capsys.readouterr().err


# -- the servers -------------------------------------------------------------------------------


def history_site(folder: Path) -> Path:
    site_def.write_history(folder / "archive")
    config = folder / "site.toml"
    config.write_text('[site]\nname = "h"\nstart_urls = ["http://history.test/"]\n'
                      'output_dir = "archive"\n')
    return config


@dataclass
class Served(UiProcess):
    """`mirror serve` or `mirror ui` as a user starts it, stopped by its pid (UiProcess's
    stop); its output read with a deadline up to the address with its token and, with
    --lan, the QR code after it."""

    qr: list[str] = field(default_factory=list)  # the printed QR code's lines

    @classmethod
    def launch(cls, *args: str) -> Served:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mirror", *args], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, encoding="utf-8",
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"})
        served = cls(Path(args[1]), proc, "", "")  # the library, or the site file served
        try:
            served._announcement("--lan" in args)
        except BaseException:
            served.stop()
            raise
        return served

    def _announcement(self, qr: bool) -> None:
        """Read up to the address with its token, then the QR code (ended by an empty line):
        from the pipe itself (select, os.read), so that a silent server fails in time."""
        assert self.proc.stdout is not None
        pipe, pending, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + START
        while (found := _announced(self.lines, qr)) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                raise AssertionError(f"no address printed in {START}s: {self.lines}")
            chunk = os.read(pipe, 65536)
            if not chunk:
                raise AssertionError(f"the server ended: {self.lines}")
            *complete, pending = (pending + chunk).split(b"\n")
            self.lines += [line.decode() for line in complete]
        url, self.qr = found
        self.base, _, self.token = url.partition("?token=")

    @property
    def url(self) -> str:
        return f"{self.base}?token={self.token}"

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1].rstrip("/"))


def _announced(lines: list[str], qr: bool) -> tuple[str, list[str]] | None:
    """(the address with its token, the QR code's lines) once `lines` hold them all."""
    for at, line in enumerate(lines):
        if found := OPEN.match(line):
            if not qr:
                return f"{found[1]}?token={found[2]}", []
            code = lines[at + 2:]  # after "or scan it with a phone:"
            if "" in code:
                return f"{found[1]}?token={found[2]}", code[:code.index("")]
    return None


@contextmanager
def running(*args: str) -> Iterator[Served]:
    served = Served.launch(*args)
    try:
        yield served
    finally:
        assert served.stop() == 0, served.lines


def browser() -> aiohttp.ClientSession:
    """A client that keeps cookies of IP hosts, as browsers do; bounded in time."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                 timeout=aiohttp.ClientTimeout(total=20))


@pytest.fixture(scope="module")
def serve_lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    config = history_site(tmp_path_factory.mktemp("serve"))
    with running("serve", str(config), "--lan", "--host", "127.0.0.1", "--port", "0") as served:
        yield served


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of one site, `h`, with an archive."""
    folder = tmp_path_factory.mktemp("library")
    site_file(folder, "h", "http://history.test/")
    site_def.write_history(folder / "archive" / "h")
    return folder


@pytest.fixture(scope="module")
def ui_lan(library: Path) -> Iterator[Served]:
    with running("ui", str(library), "--lan", "--host", "127.0.0.1", "--port", "0") as served:
        yield served


@pytest.fixture(scope="module")
def ui_local(library: Path) -> Iterator[Served]:
    """The same library in a plain `mirror ui`: what --lan takes away is there."""
    with running("ui", str(library), "--no-browser", "--port", "0") as served:
        yield served


@pytest.mark.parametrize("command", ["serve_lan", "ui_lan"])
def test_the_printed_address_and_qr_code(command: str, request: pytest.FixtureRequest) -> None:
    served: Served = request.getfixturevalue(command)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{32}", served.url), served.url
    what = "the archive" if command == "serve_lan" else "the library and its archives"
    assert any(f"whoever on your network opens this address can read {what}; Ctrl-C stops"
               in line for line in served.lines)
    assert any(f"read-only on the local network at {served.base}" in line
               for line in served.lines)
    assert qr_modules(served.qr) == qr_of(served.url)


async def test_serve_lan_lets_in_only_the_browser_that_opened_the_address(
        serve_lan: Served) -> None:
    base, token, port = serve_lan.base, serve_lan.token, serve_lan.port
    async with browser() as phone:
        for address in (base, base + "?token=wrong", base + "?token="):
            async with phone.get(address) as r:
                assert r.status == 403 and "?token=" in await r.text(), address
        async with phone.get(serve_lan.url, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/"
            cookie = r.cookies[f"mirror_serve_{port}"]  # cookies ignore ports: one per port
            assert cookie.value == session_value(token, "127.0.0.1") != token
            assert cookie["httponly"] and cookie["samesite"] == "Strict"
        async with phone.get(base) as r:  # the jar has the cookie now
            assert r.status == 200 and "archived pages" in await r.text()
        async with phone.get(f"{base}2024/{site_def.HISTORY_URL}") as r:
            assert r.status == 200 and "first version" in await r.text()
    # the token in a deeper address: the same page without it
    async with browser() as phone, phone.get(
            f"{base}2024/{site_def.HISTORY_URL}?token={token}", allow_redirects=False) as r:
        assert r.status == 303
        assert r.headers["Location"] == f"/2024/{site_def.HISTORY_URL}"
    # the right token under another name (another port's cookie) does not open it
    async with aiohttp.ClientSession(cookies={
            f"mirror_serve_{port + 1}": session_value(token, "127.0.0.1")}) as other, \
            other.get(base) as r:
        assert r.status == 403


async def test_serve_lan_is_read_only(serve_lan: Served) -> None:
    async with aiohttp.ClientSession(cookies={f"mirror_serve_{serve_lan.port}": session_value(
            serve_lan.token, "127.0.0.1")}) as phone:
        async with phone.get(serve_lan.base) as r:
            assert r.status == 200  # the cookie opens it: refusals below are the methods'
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            async with phone.request(method, serve_lan.base + "_search",
                                     data={"q": "x"}) as r:
                assert r.status == 405, method
                assert r.headers["Allow"] == "GET, HEAD" and "read-only" in await r.text()


@pytest.mark.parametrize("command", ["serve_lan", "ui_lan"])
async def test_a_foreign_host_header_is_refused(command: str,
                                                request: pytest.FixtureRequest) -> None:
    served: Served = request.getfixturevalue(command)
    async with browser() as phone:
        async with phone.get(served.url) as r:
            assert r.status == 200
        for host in (f"evil.test:{served.port}", f"127.0.0.1.nip.io:{served.port}",
                     "127.0.0.1:1"):
            async with phone.get(served.base, headers={"Host": host}) as r:
                assert r.status == 421, host
        async with phone.get(served.base, headers={"Host": f"localhost:{served.port}"}) as r:
            assert r.status == 200


async def test_ui_lan_asks_for_the_token_then_a_cookie(ui_lan: Served) -> None:
    async with browser() as phone:
        async with phone.get(ui_lan.base) as r:
            assert r.status == 403 and "access token" in await r.text()
        async with phone.get(ui_lan.url, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/"
            cookie = r.cookies["mirror_ui"]
            assert cookie["httponly"] and cookie["samesite"] == "Lax"
        async with phone.get(ui_lan.base + "site/h") as r:
            assert r.status == 200 and "<h1>h</h1>" in await r.text()


def actions(page: str) -> dict[str, list[str]]:
    """What on an app page could change something: forms that post, and the links to the
    pages that hold such forms (add a site, settings)."""
    soup = BeautifulSoup(page, "html.parser")
    posting = [f for f in soup.find_all("form") if str(f.get("method", "get")).lower() != "get"]
    return {
        "forms": [str(f.get("action")) for f in posting],
        "buttons": [b.get_text(strip=True) for f in posting for b in f.find_all("button")],
        "links": [str(a["href"]) for a in soup.find_all("a", href=True)
                  if a["href"] == "/add" or str(a["href"]).endswith(("/settings", "#export"))],
    }


async def pages(served: Served, *paths: str) -> list[str]:
    async with browser() as phone:
        async with phone.get(served.url) as r:
            assert r.status == 200
        out = []
        for path in paths:
            async with phone.get(served.base + path.lstrip("/")) as r:
                assert r.status == 200, path
                out.append(await r.text())
        return out


async def test_ui_lan_pages_show_no_action(ui_lan: Served, ui_local: Served) -> None:
    paths = ("/", "/site/h", "/site/h/settings", "/add")
    for page, path in zip(await pages(ui_local, *paths), paths, strict=True):
        assert "read-only" not in page, path
        if path != "/add":
            assert BeautifulSoup(page, "html.parser").find("form", method="post"), path
    home, site, settings, add = (actions(p) for p in await pages(ui_local, *paths))
    assert {"/site/h/run", "/site/h/verify"} <= set(home["forms"])
    assert "/add" in home["links"] and "/site/h/settings" in home["links"]
    assert "/site/h/export" in site["forms"] and "Save" in settings["buttons"]
    assert add["forms"] == ["/add"]

    for page, path in zip(await pages(ui_lan, *paths), paths, strict=True):
        soup = BeautifulSoup(page, "html.parser")
        assert actions(page) == {"forms": [], "links": [], "buttons": []}, path
        note = soup.find(class_="read-only")
        assert note and note.get_text() == "read-only: served on the local network", path
    home_page = (await pages(ui_lan, "/"))[0]
    assert 'href="/site/h/browse"' in home_page  # reading stays: browse, runs, search
    assert "output_dir" in (await pages(ui_lan, "/site/h/settings"))[0]  # the file, as text


async def test_ui_lan_refuses_a_change_that_would_pass_every_other_door(
        ui_lan: Served, ui_local: Served, library: Path) -> None:
    site_text = (library / "h.toml").read_text()
    answers = []
    for served in (ui_local, ui_lan):
        async with browser() as phone:
            async with phone.get(served.url) as home:
                csrf = csrf_of(await home.text())
            async with phone.post(served.base + "site/h/stop", data={"csrf": csrf},
                                  headers={"Origin": served.base.rstrip("/")},
                                  allow_redirects=False) as r:
                answers.append((r.status, await r.text()))
    # without --lan the request passes the token, Origin and CSRF checks: the stop handler
    # answers that no run is going on; with --lan the read-only rule refuses it first
    assert answers[0][0] == 409 and "no run is going on" in answers[0][1]
    assert answers[1][0] == 405 and "read-only" in answers[1][1]

    async with browser() as phone:
        async with phone.get(ui_lan.url) as home:
            csrf = csrf_of(await home.text())
        origin = {"Origin": ui_lan.base.rstrip("/"), "X-CSRF-Token": csrf}
        for method, path, data in [
                ("POST", "add", {"csrf": csrf, "site.start_urls": "http://new.test/"}),
                ("POST", "site/h/settings", {"csrf": csrf, "crawl.workers": "9"}),
                ("POST", "site/h/settings/file", {"csrf": csrf, "text": "", "seen": ""}),
                ("POST", "site/h/run", {"csrf": csrf}),
                ("POST", "site/h/export", {"csrf": csrf, "kind": "wacz"}),
                ("POST", "site/h/remove", {"csrf": csrf, "delete_archive": "1"}),
                ("PUT", "site/h/settings", {}), ("DELETE", "site/h", {})]:
            async with phone.request(method, ui_lan.base + path, data=data, headers=origin,
                                     allow_redirects=False) as r:
                assert r.status == 405 and "read-only" in await r.text(), (method, path)
    assert sorted(p.name for p in library.glob("*.toml")) == ["h.toml"]
    assert (library / "h.toml").read_text() == site_text
    assert not (library / "exports").exists()


async def test_ui_lan_replay_servers_ask_for_the_cookie(ui_lan: Served) -> None:
    async with browser() as phone:
        async with phone.get(ui_lan.url) as r:
            assert r.status == 200
        async with phone.get(ui_lan.base + "site/h/browse", allow_redirects=False) as r:
            assert r.status == 303
            replay = r.headers["Location"]
        assert replay.startswith("http://127.0.0.1:") and not replay.startswith(ui_lan.base)
        assert ui_lan.token not in replay  # a token of its own
        async with phone.get(replay.partition("?")[0]) as r:  # the app's cookie: no entry
            assert r.status == 403
        async with phone.get(replay) as r:  # its token once, then its own cookie
            assert r.status == 200 and "archived pages" in await r.text()
            replay = str(r.url)
        async with phone.post(replay, data={"q": "x"}) as r:
            assert r.status == 405
    async with browser() as stranger, stranger.get(replay) as r:
        assert r.status == 403


@pytest.mark.parametrize("command", ["serve_lan", "ui_lan"])
async def test_a_cookie_sent_to_another_port_opens_nothing_from_another_machine(
        command: str, request: pytest.FixtureRequest) -> None:
    """Cookies ignore ports: the phone's cookie goes to every server at this address (e.g.
    another user's, by a link). It is bound to the phone's address: from any other, the
    copy is refused; the token itself is never a cookie."""
    served: Served = request.getfixturevalue(command)
    phone = aiohttp.TCPConnector(local_addr=("127.0.0.7", 0))
    async with aiohttp.ClientSession(connector=phone, cookie_jar=aiohttp.CookieJar(
            unsafe=True)) as device, device.get(served.url) as r:
        assert r.status == 200
        cookies = {c.key: c.value for c in device.cookie_jar}
    assert served.token not in cookies.values()
    for source in ("127.0.0.1", "127.0.0.8"):  # this machine, another device
        other = aiohttp.TCPConnector(local_addr=(source, 0))
        async with aiohttp.ClientSession(connector=other, cookies=cookies) as thief, \
                thief.get(served.base) as r:
            assert r.status == 403, source


@pytest.mark.slow
@pytest.mark.browser
async def test_ui_lan_on_a_phone_sized_browser(ui_lan: Served, tmp_path: Path) -> None:
    from replayers import chromium

    shots = Path(os.environ.get("MIRROR_SCREENSHOTS") or tmp_path)
    async with chromium() as chrome:
        context = await chrome.new_context(viewport={"width": 390, "height": 844})
        page = await context.new_page()
        page.set_default_timeout(30_000)
        await page.goto(ui_lan.url)  # as from the scanned code
        assert page.url == ui_lan.base  # the token has left the address bar
        assert await page.locator(".read-only").inner_text() == \
            "read-only: served on the local network"
        assert await page.locator("tr.site").count() == 1
        assert await page.locator("form[method=post], a[href='/add']").count() == 0
        # the library fits a phone's width: no sideways scrolling
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        await page.screenshot(path=str(shots / "ui-lan-phone.png"), full_page=True)
        await page.click("text=Browse")
        await page.wait_for_load_state()
        assert "archived pages" in await page.content()
        await context.close()
