"""mirror: archive websites into WARC files, resumable and browsable offline."""

__version__ = "0.1.0"
