"""``python -m bench.run``: the entry point of :mod:`bench.cli.run`."""

from bench.cli.run import main

if __name__ == "__main__":
    raise SystemExit(main())
