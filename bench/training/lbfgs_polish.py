"""Full-batch L-BFGS polish of a minimum found by a first-order optimiser.

Adam with a constant learning rate stops near a minimum, not at it: its steps do not shrink
with the gradient, so the final gradient norm stays at the scale the rate allows. Methods
that assume a stationary point (a Laplace approximation at ``theta*``) can polish the
optimiser's end point with full-batch L-BFGS and a strong-Wolfe line search, which converges
superlinearly near a minimum. Deterministic for a deterministic objective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_positive

# L-BFGS iterations per restart (a restart drops the curvature history, which a line search
# that fails to make progress leaves stale).
ITERATIONS_PER_ROUND = 500
# A round ends when the objective changes by less than this between iterations: the float64
# resolution of an objective of order 1-100, below which the line search sees no decrease.
STALL_CHANGE = 1e-14


@dataclass(frozen=True)
class PolishResult:
    """The polished parameters, the gradient norm before and after, and the number of
    L-BFGS iterations run."""

    theta: Tensor
    gradient_norm_before: float
    gradient_norm_after: float
    iterations: int


def objective_gradient(objective: Callable[[Tensor], Tensor], theta: Tensor) -> Tensor:
    """Gradient of the scalar ``objective`` at ``theta``."""
    point = theta.detach().clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(objective(point), point)
    return gradient


def polish_minimum(objective: Callable[[Tensor], Tensor], theta: Tensor, *,
                   max_iterations: int, gradient_tolerance: float) -> PolishResult:
    """Minimise ``objective`` (a scalar function of a flat parameter vector) from ``theta`` by
    full-batch L-BFGS with a strong-Wolfe line search, restarting every
    :data:`ITERATIONS_PER_ROUND` iterations, until the gradient norm is at most
    ``gradient_tolerance``, ``max_iterations`` iterations have run, or it stalls (a round
    that ends early on :data:`STALL_CHANGE` or does not lower the objective): the gradient
    norm reached is then the float64 floor of the objective."""
    require_positive("method.polish_iterations", max_iterations)
    require_positive("method.polish_tolerance", gradient_tolerance)
    before = float(objective_gradient(objective, theta).norm())
    current, done, norm = theta.detach().clone(), 0, before
    value = float(objective(current))
    while norm > gradient_tolerance and done < max_iterations:
        point = current.clone().requires_grad_(True)
        budget = min(ITERATIONS_PER_ROUND, max_iterations - done)
        optimizer = torch.optim.LBFGS([point], lr=1, max_iter=budget, history_size=50,
                                      tolerance_grad=gradient_tolerance / point.numel() ** 0.5,
                                      tolerance_change=STALL_CHANGE,
                                      line_search_fn="strong_wolfe")

        def closure(point=point, optimizer=optimizer) -> Tensor:
            optimizer.zero_grad()
            loss = objective(point)
            loss.backward()
            return loss

        optimizer.step(closure)
        run = int(optimizer.state[point].get("n_iter", 0))
        done += max(run, 1)
        candidate = point.detach()
        candidate_value = float(objective(candidate))
        if run == 0 or not candidate_value <= value:
            break
        current, value = candidate, candidate_value
        norm = float(objective_gradient(objective, current).norm())
        if run < budget:
            break
    return PolishResult(current, before, norm, done)
