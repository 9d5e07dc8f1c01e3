"""Incremental runs (I1, I2, W6): conditional requests, revisits, the change report, history."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web
from conftest import RunClock

from mirror.model import ExitCode
from mirror.replay.captures import CaptureIndex


class VersionedSite:
    """Pages whose content the test changes between runs. /v/<n> answer conditional
    requests (ETag, Last-Modified, 304); /s/<n> have no validators and send the same bytes."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.linked: list[str] = []
        self.conditional: list[tuple[str, str | None, str | None]] = []
        self.log: list[str] = []

    def body(self, path: str) -> bytes:
        return f"<html><body><p>{self.pages[path]}</p></body></html>".encode()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.log.append(path)
        if path == "/":
            html = "".join(f'<a href="{p}">{p}</a>' for p in self.linked)
            return web.Response(text=html, content_type="text/html")
        if path not in self.pages:
            return web.Response(status=404, text="gone", content_type="text/html")
        if path.startswith("/s/"):
            return web.Response(body=self.body(path), content_type="text/html")
        etag = f'"{abs(hash(self.pages[path]))}"'
        inm, ims = request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")
        self.conditional.append((path, inm, ims))
        if inm == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=self.body(path), content_type="text/html",
                            headers={"ETag": etag,
                                     "Last-Modified": "Mon, 02 Nov 2026 10:00:00 GMT"})


