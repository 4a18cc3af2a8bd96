"""``python -m bench.report``: the entry point of :mod:`bench.cli.report`."""

from bench.cli.report import main

if __name__ == "__main__":
    raise SystemExit(main())
