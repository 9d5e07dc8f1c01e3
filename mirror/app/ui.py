"""Starting `mirror ui`: bind, print the address with its token, open the browser, wait."""

from __future__ import annotations

import asyncio
import webbrowser
from collections.abc import Callable
from pathlib import Path

from mirror.app.guard import Secrets
from mirror.app.server import LibraryApp
from mirror.app.uistate import StateFile, state_file
from mirror.webapp import (
    HostNames,
    derive,
    host_names,
    is_loopback,
    local_name,
    resolves_names,
    start_app_preferring,
    until_signalled,
)

__all__ = ["host_names", "serve_library"]


def app_token(kept: str, exposed: bool) -> str:
    """The token the app asks for: the one kept (app/uistate.py), or beyond loopback (--lan,
    --host) one made from it, so that an address given to a phone lets in nothing more
    than the read-only or exposed app it was printed for."""
    return derive(kept, "exposed") if exposed else kept


async def serve_library(folder: Path, *, host: str, port: int | None, open_browser: bool,
                        say: Callable[[str], None] = print,
                        lan: Callable[[str, str], str] | None = None,
                        db: str | None = None) -> int:
    """Serve the library until SIGINT/SIGTERM. Runs started from the app go on after it.
    With `lan` (--lan): read-only, the token asked by its replay servers too, no browser
    opened here (it is for another device), and `lan(base, token)` is what to print.
    With `db`, a Fleet page shows the fleet of that PostgreSQL database.
    The token and the port (when `port` is None and it is free) are those of the last
    start (app/uistate.py): the addresses, bookmarks and cookies of the app stay good.
    On loopback the app is at a name of its own under localhost (webapp.local_name), made
    from its token: its cookie goes to no other server of the machine."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = StateFile(state_file(folder), folder)
    exposed = lan is not None or not is_loopback(host)
    keys = Secrets(token=app_token(saved.state.token, exposed))
    named = not exposed and resolves_names(host)
    names = frozenset({local_name(keys.token, "app")}) if named else host_names(host)
    hosts = HostNames(names, loopback=not named)
    app = LibraryApp(folder, keys=keys, hosts=hosts, replay_host=host,
                     extra_hosts=names, exposed=not named, read_only=lan is not None,
                     fleet_db=db, saved=saved)
    runner, base = await start_app_preferring(app.make(), host,
                                              saved.state.port if port is None else port)
    bound = runner.addresses[0][1]
    hosts.bind(bound)
    base = hosts.base(base, bound)
    app.replays.library = base
    saved.state.port = bound
    await asyncio.to_thread(saved.try_save)
    try:
        say(f"mirror ui: the library {folder}")
        if db is not None:
            from mirror.manifest.db import shown

            say(f"  and the fleet at {shown(db, scheme=False)} (the Fleet page)")
        if lan is not None:
            say(lan(base, keys.token))
        else:
            if exposed:
                say(f"  listening on {host}: whoever can reach port {bound} needs the token")
            say(f"  open {base}?token={keys.token}\n  (Ctrl-C stops the app; runs it "
                "started go on)")
        if open_browser and lan is None:
            await asyncio.to_thread(webbrowser.open, f"{base}?token={keys.token}")
        await until_signalled()
    finally:
        await runner.cleanup()
    return 0
