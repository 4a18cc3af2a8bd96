"""``python -m bench.perf``: the network SSLA speed benchmark.

The work is done in :mod:`bench.benchmarks.network_ssla`.
"""

from bench.benchmarks.network_ssla import main

if __name__ == "__main__":
    raise SystemExit(main())
