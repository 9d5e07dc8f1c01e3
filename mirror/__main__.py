"""`python -m mirror` runs the command line."""

from mirror.cli import main_entry

main_entry()
