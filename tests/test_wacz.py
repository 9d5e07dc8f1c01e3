"""`mirror export --wacz`: a WACZ 1.2.0 package that the `wacz` tool validates (O5)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import offline_site as site_def
import pytest

from mirror.cli.main import main
from mirror.replay.captures import CaptureIndex
from mirror.replay.wacz import PAGES_HEADER, jsonl, write_wacz


def wacz_tool() -> str:
    exe = Path(sys.executable).parent / "wacz"
    found = str(exe) if exe.exists() else shutil.which("wacz")
    if found is None:
        pytest.skip("the `wacz` validator is not installed (pip install -e '.[test]')")
    return found


def validate(path: Path) -> str:
    proc = subprocess.run([wacz_tool(), "validate", "-f", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


async def test_wacz_of_a_crawl_validates_and_holds_everything(
    make_site: Any, crawl: Any, tmp_path: Path
) -> None:
    site, _other, done = await site_def.crawl_site(make_site, crawl)
    out = tmp_path / "site.wacz"
    result = write_wacz(CaptureIndex.load(done.archive), out, title="test", start_urls=(site.base,))
    assert "Validation succeeded" in validate(out)
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        warcs = [n for n in names if n.startswith("archive/")]
        assert warcs and all(zf.getinfo(n).compress_type == zipfile.ZIP_STORED for n in warcs)
        assert {"indexes/index.cdxj", "pages/pages.jsonl", "datapackage.json",
                "datapackage-digest.json"} <= set(names)
        package = json.loads(zf.read("datapackage.json"))
        for res in package["resources"]:  # sizes and sha256 of every file
            data = zf.read(res["path"])
            assert res["bytes"] == len(data)
            assert res["hash"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert {r["path"] for r in package["resources"]} == set(names) - {
            "datapackage.json", "datapackage-digest.json"}
        digest = json.loads(zf.read("datapackage-digest.json"))
        assert digest["hash"] == "sha256:" + hashlib.sha256(zf.read("datapackage.json")).hexdigest()
        assert package["mainPageURL"] == site.base
        lines = zf.read("indexes/index.cdxj").decode().splitlines()
        assert lines == sorted(lines, key=str.encode)
        assert {json.loads(ln.split(" ", 2)[2])["filename"] for ln in lines} == {
            w.removeprefix("archive/") for w in warcs}
        pages = [json.loads(ln) for ln in zf.read("pages/pages.jsonl").decode().splitlines()]
    assert pages[0]["format"] == "json-pages-1.0"
    assert "hasText" not in pages[0]  # it would cut ReplayWeb.page's search at 1 MiB
    titles = {p["url"]: p.get("title") for p in pages[1:]}
    assert titles[site.base] == "Home page" and titles[site.base + "about"] == "About us"
    assert all(p["ts"].endswith("Z") for p in pages[1:])
    assert result.pages == len(pages) - 1
    texts = {p["url"]: p.get("text") for p in pages[1:]}
    home = texts[site.base]
    assert "Welcome café" in home and "Old about" in home  # iso-8859-1, decoded
    assert not {"hero", "background", "fetch", "beacon"} & set(home.split())  # <style>, <script>
    assert "Home page" not in home  # the title is a field of its own
    assert texts[site.base + "headers?x=1"] == "gzipped\nhome"  # content-coded: decoded
    assert texts[site.base + "corrupt"] is None  # cannot be decoded: listed, no text


def test_pages_jsonl_texts_are_utf8_and_escaped() -> None:
    lines = list(jsonl(PAGES_HEADER, [{"url": "http://h.test/", "text": "東京\n\"x\"\u2028"}]))
    assert lines[1] == '{"url": "http://h.test/", "text": "東京\\n\\"x\\"\u2028"}\n'.encode()
    assert [json.loads(line) for line in lines][1]["text"] == "東京\n\"x\"\u2028"


def test_wacz_of_an_interrupted_archive_packs_complete_records(
    tmp_path: Path, capsys: Any
) -> None:
    src = site_def.write_history(tmp_path / "src")
    archive_dir = tmp_path / "archive"
    (archive_dir / "warc").mkdir(parents=True)
    open_file = archive_dir / "warc" / (src.name + ".open")
    open_file.write_bytes(src.read_bytes() + b"\x1f\x8b\x08\x00torn tail")
    config = tmp_path / "site.toml"
    config.write_text('[site]\nname = "h"\nstart_urls = ["http://history.test/page"]\n'
                      'output_dir = "archive"\n')
    out = tmp_path / "h.wacz"
    assert main(["export", str(config), "--wacz", str(out)]) == 0
    assert "5 captures" in capsys.readouterr().out  # responses and revisits, not requests
    validate(out)
    with zipfile.ZipFile(out) as zf:
        assert zf.read(f"archive/{src.name}") == src.read_bytes()  # torn tail left out
        pages = zf.read("pages/pages.jsonl").decode()
    assert pages.count(site_def.HISTORY_URL) == 4  # each snapshot, revisits included
