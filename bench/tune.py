"""``python -m bench.tune``: the entry point of :mod:`bench.cli.tune_command`."""

from bench.cli.tune_command import main

if __name__ == "__main__":
    raise SystemExit(main())
