"""On-disk formats shared by both sides: WARC writing and reading, the CDXJ index, the lock."""
