"""`python -m mirror` and the `mirror` script: the command line. `mirror --version` is
answered here, without loading the command line's modules (argparse, the config, the
manifest: a few tens of ms)."""

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from mirror import __version__

        print(f"mirror {__version__}")
        sys.exit(0)
    from mirror.cli.main import main_entry

    main_entry()


if __name__ == "__main__":
    main()
