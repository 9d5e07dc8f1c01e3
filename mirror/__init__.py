"""mirror: archive websites into WARC files, resumable and browsable offline.

Code map (docs/ARCHITECTURE.md has the details: the archive folder and each file's owner,
the packages, the crash model, the two run modes, how to add a command, an export format
or a manifest engine). Packages from the bottom up, each importing, of the packages, only
those listed before it (tests/test_quality.py's LAYERS is the exact table; it also forbids
any import cycle):

    web/      pure web standards: URLs, content-codings and charsets, HTML and CSS
              links, rewriting, HTTP facts. No I/O.
    archive/  the on-disk formats both sides share: WARC writing and reading, the CDXJ
              index, the lock.
    manifest/ a run's state in SQL (SQLite for one archive, PostgreSQL for a shared run):
              the connection layer for both engines (db, the fleet's too), the schema,
              the read-only ManifestReader and the writer Manifest, each composing parts
              (runs, urls, captures, counts, texts, robots, patterns, prune, sitemaps,
              sharedrun, filemarks). No SQL outside it.
    store/    object storage: the S3 client (the one module that talks to obstore), an
              archive read from a store, push and restore; its keys are the folder's
              layout (layout.py).
    upkeep/   between runs: prune and retention, start-up recovery (repair of WARC files
              a crash cut short, a prune finished), rebuilding the text index.
    browser/  pages built by scripts: a Chromium-family browser driven over the DevTools
              protocol (aiohttp's WebSocket), every request of a page answered by the
              caller (BrowserPool.render(url, answer) -> Rendered DOM, text, links);
              restarts, crashes, timeouts. Knows nothing of the archive.
    crawl/    the write side: frontier, fetch, politeness and retry policy (dead hosts,
              retry budget), robots.txt and sitemaps, cookies and login, scope (CMS
              traps), link discovery (in helper processes), revisit decisions, the
              CaptureStore (the durability order) and the crawler's workers
              (urlwork); the run mode, chosen once (runmode: LocalRun on one machine,
              SharedRun for a worker of a shared run: begin, lease, heartbeat, finish).
    replay/   the read side: an archive's captures, the replay server, the export formats
              (folder, WACZ, ZIM: one module each in replay/exporters/, a registry that
              `mirror export` and the app list). verify/ checks what the write side left.
    demo/     the bundled site and its server.
    schedule/ the site file's [schedule] as OS timers (systemd, crontab) and what they show.
    run/      the life of a run (run.life.run_site: its turn, the crawl under the lock,
              retention and the store after it, hooks), the runner (signals, live
              progress in progress.json and on the terminal, logging), the run report
              and what changed since the run before; what the CLI, the app and the
              fleet call alike.
    fleet/    many sites on a schedule: PostgreSQL and Procrastinate, `mirror worker`
              running each site's `mirror run` as a child process.
    app/      `mirror ui` and `mirror add`: a library (a folder of site files), each site's
              state read from its archive (lock, manifest, reports, progress.json), the
              `mirror run` processes and jobs it starts, its pages and its doors.
    cli/      the command line: main (the parser and the one place where errors become
              exit codes), the registry, one module per group of commands declaring
              each command's arguments and function; `mirror CMD` imports CMD's only.
    Top-level modules: config (the site file), model (the frozen records passed
    between stages, ExitCode with its meaning, RecordType), errors (MirrorError: every
    exception, with the exit code it ends a command with; importable from every layer),
    layout (the archive folder), crashpoints (the named crash model), and the small
    shared edges (launch, webapp, terminal, outputdir, storecmds, ...).

Data flow of a run (one direction; the only loop, new URLs, goes through SQLite, which is
what makes a kill -9 resumable exactly):

    site.toml -> config -> SiteConfig
    run mode begin: LocalRun (crawl.startup: resume or start the run; repair .open WARCs,
    adopt unrecorded captures) | SharedRun (join the shared run; repair this worker's files)
    manifest --lease--> frontier (per-host slots, delays, backoff) --> workers
    worker: robots gate -> fetch (aiohttp) -> hand-off to a finishing task
    finishing: discover links (parsepool) -> CaptureStore.store:
               revisit choice -> WARC append + flush -> the capture joins a group;
               ONE manifest transaction per group of flushed captures (capture rows,
               URLs done, new URLs and links) -> frontier notified
    end: WARC closed, index.cdxj rebuilt sorted from the manifest, run finished, report
    offline: index.cdxj + WARCs -> replay.captures -> serve | exporters (folder, WACZ, ZIM)

A URL in a run (manifest `urls.state`):

    pending --lease--> leased --stored--> done (any status, 4xx too)
    leased --no usable answer after max_tries (5xx, 429, network)--> failed
    leased --retry later--> pending;  leased --robots.txt, budget--> skipped
    skipped --a later link allows it--> pending;  leased --crash, stop--> pending (resume)
    robots.txt rows are leased by the robots gate only, never by the frontier.

A run (manifest `runs.state`):

    running --done--> complete | limit (max_pages) | interrupted (a signal, a full disk)
    running | interrupted --next `mirror run`--> running (resumed, same run id)
    running | interrupted --`mirror run --new-run`--> abandoned, and a new run starts
    complete | limit --next `mirror run`--> a new run: the next incremental snapshot
"""

__version__ = "0.1.0"
