"""``python -m bench.run``: the entry point of :mod:`bench.cli.run_command`."""

from bench.cli.run_command import main

if __name__ == "__main__":
    raise SystemExit(main())
