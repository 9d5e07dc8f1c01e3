"""The life of a run: its turn, the crawl under the lock (the runner: signals, live
progress, logging), retention and the store after it, its hooks, its report and summary,
and what changed since the run before."""
