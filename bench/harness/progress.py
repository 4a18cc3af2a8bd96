"""Progress bars for long loops: shown on a terminal, silent in CI and in log files.

``progress(iterable, desc="refits")`` wraps an iterable in a tqdm bar when standard error is a
terminal and ``CI`` is unset; elsewhere it returns the iterable unchanged, so batch jobs and
CI logs stay clean. ``BENCH_PROGRESS=1`` forces bars on, ``BENCH_PROGRESS=0`` off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress_enabled() -> bool:
    """Whether progress bars are shown in this process."""
    forced = os.environ.get("BENCH_PROGRESS", "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    return sys.stderr.isatty() and not os.environ.get("CI")


def progress(iterable: Iterable[T], desc: str, total: int | None = None,
             unit: str = "it") -> Iterable[T] | Iterator[T]:
    """``iterable`` with a progress bar labelled ``desc`` when bars are enabled."""
    if not progress_enabled():
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True)
