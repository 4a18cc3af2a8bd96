"""Wall-clock timing fit for GPUs, used for every timing the harness reports.

CUDA kernels run asynchronously: a clock read right after a call returns measures the launch,
not the work. Both tools here therefore wait for queued CUDA work before each clock read, and
only when this process has used CUDA, so a CPU run never calls (or initialises) CUDA.

* :class:`Stopwatch` -- one-shot wall time (the ``*_s`` timings records store: training,
  fits, replications, whole jobs), as ``with Stopwatch() as watch: ...`` then
  ``watch.seconds``, or as ``watch = Stopwatch()`` ... ``watch.elapsed()``.
* :func:`timed` -- the speed benchmarks' measurement: ``warmup`` untimed calls (lazy
  initialisation, allocator and kernel caches), then ``repeats`` timed calls, and their median.
  It follows :class:`torch.utils.benchmark.Timer`'s recipe (warm-up, then synchronised clock
  reads) but keeps the caller's thread count (``Timer`` runs on one thread unless told
  otherwise), times every call on its own so the median is per call (``Timer.timeit`` reports
  a block mean after two warm-up calls of its own), and returns the function's result, which
  the benchmarks check for accuracy.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def synchronize() -> None:
    """Wait for the current CUDA device's queued work; nothing if CUDA was never initialised."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Stopwatch:
    """Wall seconds since it was created, CUDA work queued meanwhile included::

        watch = Stopwatch()
        model.fit(data)
        timings["fit_s"] = watch.elapsed()

        with Stopwatch() as watch:
            model.fit(data)
        timings["fit_s"] = watch.seconds  # set when the block ends (NaN before)
    """

    def __init__(self) -> None:
        self.seconds = math.nan
        synchronize()
        self._start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the start, after waiting for queued CUDA work."""
        synchronize()
        return time.perf_counter() - self._start

    def __enter__(self) -> Stopwatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = self.elapsed()


def timed(fn: Callable[[], T], repeats: int, warmup: int = 1) -> tuple[float, T]:
    """(median seconds per call, result of the last call) of ``fn`` over ``repeats`` timed calls
    after ``warmup`` untimed ones; each timed call is a synchronised :class:`Stopwatch`.

    ``warmup=0`` is for a function whose cold call was just timed on its own.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    result = None
    for _ in range(warmup):
        result = fn()
    seconds = []
    for _ in range(repeats):
        with Stopwatch() as watch:
            result = fn()
        seconds.append(watch.seconds)
    return statistics.median(seconds), result
