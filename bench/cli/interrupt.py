"""What every command says and returns when Ctrl-C stops it, and the ``python -m`` entry step
that makes it hold from the first import on.

Kept to modules Python has loaded at start-up (no ``typing``): :func:`exit_with_main` runs
before the command's own module is imported, so a Ctrl-C during those imports still ends with
one line and status 130, and the moments before it are as few as can be.
"""

from __future__ import annotations

import importlib
import sys

INTERRUPTED = ("interrupted; finished jobs keep their records: run the same command again to "
               "skip them and run the rest")
INTERRUPTED_STATUS = 130


def exit_with_main(module: str) -> None:
    """Import ``module`` and exit (never return) with the status its ``main()`` returns;
    Ctrl-C at any moment, the import included, prints :data:`INTERRUPTED` and exits with
    status 130."""
    try:
        status = importlib.import_module(module).main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        status = INTERRUPTED_STATUS
    raise SystemExit(status)
