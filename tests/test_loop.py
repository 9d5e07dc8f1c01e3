"""mirror run's event loop: uvloop's when it is installed and not turned off, else asyncio's."""

from __future__ import annotations

import asyncio
import sys

import pytest

from mirror.run.runner import loop_factory


def test_turned_off_or_missing_gives_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_UVLOOP", "0")
    assert loop_factory() is None
    monkeypatch.delenv("MIRROR_UVLOOP")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert loop_factory() is None


def test_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop", reason="the `fast` extra is not installed")
    monkeypatch.delenv("MIRROR_UVLOOP", raising=False)
    factory = loop_factory()
    assert factory is uvloop.new_event_loop

    async def loop_type() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    with asyncio.Runner(loop_factory=factory) as runner:
        assert runner.run(loop_type()).startswith("uvloop")
