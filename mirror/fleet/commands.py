"""`mirror schedule apply | list | remove | run-now --db DSN`: the site files' schedules
registered in the fleet's database instead of OS timers. Apply converges as it does for
timers: each scheduled site gets the registration its file says, a site without
[schedule] (or whose file is gone) loses its registration, and nothing else is touched."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirror.config import ConfigError, load_config
from mirror.fleet import registry
from mirror.fleet.db import connect
from mirror.fleet.registry import Registration, RunRecord
from mirror.model import ExitCode
from mirror.schedule import listing
from mirror.schedule.timers import Site

if TYPE_CHECKING:
    import psycopg

UTC = dt.UTC


@dataclass
class Outcome:
    """What a command did, as lines for the user, the problems, and its exit code."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    code: int = ExitCode.OK


def schedule(action: str, dsn: str, sites: Sequence[tuple[Site, Path | None]],
             in_scope: Callable[[Path], bool], *, names: Sequence[str] = (),
             now: dt.datetime | None = None) -> Outcome:
    """Do `action` on the fleet at `dsn` for `sites` (the target's site files) and the
    registrations `in_scope` says belong to the target; `names`: run-now by site name."""
    now = now or dt.datetime.now(UTC)
    conn = connect(dsn)
    try:
        if action == "apply":
            return _apply(conn, sites, in_scope, now)
        if action == "remove":
            return _remove(conn, sites, in_scope)
        if action == "run-now":
            return _run_now(conn, dsn, [s.name for s, _ in sites] + list(names))
        return _list(conn, sites, in_scope)
    finally:
        conn.close()


def _match(site: Site, registered: dict[str, Registration],
           host: str | None) -> Registration | None:
    """The registration made from this site file (from `host`; None: any)."""
    for reg in registered.values():
        if reg.site_file == str(site.file) and host in (None, reg.host):
            return reg
    return None


def _apply(conn: psycopg.Connection[Any], sites: Sequence[tuple[Site, Path | None]],
           in_scope: Callable[[Path], bool], now: dt.datetime) -> Outcome:
    out, host, tz = Outcome(), registry.this_host(), registry.local_zone()
    registered = {r.name: r for r in registry.sites(conn)}
    for site, _ in sites:
        if site.schedule is None:
            reg = _match(site, registered, host)
            if reg is None:
                out.lines.append(f"{site.name}: not scheduled")
                continue
            out.lines.append(_removed(conn, reg, site.why or "no [schedule] every"))
            registered.pop(reg.name)
            continue
        problem = _register(conn, site, registered, now, host, tz, out)
        if problem:
            out.problems.append(f"{site.file}: {problem}")
    _drop_gone(conn, registered, in_scope, host, out)
    if not out.lines and not out.problems:
        out.lines.append("no site files and no fleet registrations here")
    return out


def _register(conn: psycopg.Connection[Any], site: Site, registered: dict[str, Registration],
              now: dt.datetime, host: str, tz: str, out: Outcome) -> str | None:
    """Register one scheduled site; the problem that stops it, else None."""
    assert site.schedule is not None
    try:
        cfg = load_config(site.file)
        text = site.file.read_text(encoding="utf-8-sig")
    except (ConfigError, OSError) as exc:
        return f"cannot read it: {exc}"
    problem = registry.fleet_problem(cfg)
    if problem:
        return problem + " (its registration, if it has one, is left as it is)"
    other = registered.get(cfg.site.name)
    if other is not None and (other.host, other.site_file) != (host, str(cfg.path)):
        return (f"the fleet has a site named {cfg.site.name!r} already, registered from "
                f"{other.host}:{other.site_file}; give one of them another [site] name, or "
                f"run `mirror schedule remove --db ... {other.site_file}` first")
    store = registry.store_of(cfg)
    shared = [r.name for r in registered.values() if r.store == store and r.name != cfg.site.name]
    if shared:
        return (f"[archive] store {store} is the store of the fleet site {shared[0]!r} too; "
                "each site needs a store (or a prefix) of its own")
    with conn.transaction():
        said = registry.register(conn, cfg, text, site.schedule, now, host=host, tz=tz)
    reg = registry.site(conn, cfg.site.name)
    assert reg is not None
    registered[reg.name] = reg
    what = "in the fleet" + {"unchanged": " (unchanged)", "updated": " (updated)"}.get(said, "")
    out.lines.append(f"{reg.name}: {what}, {reg.schedule} ({reg.timezone}), next run "
                     f"{listing.when(reg.next_due.astimezone())}")
    return None


