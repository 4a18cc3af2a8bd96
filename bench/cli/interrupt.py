"""What every command says and returns when Ctrl-C stops it, and the ``python -m`` entry step
that makes it hold from the first import on.

Kept to modules Python has loaded at start-up (no ``typing``): :func:`exit_with_main` runs
before the command's own module is imported, so a Ctrl-C during those imports still ends with
one line and status 130, and the moments before it are as few as can be.

Once the command is done, :func:`exit_now` ends the process without the interpreter's
teardown: after ``import torch`` that teardown (module and C++ static destructors, no work of
ours) takes about a second of wall time on a 2-core machine, every command, every job process.
"""

from __future__ import annotations

import importlib
import os
import sys

INTERRUPTED = ("interrupted; finished jobs keep their records: run the same command again to "
               "skip them and run the rest")
INTERRUPTED_STATUS = 130
# A file :func:`main_status` creates, where this variable names one, at the moment from which
# Ctrl-C gives the one line and 130: a supervisor that interrupts the command (a test) waits
# for it instead of guessing how long the interpreter's own start-up takes.
READY_FILE_VARIABLE = "BENCH_INTERRUPT_READY_FILE"


def exit_with_main(module: str) -> None:
    """Import ``module``, run its ``main()`` and end the process with the status
    :func:`main_status` gives (:func:`exit_now`, never returns)."""
    exit_now(main_status(module))


def main_status(module: str) -> object:
    """Import ``module`` and run its ``main()``; the exit status it returns or raises
    (``SystemExit``); Ctrl-C at any moment, the import included, prints :data:`INTERRUPTED`
    and gives 130. From that moment the file named by :data:`READY_FILE_VARIABLE` exists."""
    try:
        ready_file = os.environ.get(READY_FILE_VARIABLE)
        if ready_file:
            open(ready_file, "w").close()
        return importlib.import_module(module).main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return INTERRUPTED_STATUS
    except SystemExit as stop:
        return stop.code


def exit_now(status: object) -> None:
    """Exit as ``raise SystemExit(status)`` would (None: 0, an int: itself, anything else
    printed to stderr: 1), after the running non-daemon threads end and the atexit handlers
    run, with the standard streams flushed, but without the interpreter's teardown."""
    import atexit  # here, not at the top: the module keeps to what Python loads at start-up
    import threading

    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:
        print(status, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():  # what the interpreter waits for before it exits
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say to it
            pass
    os._exit(code)
