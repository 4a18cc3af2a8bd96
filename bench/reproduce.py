"""``python -m bench.reproduce``: the entry point of :mod:`bench.cli.reproduce_command`.

Ctrl-C at any moment, the start-up imports included, stops with one line and status 130.
"""

import sys

INTERRUPTED = ("interrupted; finished jobs keep their records: run the same command again to "
               "skip them and run the rest")

if __name__ == "__main__":
    try:
        from bench.cli.reproduce_command import main

        status = main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        status = 130
    raise SystemExit(status)
