"""Progress of long loops: a bar on a terminal, and heartbeat lines in the job's log always.

``progress(iterable, desc="refits")`` wraps an iterable in a tqdm bar when standard error is a
terminal and ``CI`` is unset (``BENCH_PROGRESS=1`` forces bars on, ``BENCH_PROGRESS=0`` off).
Whether or not a bar shows, it logs a heartbeat line (``refits: 12/100 epoch, elapsed 3:02,
ETA 22:18``) through the ``bench.progress`` logger at most once every ``BENCH_HEARTBEAT_S``
seconds (default 60; 0 logs every step), so the ``job.log`` of a six-hour Slurm job shows
that it is alive and how far it got.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
HEARTBEAT_ENV = "BENCH_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 60.0

heartbeat_logger = logging.getLogger("bench.progress")


def progress_enabled() -> bool:
    """Whether progress bars are shown in this process."""
    forced = os.environ.get("BENCH_PROGRESS", "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    return sys.stderr.isatty() and not os.environ.get("CI")


def heartbeat_interval() -> float:
    """Seconds between heartbeat lines (``BENCH_HEARTBEAT_S``; unreadable values: default)."""
    try:
        seconds = float(os.environ.get(HEARTBEAT_ENV, "").strip() or DEFAULT_HEARTBEAT_S)
    except ValueError:
        return DEFAULT_HEARTBEAT_S
    return seconds if math.isfinite(seconds) and seconds >= 0 else DEFAULT_HEARTBEAT_S


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss``) of a duration; ``?`` when unknown."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def heartbeat_line(desc: str, done: int, total: int | None, unit: str, elapsed: float) -> str:
    """``desc: done/total unit, elapsed, ETA`` (the ETA from the mean time per step so far)."""
    if total is None:
        return f"{desc}: {done} {unit}, elapsed {clock(elapsed)}"
    eta = elapsed / done * max(total - done, 0) if done else math.inf
    return f"{desc}: {done}/{total} {unit}, elapsed {clock(elapsed)}, ETA {clock(eta)}"


def heartbeat(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it",
              every_s: float | None = None,
              now: Callable[[], float] = time.monotonic) -> Iterator[T]:
    """Yield from ``iterable``, logging :func:`heartbeat_line` after a step when ``every_s``
    seconds (default :func:`heartbeat_interval`) have passed since the last line."""
    every_s = heartbeat_interval() if every_s is None else every_s
    started = last = now()
    for done, item in enumerate(iterable, start=1):
        yield item
        moment = now()
        if moment - last >= every_s:
            heartbeat_logger.info(heartbeat_line(desc, done, total, unit, moment - started))
            last = moment


def progress(iterable: Iterable[T], desc: str, total: int | None = None,
             unit: str = "it") -> Iterator[T]:
    """``iterable`` with heartbeat lines, and a progress bar labelled ``desc`` when bars are
    enabled."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    beating = heartbeat(iterable, desc, total, unit)
    if not progress_enabled():
        return beating
    from tqdm.auto import tqdm

    return tqdm(beating, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True)
