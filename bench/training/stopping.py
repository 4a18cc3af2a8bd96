"""When an iterative fit has reached a stationary point: a rule on the gradient of the fit's
objective at the current mean and on the size of the mean's step, over a window of
iterations, used to stop natural-gradient VI and recorded with every fit (why it stopped,
its final gradient norm and step).

A band of the monitored loss alone is fooled by an iteration that oscillates beside a
stationary point: the loss repeats while the gradient stays large. This rule looks at the
gradient itself:

* a deterministic iteration (``averaged = False``, e.g. damped Gauss-Newton) is stationary
  when *every* iterate of the window has a gradient norm of at most ``gradient_tolerance``
  and a relative step ``|mu_{t+1} - mu_t| / max(|mu_t|, 1)`` of at most ``step_tolerance``;
  an oscillation keeps both large at every iterate, so it never passes;
* a stochastic iteration (``averaged = True``, one Monte Carlo draw per step) has a noisy
  gradient and a mean that keeps fluctuating around its fixed point, so the rule uses window
  averages: the norm of the gradient averaged over the window, and the mean's net drift over
  the window per iteration, ``|mu_{t+1} - mu_{t+1-W}| / (W max(|mu|, 1))``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bench.harness.errors import ConfigError, require_int_at_least

STOP_REASONS = ("stationary", "max_iterations")


@dataclass(frozen=True)
class StationarityRule:
    """The thresholds: ``window`` iterations (0 switches the rule off), the gradient norm
    ``gradient_tolerance`` (the objective's units per unit of the parameter) and the relative
    step ``step_tolerance``."""

    window: int = 0
    gradient_tolerance: float = 0.0
    step_tolerance: float = 0.0

    def __post_init__(self) -> None:
        require_int_at_least("method.stop_window", self.window, 0,
                             "use 0 (off) or a positive number of iterations")
        if self.window:
            for key in ("gradient_tolerance", "step_tolerance"):
                value = getattr(self, key)
                if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                    raise ConfigError(f"method.stop_{key}={value!r} is not valid; it must be "
                                      "positive when method.stop_window > 0")

    @property
    def active(self) -> bool:
        """Whether the rule can stop a run."""
        return self.window > 0


# What a StationarityMonitor remembers between iterations.
SNAPSHOT_FIELDS = ("gradients", "means", "gradient_norms", "steps", "window_gradient_trace",
                   "window_step_trace")


@dataclass
class StationarityMonitor:
    """Feeds on one iteration at a time (:meth:`update`) and says from the last ``window``
    whether the fit is stationary (:meth:`stationary`); keeps per-iteration traces of the
    window measures (``inf`` until the window is full)."""

    rule: StationarityRule
    averaged: bool
    gradients: deque = field(init=False, repr=False)
    means: deque = field(init=False, repr=False)
    gradient_norms: deque = field(init=False, repr=False)
    steps: deque = field(init=False, repr=False)
    window_gradient_trace: list[float] = field(default_factory=list, init=False)
    window_step_trace: list[float] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        window = max(self.rule.window, 1)
        self.gradients = deque(maxlen=window)
        self.means = deque(maxlen=window + 1)
        self.gradient_norms = deque(maxlen=window)
        self.steps = deque(maxlen=window)

    def update(self, mean: Tensor, gradient: Tensor, new_mean: Tensor) -> None:
        """Record the gradient of the objective at ``mean`` and the step to ``new_mean``."""
        if not self.means:
            self.means.append(mean)
        self.means.append(new_mean)
        self.gradient_norms.append(float(gradient.norm()))
        self.steps.append(float((new_mean - mean).norm()) / max(float(mean.norm()), 1.0))
        if self.averaged:
            self.gradients.append(gradient)
        self.window_gradient_trace.append(self.gradient_measure())
        self.window_step_trace.append(self.step_measure())

    @property
    def full(self) -> bool:
        """Whether a whole window has been seen."""
        return self.rule.active and len(self.gradient_norms) == self.rule.window

    def gradient_measure(self) -> float:
        """Deterministic: the largest gradient norm of the window; averaged: the norm of the
        window's mean gradient (``inf`` until the window is full)."""
        if not self.full:
            return math.inf
        if self.averaged:
            return float(torch.stack(list(self.gradients)).mean(0).norm())
        return max(self.gradient_norms)

    def gradient_standard_error(self) -> float | None:
        """Averaged rule: the Monte Carlo standard error of the window's mean gradient,
        ``sqrt(sum_j var_j / W)`` from the spread of the window's gradients (taken as
        independent draws); what a mean gradient of zero would show. None for a deterministic
        rule or before the window fills."""
        if not (self.averaged and self.full):
            return None
        stacked = torch.stack(list(self.gradients))
        return float((stacked.var(0).sum() / len(stacked)).sqrt())

    def step_measure(self) -> float:
        """Deterministic: the largest relative step of the window; averaged: the net relative
        drift of the mean over the window per iteration (``inf`` until the window is full)."""
        if not self.full:
            return math.inf
        if self.averaged:
            drift = float((self.means[-1] - self.means[0]).norm())
            return drift / (self.rule.window * max(float(self.means[-1].norm()), 1.0))
        return max(self.steps)

    def snapshot(self) -> dict[str, list]:
        """The monitor's memory as plain lists (tensors and floats), for a checkpoint."""
        return {name: list(getattr(self, name)) for name in SNAPSHOT_FIELDS}

    def restore(self, snapshot: dict[str, list]) -> None:
        """Continue from :meth:`snapshot`'s memory (the rule is the monitor's own)."""
        for name in SNAPSHOT_FIELDS:
            current = getattr(self, name)
            values = list(snapshot[name])
            setattr(self, name, deque(values, maxlen=current.maxlen)
                    if isinstance(current, deque) else values)

    def stationary(self) -> bool:
        """Both window measures within the rule's tolerances."""
        return (self.full and self.gradient_measure() <= self.rule.gradient_tolerance
                and self.step_measure() <= self.rule.step_tolerance)


def forgetting_iterations(step_size: float, tolerance: float) -> int:
    """Iterations ``t`` after which an exponential moving average with step ``gamma`` (the
    natural-gradient precision update) keeps a weight ``(1 - gamma)^t`` of at most
    ``tolerance`` on its start (1 at ``gamma = 1``)."""
    if step_size >= 1:
        return 1
    return max(1, math.ceil(math.log(tolerance) / math.log(1 - step_size)))
