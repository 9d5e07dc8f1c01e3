"""The bundled demo site, its static server, and `mirror demo`: serve the site, mirror it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from mirror.config import ConfigError, SiteConfig, load_config

#: runs a crawl of a site file's config to its end: the exit code
Crawl = Callable[[SiteConfig], Awaitable[int]]


async def run_demo(folder: Path, crawl: Crawl) -> int:
    """Serve the demo site on 127.0.0.1, write `folder/site.toml` for it and crawl it into
    `folder/archive`. The site comes back on the port of the last demo, so that a second
    demo is an incremental run."""
    from mirror.demo.sitesrv import start_site_server

    folder.mkdir(parents=True, exist_ok=True)
    site = folder / "site.toml"
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
                "# written by `mirror demo`, which serves the demo site on this port again\n"
                f'[site]\nname = "demo"\nstart_urls = ["{base}"]\noutput_dir = "archive"\n'
                "\n[crawl]\nworkers = 4\n",
                encoding="utf-8",
            )
            return await crawl(load_config(site))
        finally:
            await runner.cleanup()


def demo_port(site: Path) -> int:
    """The port an earlier `mirror demo` wrote into site.toml, or 0 (any)."""
    try:
        start = load_config(site).site.start_urls
    except ConfigError:  # no demo yet, or a file the user changed past reading
        return 0
    parts = [urlsplit(u) for u in start]
    return next((p.port for p in parts if p.hostname == "127.0.0.1" and p.port), 0)
