"""Pure web standards: URLs, codings and charsets, HTML and CSS links, rewriting; no I/O."""
