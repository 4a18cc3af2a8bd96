"""``python -m bench.reproduce``: the entry point of :mod:`bench.cli.reproduce_command`."""

from bench.cli.reproduce_command import main

if __name__ == "__main__":
    raise SystemExit(main())
