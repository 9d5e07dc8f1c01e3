"""No raw control character of an archived page reaches the terminal (issue 32: 15): a
site on 127.0.0.1 whose titles, texts and links carry terminal commands (OSC 0 retitles
the window, OSC 52 sets the clipboard, CSI clears the screen) is crawled twice by the real
`mirror`, then every command that shows archived or remote text runs; none may print ESC,
BEL or another C0/C1 control, and the hostile text shows escaped (\\x1b) where it is
shown at all."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from conftest import write_config

from mirror.terminal import printable, printable_lines

ROOT = Path(__file__).resolve().parent.parent
OSC_TITLE, OSC_CLIP, CLEAR = "\x1b]0;owned\x07", "\x1b]52;c;ZXZpbA==\x07", "\x1b[2J"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


async def mirror(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mirror", *args, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(), err.decode()


def page(title: str, text: str, *links: str) -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>"


async def test_no_command_prints_a_raw_escape_of_an_archived_page(make_site, tmp_path: Path):
    site = await make_site()
    hostile = f"Home {OSC_TITLE} {OSC_CLIP} news"
    site.page("/", page(hostile, f"first words {CLEAR} here", "/b", "/gone\x1b[31m"))
    site.page("/b", page(f"B {OSC_CLIP}", "bee"))
    write_config(tmp_path, [site.base])
    outputs: dict[str, tuple[int, str, str]] = {}
    outputs["run 1"] = await mirror("run", "site.toml", "-v", cwd=tmp_path)
    site.page("/", page(hostile, f"second words {OSC_TITLE} here", "/b", "/gone\x1b[31m"))
    outputs["run 2"] = await mirror("run", "site.toml", "-q", cwd=tmp_path)
    for args in (["runs"], ["status"], ["diff"], ["diff", "--page", site.base], ["verify"],
                 ["explain", site.base + "x\x1b]0;owned\x07"], ["search", "news"]):
        outputs[" ".join(args)] = await mirror(args[0], "site.toml", *args[1:], cwd=tmp_path)
    for name, (code, out, err) in outputs.items():
        assert code in (0, 3), (name, code, err)
        assert not CONTROL.search(out), (name, out)
        assert not CONTROL.search(err), (name, err)
    # the hostile text was shown, escaped: the test saw what it guards
    assert "\\x1b]0;owned\\x07" in outputs["diff --page " + site.base][1]
    assert "\\x1b]52;c;ZXZpbA==\\x07" in outputs["search news"][1]


def test_printable_escapes_controls_and_keeps_layout_only_when_asked() -> None:
    assert printable("a\x1b]0;t\x07b\u202e\x9b") == "a\\x1b]0;t\\x07b\\u202e\\x9b"
    assert printable("one\ntwo\tthree") == "one\\x0atwo\\x09three"
    assert printable_lines("one\ntwo\tthree\x1b") == "one\ntwo\tthree\\x1b"
    assert printable("plain text, é ü 日本") == "plain text, é ü 日本"
