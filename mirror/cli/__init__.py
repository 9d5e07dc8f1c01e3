"""The command line: `main` (cli/main.py: the parser and the one place where errors become
exit codes), the registry of commands (cli/registry.py), and one module per group of
commands, each declaring its commands' arguments and functions (cli/command.py)."""