def _removed(conn: psycopg.Connection[Any], reg: Registration, why: str) -> str:
    with conn.transaction():
        cancelled = registry.unregister(conn, reg.name)
    also = "; its waiting run was cancelled" if cancelled else ""
    return f"{reg.name}: removed from the fleet ({why}){also}"


def _drop_gone(conn: psycopg.Connection[Any], registered: dict[str, Registration],
               in_scope: Callable[[Path], bool], host: str, out: Outcome) -> None:
    """Registrations made from this machine whose site file is gone."""
    for reg in list(registered.values()):
        path = Path(reg.site_file)
        if reg.host == host and in_scope(path) and not path.exists():
            out.lines.append(_removed(conn, reg, "its site file is gone"))
            registered.pop(reg.name)


def _remove(conn: psycopg.Connection[Any], sites: Sequence[tuple[Site, Path | None]],
            in_scope: Callable[[Path], bool]) -> Outcome:
    out, host = Outcome(), registry.this_host()
    registered = {r.name: r for r in registry.sites(conn)}
    for site, _ in sites:
        reg = _match(site, registered, None)
        if reg is None:
            out.lines.append(f"{site.name}: not in the fleet")
            continue
        out.lines.append(_removed(conn, reg, "as asked"))
        registered.pop(reg.name)
    _drop_gone(conn, registered, in_scope, host, out)
    if not out.lines:
        out.lines.append("no site files and no fleet registrations here")
    return out


def _run_now(conn: psycopg.Connection[Any], dsn: str, names: Sequence[str]) -> Outcome:
    from procrastinate.exceptions import AlreadyEnqueued

    from mirror.fleet.queue import defer_run_sync, new_app, site_lock

    out, app = Outcome(), new_app(dsn)
    for name in names:
        if registry.site(conn, name) is None:
            out.problems.append(f"{name}: not in the fleet (`mirror schedule apply --db ...` "
                                "registers a scheduled site)")
            out.code = ExitCode.USAGE
            continue
        try:
            with conn.transaction():
                job = defer_run_sync(app, name, f"run now (asked on {registry.this_host()})",
                                     connection=conn)
        except AlreadyEnqueued:
            row = conn.execute("SELECT id FROM procrastinate_jobs WHERE queueing_lock = %s "
                               "AND status = 'todo'", (site_lock(name),)).fetchone()
            waiting = f" (job {row['id']})" if row else ""
            out.lines.append(f"{name}: a run is already waiting{waiting}; not queued again")
            out.code = out.code or ExitCode.LOCKED
            continue
        out.lines.append(f"{name}: queued a run (job {job})")
    return out


def _list(conn: psycopg.Connection[Any], sites: Sequence[tuple[Site, Path | None]],
          in_scope: Callable[[Path], bool]) -> Outcome:
    registered = {r.name: r for r in registry.sites(conn)}
    last = registry.last_runs(conn)
    rows, host = [], registry.this_host()
    files = {str(site.file): site for site, _ in sites}
    for reg in registered.values():
        if not in_scope(Path(reg.site_file)):
            continue
        local = files.get(reg.site_file) if reg.host == host else None
        rows.append(listing.Row(reg.name, Path(reg.site_file), reg.schedule,
                                _registered_text(reg, local, host),
                                listing.when(reg.next_due.astimezone()),
                                run_text(last.get(reg.name))))
    for site, _ in sites:
        if site.schedule is not None and _match(site, registered, host) is None:
            rows.append(listing.Row(site.name, site.file, site.schedule.text,
                                    "not in the fleet: run `mirror schedule apply --db ...`",
                                    "-", "-"))
    if not rows:
        return Outcome(["no scheduled sites and no fleet registrations"])
    return Outcome([listing.render(rows)])


def _registered_text(reg: Registration, local: Site | None, host: str) -> str:
    where = "" if reg.host == host else f" from {reg.host}"
    stale = ""
    if local is not None:
        try:
            now_text = local.file.read_text(encoding="utf-8-sig")
        except OSError:
            now_text = None
        if now_text != reg.toml or (local.schedule and local.schedule.text != reg.schedule):
            stale = " (out of date: run `mirror schedule apply --db ...`)"
    return f"fleet{where}, times in {reg.timezone}{stale}"


def run_text(run: RunRecord | None) -> str:
    """'complete (exit 0) on host-a (worker 3), started 2024-03-05 03:15:02 UTC'."""
    if run is None:
        return "none yet"
    started = run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    worker = f" (worker {run.worker_id})" if run.worker_id is not None else ""
    code = "" if run.exit_code is None else f" (exit {run.exit_code})"
    return f"{run.state}{code} on {run.host}{worker}, started {started}"
