"""``python -m bench.tune``: the entry point of :mod:`bench.cli.tune`."""

from bench.cli.tune import main

if __name__ == "__main__":
    raise SystemExit(main())
