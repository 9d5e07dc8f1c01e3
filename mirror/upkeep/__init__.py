"""Between runs: prune and retention, recovery after a crash, text index rebuilds."""
