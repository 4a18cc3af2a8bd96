"""When a variational fit has stopped improving its ELBO: the stopping rule on the objective
itself (GGN thesis Chapter 4's VOGGN maximises the ELBO), beside the stationarity rule of
:mod:`bench.training.stopping` that looks at the gradient.

Every ``every`` iterations the ELBO of the current q is estimated with ``samples`` draws
(:func:`bench.metrics.elbo.elbo_draws`), always from a generator of the same seed, so every
estimate uses the same standard normal draws (common random numbers). An estimate improves on
the best so far when the paired difference of their per-draw ELBO values has a mean above
``ses`` of its standard errors; the fit has reached its plateau when ``patience`` estimates in
a row did not improve. The paired standard error is far smaller than either estimate's own,
so the rule sees improvements that the estimates' noise would hide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch import Tensor

from bench.harness.errors import ConfigError, require_int_at_least, require_positive_int


@dataclass(frozen=True)
class ElboPlateauRule:
    """``every`` iterations between estimates (0 switches the rule off), ``samples`` draws per
    estimate (at least 2), ``patience`` estimates without an improvement beyond ``ses``
    paired standard errors."""

    every: int = 0
    samples: int = 200
    patience: int = 5
    ses: float = 2.0

    def __post_init__(self) -> None:
        require_int_at_least("method.stop_elbo_every", self.every, 0,
                             "use 0 (off) or a positive number of iterations")
        if not self.every:
            return
        require_positive_int("method.stop_elbo_patience", self.patience)
        require_int_at_least("method.stop_elbo_samples", self.samples, 2,
                             "the paired standard error needs at least 2 draws")
        if isinstance(self.ses, bool) or not isinstance(self.ses, int | float) \
                or not self.ses >= 0:
            raise ConfigError(f"method.stop_elbo_ses={self.ses!r} is not valid; it must be a "
                              "non-negative number of standard errors")

    @property
    def active(self) -> bool:
        """Whether the rule can stop a run."""
        return self.every > 0


# The per-estimate traces an ElboPlateauMonitor keeps.
TRACE_FIELDS = ("iterations", "elbo", "standard_error", "improvement",
                "improvement_standard_error")


@dataclass
class ElboPlateauMonitor:
    """Takes one estimate at a time (:meth:`update`: the per-draw log likelihoods and the KL)
    and says whether the plateau is reached (:meth:`plateaued`); keeps the trace of every
    estimate (iteration, ELBO, its own Monte Carlo standard error, improvement over the best
    so far and that improvement's paired standard error)."""

    rule: ElboPlateauRule
    best: Tensor | None = field(default=None, init=False, repr=False)
    without_improvement: int = field(default=0, init=False)
    iterations: list[int] = field(default_factory=list, init=False)
    elbo: list[float] = field(default_factory=list, init=False)
    standard_error: list[float] = field(default_factory=list, init=False)
    improvement: list[float] = field(default_factory=list, init=False)
    improvement_standard_error: list[float] = field(default_factory=list, init=False)

    def due(self, iteration: int) -> bool:
        """Whether an estimate is due after ``iteration`` (0-based) updates."""
        return self.rule.active and (iteration + 1) % self.rule.every == 0

    def update(self, iteration: int, log_likelihoods: Tensor, kl: float) -> None:
        """Record the estimate after ``iteration`` updates from its per-draw values."""
        values = log_likelihoods - kl
        n = int(values.shape[0])
        self.iterations.append(iteration + 1)
        self.elbo.append(float(values.mean()))
        self.standard_error.append(float(values.std(correction=1)) / math.sqrt(n))
        if self.best is None:
            self.best = values
            self.improvement.append(math.nan)
            self.improvement_standard_error.append(math.nan)
            return
        difference = values - self.best
        gain = float(difference.mean())
        paired = float(difference.std(correction=1)) / math.sqrt(n)
        self.improvement.append(gain)
        self.improvement_standard_error.append(paired)
        if gain > self.rule.ses * paired and gain > 0:
            self.best = values
            self.without_improvement = 0
        else:
            self.without_improvement += 1

    def snapshot(self) -> dict:
        """The monitor's memory (the best estimate's draws, the count without improvement and
        the trace) as tensors, numbers and lists, for a checkpoint."""
        return {"best": self.best, "without_improvement": self.without_improvement,
                **{name: list(getattr(self, name)) for name in TRACE_FIELDS}}

    def restore(self, snapshot: dict) -> None:
        """Continue from :meth:`snapshot`'s memory (the rule is the monitor's own)."""
        self.best = snapshot["best"]
        self.without_improvement = int(snapshot["without_improvement"])
        for name in TRACE_FIELDS:
            setattr(self, name, list(snapshot[name]))

    def plateaued(self) -> bool:
        """``patience`` estimates in a row without an improvement beyond ``ses`` paired
        standard errors."""
        return self.rule.active and self.without_improvement >= self.rule.patience

