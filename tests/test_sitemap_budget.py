"""Finding 4 of issue 32: a robots.txt leading to an index of large sitemaps. The run reads
them in time linear in the URLs they list, takes no more than [scope] max_sitemap_urls of
them (the rest counted under the rule sitemap-budget), goes on fetching pages, and answers
SIGTERM and SIGINT in every phase: while reading sitemaps, while crawling, while writing the
final index. Each stopped run exits 130 and resumes cleanly.

The servers are real (aiohttp on 127.0.0.1, sitemaps generated as they are streamed); the
runs are `mirror run` processes. No timing is asserted: the wait for an exit is the test's
timeout (timings are in bench/sitemap_signals.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from pathlib import Path

import pytest
from conftest import write_config
from sitemapsrv import SitemapSite
from test_cli import mirror

from mirror.model import SITEMAP_BUDGET, ExitCode


async def serve(aiohttp_server, **kw) -> SitemapSite:  # noqa: ANN001 - pytest fixture
    site = SitemapSite(**kw)
    server = await aiohttp_server(site.app(), host="127.0.0.1")
    site.base = str(server.make_url("/"))
    # the linked page is in no sitemap (there is no sitemap 99): found by link, never listed
    site.page("/", '<a href="/held">held</a><a href="/p/99/1">p</a>')
    site.page("/held", "at last")
    return site


def rows(archive: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(archive / "manifest.sqlite3") as db:
        return db.execute(sql).fetchall()


def report(archive: Path, run: int = 1) -> dict:
    return json.loads((archive / "reports" / f"{run}.json").read_text())


async def test_a_large_sitemap_index_costs_the_budget_and_pages_are_fetched(
        aiohttp_server, tmp_path: Path):
    site = await serve(aiohttp_server, sitemaps=10, per_sitemap=50_000)
    budget = 60_000
    write_config(tmp_path, [site.base], crawl={"workers": 4, "stop_grace": 2},
                 scope={"robots": True, "max_sitemap_urls": budget, "max_pages": 30})
    code, out, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=300)
    assert code == ExitCode.LIMIT, err  # max_pages reached, sitemap pages still waiting
    archive = tmp_path / "archive"
    (taken, beyond), = rows(archive, "SELECT SUM(listed - beyond), SUM(beyond) "
                                     "FROM sitemap_reads WHERE run_id=1")
    assert taken == budget  # exactly the budget was taken, from the index and the sitemaps
    sitemaps = {f"{site.base}sm/{i}.xml" for i in range(10)}
    read = {u for (u,) in rows(archive, "SELECT u.url FROM sitemap_reads r "
                                        "JOIN urls u ON u.id = r.url_id")}
    unread = {u for (u,) in rows(archive, "SELECT url FROM urls WHERE state='skipped' "
                                          f"AND reason='{SITEMAP_BUDGET}'")}
    assert read | unread == sitemaps | {site.base + "index.xml"} and not read & unread
    assert unread  # once the budget was spent, the sitemaps left were not fetched
    assert not {f"/sm/{i}.xml" for i in range(10)} & set(
        p for p in site.log if p in {u.removeprefix(site.base[:-1]) for u in unread})
    # only the budget's URLs are in the manifest (and the few of robots.txt, /, /held)
    (listed,), = rows(archive, "SELECT COUNT(*) FROM urls WHERE via='sitemap'")
    assert listed == budget + 1  # + the index, named by robots.txt
    counted = report(archive)["skipped"]
    assert counted[SITEMAP_BUDGET] == beyond + len(unread)
    assert counted[SITEMAP_BUDGET] > 0
    (pages,), = rows(archive, "SELECT COUNT(*) FROM urls WHERE state='done' "
                              "AND url LIKE '%/p/%'")
    assert pages >= 20  # pages were fetched, not only sitemaps



async def until(condition, what: str) -> None:  # noqa: ANN001 - a callable
    for _ in range(12_000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never saw {what}")


SIGNALS = [signal.SIGTERM, signal.SIGINT]


@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGTERM", "SIGINT"])
async def test_a_signal_while_reading_sitemaps(aiohttp_server, tmp_path: Path, sig):
    site = await serve(aiohttp_server, sitemaps=4, per_sitemap=50_000, hold={"/sm/3.xml"})
    write_config(tmp_path, [site.base], crawl={"workers": 4, "stop_grace": 1},
                 scope={"robots": True, "max_pages": 10})

    async def stop(proc) -> None:  # noqa: ANN001 - asyncio Process
        # three sitemaps served whole; the fourth held: the run is reading sitemaps
        await until(lambda: "/sm/3.xml" in site.log and all(
            f"/sm/{i}.xml" in site.log for i in range(3)), "the sitemaps requested")
        proc.send_signal(sig)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=120,
                                on_start=stop)
    assert code == ExitCode.INTERRUPTED, err
    await resumes(site, tmp_path, ExitCode.LIMIT)


async def test_a_stop_abandons_sitemaps_at_once_whatever_the_grace(aiohttp_server,
                                                                   tmp_path: Path) -> None:
    """A sitemap being fetched or stored is not waited for (the fourth is held, and the
    grace is longer than the test's timeout): it is fetched again on resume."""
    site = await serve(aiohttp_server, sitemaps=4, per_sitemap=50_000, hold={"/sm/3.xml"})
    write_config(tmp_path, [site.base], crawl={"workers": 4, "stop_grace": 600},
                 scope={"robots": True, "max_pages": 10})

    async def stop(proc) -> None:  # noqa: ANN001 - asyncio Process
        await until(lambda: "/sm/3.xml" in site.log, "the held sitemap requested")
        proc.send_signal(signal.SIGTERM)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=60,
                                on_start=stop)
    assert code == ExitCode.INTERRUPTED, err
    held = f"{site.base}sm/3.xml"
    assert rows(tmp_path / "archive", f"SELECT state FROM urls WHERE url='{held}'") == [
        ("pending",)]
    await resumes(site, tmp_path, ExitCode.LIMIT)


