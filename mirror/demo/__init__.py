"""The bundled demo site, its static server, and `mirror demo`: serve the site, mirror it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from mirror.config import ConfigError, SiteConfig, load_config
from mirror.errors import UsageError

#: runs a crawl of a site file's config to its end: the exit code
Crawl = Callable[[SiteConfig], Awaitable[int]]


#: the first line of the site file `mirror demo` writes: a file without it is the user's
MARK = "# written by `mirror demo`, which serves the demo site on this port again"
#: the demo's site file in the library (its archive: the default, archive/demo)
SITE_FILE = "demo.toml"


class DemoError(UsageError):
    """The demo cannot be put in this library; str says why."""


async def run_demo(library: Path, crawl: Crawl) -> int:
    """Serve the demo site on 127.0.0.1, write `library/demo.toml` for it and crawl it
    into `library/archive/demo`, so that the library app shows it. The site comes back on
    the port of the last demo, so that a second demo is an incremental run."""
    from mirror.demo.sitesrv import start_site_server

    site = library / SITE_FILE
    if site.exists() and not site.read_text(encoding="utf-8", errors="replace").startswith(MARK):
        raise DemoError(f"{site}: a site file that `mirror demo` did not write is there; "
                        "move it, or give `mirror demo` another library folder")
    library.mkdir(parents=True, exist_ok=True)
    port = demo_port(site)
    with resources.as_file(resources.files("mirror.demo") / "site") as root:
        try:
            runner, base = await start_site_server(Path(root), port=port)
        except OSError:
            if not port:
                raise
            runner, base = await start_site_server(Path(root))
            print(f"port {port} is taken: the demo site moves, so every URL is new")
        try:
            print(f"demo site served at {base}")
            site.write_text(
                f'{MARK}\n[site]\nname = "demo"\nstart_urls = ["{base}"]\n'
                "\n[crawl]\nworkers = 4\n",
                encoding="utf-8",
            )
            return await crawl(load_config(site))
        finally:
            await runner.cleanup()


def demo_port(site: Path) -> int:
    """The port an earlier `mirror demo` wrote into its site file, or 0 (any)."""
    try:
        start = load_config(site).site.start_urls
    except ConfigError:  # no demo yet, or a file the user changed past reading
        return 0
    parts = [urlsplit(u) for u in start]
    return next((p.port for p in parts if p.hostname == "127.0.0.1" and p.port), 0)
