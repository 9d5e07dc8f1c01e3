"""The manifest: a run's state in SQL (SQLite for one archive, PostgreSQL for a shared run),
its one connection layer (db), its schema, and the reading and writing handles."""
