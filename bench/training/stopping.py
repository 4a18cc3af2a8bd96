"""When an iterative fit has settled: a stopping rule on a monitored sequence (a training loss
per iteration), used to stop natural-gradient VI and, by the reports, to say from a record's
trace whether a fit converged. Torch-free."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.harness.errors import ConfigError


@dataclass(frozen=True)
class StoppingRule:
    """Stop when the last ``window`` values of a monitored sequence lie within a band of width
    ``tolerance * max(|their mean|, 1)`` (relative for large values, absolute near 0): a
    deterministic iteration that has converged passes, a chain still drifting or fluctuating
    by more than the band does not. ``window = 0`` switches the rule off."""

    window: int = 0
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 0:
            raise ConfigError(f"method.stop_window={self.window!r} is not valid; use 0 (off) "
                              "or a positive number of iterations")
        if self.window and not self.tolerance > 0:
            raise ConfigError(f"method.stop_tolerance={self.tolerance!r} is not valid; it must "
                              "be positive when method.stop_window > 0")

    @property
    def active(self) -> bool:
        """Whether the rule can stop a run."""
        return self.window > 0

    def band(self, values: list[float]) -> float:
        """Relative width ``(max - min) / max(|mean|, 1)`` of the last ``window`` values (inf
        while fewer are available or the rule is off)."""
        if not self.active or len(values) < self.window:
            return math.inf
        last = values[-self.window:]
        return (max(last) - min(last)) / max(abs(sum(last) / len(last)), 1.0)

    def settled(self, values: list[float]) -> bool:
        """Whether the last ``window`` values lie within the band."""
        return self.band(values) <= self.tolerance


def forgetting_iterations(step_size: float, tolerance: float) -> int:
    """Iterations ``t`` after which an exponential moving average with step ``gamma`` (the
    natural-gradient precision update) keeps a weight ``(1 - gamma)^t`` of at most
    ``tolerance`` on its start (1 at ``gamma = 1``)."""
    if step_size >= 1:
        return 1
    return max(1, math.ceil(math.log(tolerance) / math.log(1 - step_size)))