async def start(aiohttp_server, site: VersionedSite) -> str:
    app = web.Application()
    app.router.add_get("/{tail:.*}", site.handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    return str(server.make_url("/"))


def index_lines(archive: Path) -> dict[str, list[str]]:
    by_url: dict[str, list[str]] = {}
    for line in (archive / "index.cdxj").read_text().splitlines():
        _, ts, fields = line.split(" ", 2)
        by_url.setdefault(json.loads(fields)["url"], []).append(ts)
    return by_url


async def test_second_run_is_incremental(aiohttp_server, crawl):
    site = VersionedSite()
    v_pages = [f"/v/{i}" for i in range(10)]
    s_pages = [f"/s/{i}" for i in range(10)]
    for p in v_pages + s_pages:
        site.pages[p] = f"version one of {p}"
    site.pages["/v/1"] = 'one <a href="/deep">deep</a>'  # reachable only through /v/1
    site.pages["/deep"] = "deep page"
    site.linked = v_pages + s_pages
    base = await start(aiohttp_server, site)

    clock = RunClock()
    first = await crawl([base], crawl={"workers": 4}, clock=clock)
    assert first.result.exit_code == ExitCode.OK
    v1 = {p: site.body(p) for p in site.pages}
    v1_end = max(r["headers"].get_header("WARC-Date") for r in first.records())
    assert all(inm is None and ims is None for _, inm, ims in site.conditional)

    # between runs: 2 of 20 pages change, one is deleted, one unlinked, one added
    site.pages["/v/3"] = "version two of /v/3"
    site.pages["/s/5"] = "version two of /s/5"
    del site.pages["/v/7"]
    site.linked.remove("/s/8")
    site.pages["/v/new"] = "a new page"
    site.linked.append("/v/new")
    site.conditional.clear()
    site.log.clear()
    clock.next_run()  # the second run's 14-digit timestamps are later than the first's
    second = await crawl([base], crawl={"workers": 4}, clock=clock)
    assert second.result.exit_code == ExitCode.OK
    assert not second.result.resumed and second.result.run_id == 2

    # I1: validators from the manifest on every page that had them
    sent = {p: (inm, ims) for p, inm, ims in site.conditional}
    for p in v_pages:
        if p != "/v/7":
            assert sent[p][0] and sent[p][1] == "Mon, 02 Nov 2026 10:00:00 GMT", p
    assert "/deep" in site.log  # discovery went on through the 304 of /v/1

    records = [r for r in second.records() if r["headers"].get_header("WARC-Date") > v1_end]
    kinds = {r["uri"][len(base) - 1:]: (r["type"], r["headers"].get_header("WARC-Profile"))
             for r in records if r["type"] in ("response", "revisit")}
    not_modified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    identical = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    for p in v_pages:
        if p not in ("/v/3", "/v/7"):
            assert kinds[p] == ("revisit", not_modified), p
    for p in s_pages:
        if p not in ("/s/5", "/s/8"):
            assert kinds[p] == ("revisit", identical), p
    assert kinds["/v/3"][0] == kinds["/s/5"][0] == kinds["/v/new"][0] == "response"
    for r in records:
        if r["headers"].get_header("WARC-Profile") == not_modified:
            assert r["headers"].get_header("Content-Length") == "0"  # W6: empty block
            assert r["headers"].get_header("WARC-Refers-To-Target-URI") == r["uri"]

    # I2: the report's counts, exactly
    report = json.loads((second.archive / "reports" / "2.json").read_text())
    counts = report["changes"]["counts"]
    # run 1 had 22 URLs: /, /deep, 10 /v/, 10 /s/; 3 changed, 2 gone, so 17 are unchanged
    assert counts == {"new": 1, "changed": 3, "unchanged": 17, "gone": 2, "pending": 0,
                      "failed": 0}
    assert sorted(report["changes"]["changed"]) == sorted(
        [base, base + "v/3", base + "s/5"])  # the start page lists other links now
    assert sorted(report["changes"]["gone"]) == [base + "s/8", base + "v/7"]
    assert report["changes"]["new"] == [base + "v/new"]
    # the 8 unchanged /v/ pages and /deep answered 304: counted as such, not as redirects
    assert report["status_classes"] == {"2xx": 12, "not modified": 9, "4xx": 1}

    # the merged index holds every URL once per run (each capture at its own time: a run
    # may cross a second boundary), and each capture replays the bytes of its run
    times = {url: sorted(ts) for url, ts in index_lines(second.archive).items()}
    for p in [*v_pages, *s_pages, "/deep"]:
        if p not in ("/s/8",):
            stamps = times[base + p.lstrip("/")]
            assert len(stamps) == 2 and stamps[0] < stamps[1], (p, stamps)
    archive = CaptureIndex.load(second.archive)
    for p, old in v1.items():
        cap = archive.closest(base + p.lstrip("/"), times[base + p.lstrip("/")][0])
        assert cap is not None and archive.read(cap).payload == old, p
    for p in site.pages:
        cap = archive.closest(base + p.lstrip("/"), times[base + p.lstrip("/")][-1])
        assert cap is not None and archive.read(cap).payload == site.body(p), p

    # the second run stored a small fraction of the first's payload bytes
    assert report["payload_bytes"] < json.loads(
        (first.archive / "reports" / "1.json").read_text())["payload_bytes"]


async def test_incremental_archive_verifies_and_matches_cdxj_indexer(aiohttp_server, crawl):
    import subprocess
    import sys

    site = VersionedSite()
    for p in ("/v/1", "/v/2", "/s/1", "/s/2"):
        site.pages[p] = f"content of {p}"
    site.pages["/s/copy"] = site.pages["/s/1"]  # same bytes as /s/1 in the same run
    site.linked = list(site.pages)
    base = await start(aiohttp_server, site)
    clock = RunClock()
    await crawl([base], clock=clock)
    site.pages["/v/2"] = "changed"
    clock.next_run()
    second = await crawl([base], clock=clock)
    second.assert_verifies()
    files = sorted(str(p) for p in (second.archive / "warc").glob("*.warc.gz"))
    proc = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", "-s", *files],
                          capture_output=True, text=True, check=True)
    assert (second.archive / "index.cdxj").read_text() == proc.stdout
    # run 1: /s/copy; run 2: / and /s/1, /s/2, /s/copy (same bytes), /v/1 (304)
    assert proc.stdout.count('"mime": "warc/revisit"') == 1 + 5


async def test_every_later_run_revalidates_what_the_run_before_confirmed(aiohttp_server, crawl):
    """A page that answered 304 in run 2 is asked conditionally again in run 3 and 4 (its
    previous capture is that not-modified revisit, which stands for the 200 it confirmed)."""
    site = VersionedSite()
    site.pages["/v/1"] = "stable"
    site.linked = ["/v/1"]
    base = await start(aiohttp_server, site)
    for run in (1, 2, 3, 4):
        site.conditional.clear()
        done = await crawl([base])
        assert done.result.exit_code == ExitCode.OK
        [(_, inm, ims)] = site.conditional
        assert (inm is not None, ims) == ((run > 1), "Mon, 02 Nov 2026 10:00:00 GMT"
                                          if run > 1 else None), f"run {run}"
    with done.db() as db:
        kinds = [k for (k,) in db.execute(
            "SELECT record_type FROM captures WHERE url=? ORDER BY run_id", (base + "v/1",))]
    assert kinds == ["response", "not-modified", "not-modified", "not-modified"]
