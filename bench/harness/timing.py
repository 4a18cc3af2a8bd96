"""Wall-clock timing shared by the speed benchmarks."""

from __future__ import annotations

import math
import time


def best_of(fn, repeats: int):
    """(best wall seconds, result of the last call) over ``repeats`` calls of ``fn``."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result
