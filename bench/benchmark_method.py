"""``python -m bench.benchmark_method``: the entry point of
:mod:`bench.cli.benchmark_method_command` (``make benchmark METHOD=<name>``).

Ctrl-C at any moment, the start-up imports included, stops with one line and status 130
(:func:`bench.cli.interrupt.exit_with_main`).
"""

if __name__ == "__main__":
    from bench.cli.interrupt import exit_with_main

    exit_with_main("bench.cli.benchmark_method_command")
