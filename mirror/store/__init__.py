"""Object storage of archives: the S3 client, reading an archive from a store, push and restore."""
