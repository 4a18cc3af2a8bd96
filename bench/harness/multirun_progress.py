"""A progress line after every job of a multirun: ``[k/N] done, failed, elapsed, ETA``.

Registered as a Hydra callback in ``conf/config.yaml``. The total N is the size of the
cartesian product of the multirun's sweep overrides; a job counts as failed when its record
says so (the job function returns the record's status) or when it raised.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

logger = logging.getLogger("bench.multirun")


def sweep_size(overrides: list[str]) -> int:
    """Number of jobs a list of Hydra multirun overrides expands to."""
    size = 1
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.is_sweep_override():
            size *= len(list(override.sweep_string_iterator()))
    return size


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss``) of a duration; ``?`` when unknown."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(done: int, failed: int, skipped: int, total: int, elapsed: float) -> str:
    """The line logged after each job (ETA from the mean time of the jobs so far)."""
    finished = done + failed
    remaining = max(total - finished, 0)
    eta = elapsed / finished * remaining if finished else math.inf
    skipped_text = f" ({skipped} skipped)" if skipped else ""
    return (f"[{finished}/{total}] {done} done{skipped_text}, {failed} failed, "
            f"elapsed {clock(elapsed)}, ETA {clock(eta)}")


class MultirunProgress(Callback):
    """Counts finished jobs of a multirun and logs the progress line after each."""

    def __init__(self) -> None:
        self.total = 0
        self.done = self.failed = self.skipped = 0
        self.started = time.perf_counter()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Size the multirun from its sweep overrides and start the clock."""
        self.total = sweep_size(list(config.hydra.overrides.task))
        self.done = self.failed = self.skipped = 0
        self.started = time.perf_counter()

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """Count the job by its record's status and log the progress line."""
        if not self.total:
            return
        try:
            status = job_return.return_value
        except Exception:  # noqa: BLE001 - the job raised: its exception is re-raised by Hydra
            status = "failed"
        if status == "failed":
            self.failed += 1
        else:
            self.done += 1
            self.skipped += status == "skipped"
        elapsed = time.perf_counter() - self.started
        logger.info(progress_line(self.done, self.failed, self.skipped, self.total, elapsed))
