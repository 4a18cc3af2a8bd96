"""Speed benchmarks behind ``make bench-perf`` and ``make bench-perf-subnet``."""
