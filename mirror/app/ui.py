"""Starting `mirror ui`: bind, print the address with its token, open the browser, wait."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import webbrowser
from collections.abc import Callable
from pathlib import Path

from mirror.app.guard import Secrets
from mirror.app.server import LibraryApp
from mirror.webapp import HostNames, is_loopback, start_app, until_signalled


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_names(host: str) -> frozenset[str]:
    """The Host names (without port) a browser may use for the bound address beside the
    loopback ones: the address given, or for a wildcard (0.0.0.0, ::) this machine's names
    and addresses."""
    try:
        wildcard = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        wildcard = False
    if not wildcard:
        return frozenset({_shown(host).lower()})
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    return frozenset(_shown(n).lower() for n in names if n)


async def serve_library(folder: Path, *, host: str, port: int, open_browser: bool,
                        say: Callable[[str], None] = print) -> int:
    """Serve the library until SIGINT/SIGTERM. Runs started from the app go on after it."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = Secrets()
    names, exposed = host_names(host), not is_loopback(host)
    hosts = HostNames(names)
    app = LibraryApp(folder, keys=keys, hosts=hosts, replay_host=host,
                     extra_hosts=names, exposed=exposed)
    runner, base = await start_app(app.make(), host, port)
    bound = runner.addresses[0][1]
    hosts.bind(bound)
    if names - {"127.0.0.1", "localhost", "[::1]"}:
        base = f"http://{sorted(names)[0]}:{bound}/"
    address = f"{base}?token={keys.token}"
    try:
        say(f"mirror ui: the library {folder}")
        if exposed:
            say(f"  listening on {host}: whoever can reach port {bound} needs the token")
        say(f"  open {address}\n  (Ctrl-C stops the app; runs it started go on)")
        if open_browser:
            await asyncio.to_thread(webbrowser.open, address)
        await until_signalled()
    finally:
        await runner.cleanup()
    return 0
