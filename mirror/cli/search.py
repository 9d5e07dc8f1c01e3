"""`mirror search [SITE.toml] WORDS`: one site's archive, or without a site file every site
of the library, each page once, best first (archive/searchrank.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mirror.cli.command import LIBRARY_DEFAULT, Command
from mirror.model import ExitCode

HELP = "full-text search of the archived pages (titles and text), of one site or the library"


def add_arguments(search: argparse.ArgumentParser) -> None:
    search.add_argument("words", nargs="+", metavar="[SITE.toml] QUERY",
                        help='a site file (without one: every site of the library), then '
                             'words (all must match), "a phrase", prefix*, OR, NOT, (groups): '
                             "FTS5 query syntax")
    which = search.add_mutually_exclusive_group()
    which.add_argument("--run", type=int, metavar="N",
                       help="search the pages of run N (with a site file)")
    which.add_argument("--all-runs", action="store_true",
                       help="search every version of every page (with a site file; default: "
                            "the newest capture of each page)")
    search.add_argument("--site", metavar="NAME",
                        help="without a site file: only the library's site NAME (its file "
                             "name without .toml)")
    search.add_argument("--library", type=Path, metavar="DIR",
                        help=f"the library to search (default: {LIBRARY_DEFAULT})")
    search.add_argument("--limit", type=int, default=20, metavar="N",
                        help="results to show (default 20)")
    search.add_argument("--json", action="store_true", help="print results as JSON lines")


def split_words(words: list[str]) -> tuple[Path | None, str]:
    """(the site file, the query): the first word names a site file when it ends in .toml
    or is a file; otherwise every word is the query (`mirror search walrus sea`)."""
    first = Path(words[0]).expanduser()
    if len(words) > 1 and (words[0].endswith(".toml") or first.is_file()):
        return first, " ".join(words[1:])
    if len(words) == 1 and words[0].endswith(".toml") and first.is_file():
        return first, ""
    return None, " ".join(words)


def cmd_search(args: argparse.Namespace) -> int:
    site_file, query = split_words(args.words)
    problem = _problem(args, site_file, query)
    if problem:
        return _usage(problem)
    if site_file is None:
        return _search_library(args, query)
    return _search_site(args, site_file, query)


def _problem(args: argparse.Namespace, site_file: Path | None, query: str) -> str:
    if args.limit < 1:
        return f"--limit {args.limit}: expected a number of results >= 1"
    if not query.strip():
        return f"what to search for? `mirror search {site_file or 'SITE.toml'} WORDS`"
    if site_file is None and (args.run is not None or args.all_runs):
        return ("--run and --all-runs need a site file: `mirror search SITE.toml WORDS "
                "--run N`")
    if site_file is not None and (args.site or args.library):
        return "--site and --library search the library: leave out the site file"
    return ""


def _usage(message: str) -> int:
    print(f"mirror: {message}", file=sys.stderr)
    return ExitCode.USAGE


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _search_site(args: argparse.Namespace, site_file: Path, query: str) -> int:
    import json

    from mirror.config import load_config
    from mirror.layout import ArchiveLayout
    from mirror.manifest.reader import ManifestReader
    from mirror.manifest.texts import SearchError
    from mirror.textview import hit_json, render_hits

    cfg = load_config(site_file)
    manifest = ManifestReader(ArchiveLayout(cfg.site.output_dir).manifest)
    try:
        if args.run is not None and args.run not in {r.id for r in manifest.runs.all()}:
            return _usage(f"--run {args.run}: no such run (see `mirror runs {site_file}`)")
        try:
            hits = manifest.texts.search(query, run_id=args.run, all_runs=args.all_runs,
                                   limit=args.limit)
        except SearchError as exc:
            return _usage(str(exc))
        unindexed = manifest.texts.unindexed_pages()
    finally:
        manifest.close()
    if args.json:
        for hit in hits:
            print(json.dumps(hit_json(hit), ensure_ascii=False))
    else:
        print(render_hits(hits, query, color=_color()))
    if unindexed:
        print(f"mirror: {unindexed} page captures have no text in the search index yet: "
              f"`mirror index --search {site_file}` reads them", file=sys.stderr)
    return ExitCode.OK


def _search_library(args: argparse.Namespace, query: str) -> int:
    import json

    from mirror.app.library import Library, default_library
    from mirror.app.search import SearchError, search_library
    from mirror.textview import found_json, render_found

    folder = (args.library or default_library()).expanduser()
    entries = Library(folder).sites()
    if not entries:
        return _usage(f"{folder}: no site files to search (`mirror add URL` makes one; "
                      "--library or $MIRROR_LIBRARY names another library)")
    if args.site:
        entries = [e for e in entries if e.id == args.site]
        if not entries:
            return _usage(f"--site {args.site}: no such site in {folder} (its site file "
                          "name without .toml)")
    try:
        results = search_library(entries, query, per_page=args.limit)
    except SearchError as exc:
        return _usage(str(exc))
    if args.json:
        for found in results.found:
            print(json.dumps(found_json(found), ensure_ascii=False))
    else:
        print(render_found(results, color=_color()))
    for note in results.notes:
        why = note.error or (f"{note.unindexed} page captures have no text in the search "
                             f"index yet: `mirror index --search {note.file}` reads them")
        print(f"mirror: {note.site}: {why}", file=sys.stderr)
    return ExitCode.OK


COMMANDS = (Command("search", HELP, cmd_search, add_arguments, config=None),)
