"""``python -m bench.reproduce``: the entry point of :mod:`bench.cli.reproduce`."""

from bench.cli.reproduce import main

if __name__ == "__main__":
    raise SystemExit(main())
