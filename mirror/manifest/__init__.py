"""The manifest: a run's state in SQL (SQLite for one archive, PostgreSQL for a shared run).

db       the one connection layer for both engines (the fleet's database connects through
         it too); schema: tables, the PostgreSQL rendering; migrations: the upgrades.
reader   ManifestReader: opened read-only, no writing method; its parts are read-only:
         runs, urls (the frontier's rows), captures, counts (a run's numbers), sharedrun
         (workers, hosts, files), texts, robots, patterns, prune, audit (verify's queries).
writer   Manifest(ManifestReader): the same parts, each extended with its writes (runs,
         urls, captures, texts, patterns, prune, sharedrun: host leases and heartbeats),
         and sitemaps, filemarks (a shared run's WARC files); all share its
         transactions (db.Tx).
No SQL outside this package (tests/test_quality.py); tests/test_manifest_contract.py is
the contract on both engines."""