@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGTERM", "SIGINT"])
async def test_a_signal_while_crawling(aiohttp_server, tmp_path: Path, sig):
    site = await serve(aiohttp_server, hold={"/held"})
    write_config(tmp_path, [site.base], crawl={"workers": 2, "stop_grace": 1})

    async def stop(proc) -> None:  # noqa: ANN001
        await until(lambda: "/held" in site.log, "/held requested")
        proc.send_signal(sig)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=120,
                                on_start=stop)
    assert code == ExitCode.INTERRUPTED, err
    await resumes(site, tmp_path, ExitCode.OK)


#: fake capture rows added to the manifest, so that the final index takes seconds to write
FAKE_CAPTURES = 400_000


@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGTERM", "SIGINT"])
async def test_a_signal_while_writing_the_final_index(aiohttp_server, tmp_path: Path, sig):
    site = await serve(aiohttp_server)
    write_config(tmp_path, [site.base + "held"])
    site.release.set()
    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path)
    assert code == ExitCode.OK, err
    archive = tmp_path / "archive"
    with sqlite3.connect(archive / "manifest.sqlite3") as db:  # copies of its one capture
        columns = [c for (_, c, *_) in db.execute("PRAGMA table_info(captures)") if c != "id"]
        names = ", ".join(f'"{c}"' for c in columns)
        db.execute(f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                   f"WHERE i < {FAKE_CAPTURES}) INSERT INTO captures ({names}) "
                   f"SELECT {names} FROM captures, n")
    old_index = (archive / "index.cdxj").read_bytes()
    log = archive / "mirror.log"

    async def stop(proc) -> None:  # noqa: ANN001
        await until(lambda: log.read_text().count("writing ") >= 2, "the final index begun")
        proc.send_signal(sig)

    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=120,
                                on_start=stop)
    assert code == ExitCode.INTERRUPTED, err
    assert (archive / "index.cdxj").read_bytes() == old_index  # left whole, as it was
    assert not list(archive.glob(".index-*"))  # no temporary left behind
    assert rows(archive, "SELECT state FROM runs WHERE id=2") == [("interrupted",)]
    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=300)
    assert code == ExitCode.OK, err
    lines = (archive / "index.cdxj").read_text().count("\n")
    assert lines == FAKE_CAPTURES + 2  # the first capture, its copies, the second run's


async def resumes(site: SitemapSite, tmp_path: Path, expected: int) -> None:
    """The next `mirror run` takes the stopped run up and ends it, nothing left leased."""
    site.release.set()
    code, _, err = await mirror("run", "site.toml", "-q", cwd=tmp_path, timeout=300)
    assert code == expected, err
    archive = tmp_path / "archive"
    assert rows(archive, "SELECT id, state FROM runs")[0][0] == 1  # the same run, resumed
    assert rows(archive, "SELECT COUNT(*) FROM urls WHERE state='leased'") == [(0,)]
    code, _, err = await mirror("verify", "site.toml", cwd=tmp_path)
    assert code == ExitCode.OK, err
