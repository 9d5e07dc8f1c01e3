"""The manifest: a run's state in SQL (SQLite for one archive, PostgreSQL for a shared run).

db       the one connection layer for both engines (the fleet's database connects through
         it too); schema: tables, migrations, the PostgreSQL rendering.
reader   ManifestReader: opened read-only, no writing method; runs, URLs, captures, and
         its parts texts, robots, patterns, prune, audit (verify's queries).
writer   Manifest(ManifestReader): the crawl's writes, and the writing parts texts,
         patterns, sitemaps, prune, sharedrun (host leases, workers), filemarks (a shared
         run's WARC files), which share its transactions (db.Tx).
No SQL outside this package (tests/test_quality.py); tests/test_manifest_contract.py is
the contract on both engines."""
