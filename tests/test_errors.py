"""The exception tree (mirror.errors): the exit code each error carries is the one a
command ends with today, and what the command line prints of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.archive.lock import ArchiveLocked
from mirror.config import ConfigError, ConfigErrors, load_config
from mirror.errors import MirrorError, exit_code_of
from mirror.manifest.db import ManifestConflict, ManifestError
from mirror.model import ExitCode, exit_meaning
from mirror.run.wait import AlreadyWaiting
from mirror.store.objstore import StoreConflict, StoreError


def test_what_cli_main_mapped_keeps_its_code() -> None:
    """cli.main's clauses: config, manifest, library and store errors exit 2; the lock 75."""
    from mirror.cli.library import LibraryUsageError
    from mirror.storecmds import StoreUsageError

    for cls in (ConfigError, ConfigErrors, ManifestError, ManifestConflict, LibraryUsageError,
                StoreError, StoreConflict, StoreUsageError):
        assert cls.exit_code is ExitCode.USAGE, cls
    assert ArchiveLocked.exit_code is AlreadyWaiting.exit_code is ExitCode.LOCKED


def test_what_cli_translated_to_its_usage_error_exits_2() -> None:
    """The errors cli turns into its UsageError (`raise UsageError(str(exc)) from exc`), the
    fleet's timing options (a ValueError there) and a [login] that fails (the crawler)."""
    from mirror.crawl.login import LoginError
    from mirror.demo import DemoError
    from mirror.fleet.db import FleetError
    from mirror.fleet.queue import Timing
    from mirror.lan import LanError
    from mirror.replay.destination import DestinationError
    from mirror.replay.export import ExportError
    from mirror.replay.zim import ZimError
    from mirror.schedule.timers import TimerError
    from mirror.upkeep.pruneplan import PruneError

    for cls in (LanError, PruneError, DemoError, DestinationError, ExportError, ZimError,
                TimerError, FleetError, LoginError):
        assert cls.exit_code is ExitCode.USAGE, cls
    with pytest.raises(ValueError, match="--poll must be more than 0 seconds") as caught:
        Timing(stall_after=60, tick=5, poll=0).check()
    assert exit_code_of(caught.value) is ExitCode.USAGE


def test_what_stops_a_run_keeps_its_code() -> None:
    """The crawler fails a run with exit 1 on an unreadable cookie file or a storage error;
    a stop request is an interruption (130); a builtin error is an internal one."""
    from mirror.crawl.cookies import CookieFileError
    from mirror.crawl.crawler import StopRequested
    from mirror.crawl.store import StorageError

    assert CookieFileError.exit_code is StorageError.exit_code is ExitCode.INTERNAL
    assert issubclass(CookieFileError, ValueError)  # its callers catch it as one
    assert StopRequested.exit_code is ExitCode.INTERRUPTED
    assert exit_code_of(KeyError("x")) is ExitCode.INTERNAL


def test_a_config_error_prints_every_problem_then_how_many(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[site]\nname = "s"\nstart_urls = ["http://127.0.0.1/"]\n'
                    'output_dir = "a"\n[crawl]\nworkers = "x"\ndelay = "y"\n',
                    encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(site)
    lines = caught.value.lines()
    assert len(lines) == 3 and lines[-1] == f"{site}: 2 errors", lines
    assert "[crawl] workers" in lines[0] and "[crawl] delay" in lines[1]
    assert isinstance(caught.value, MirrorError)
    one = ConfigError(site, "site.name", "required key is missing")
    assert one.lines() == [f"{site}: required key is missing"]


def test_an_exit_status_has_words_when_mirror_ends_with_it() -> None:
    assert exit_meaning(3) == ExitCode.FAILED_URLS.meaning == "some URLs failed"
    assert exit_meaning(7) is None and exit_meaning(-9) is None
