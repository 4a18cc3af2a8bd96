"""``python -m bench.report``: the entry point of :mod:`bench.cli.report_command`."""

from bench.cli.report_command import main

if __name__ == "__main__":
    raise SystemExit(main())
