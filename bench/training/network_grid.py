"""Many small networks trained at once: one full-batch Adam run over a stack of parameter
vectors ``[B, P]``, one network per (prior precision, noise variance) setting of a grid.

Each network ``b`` minimises its own negative log joint
``L_b = -sum_i log p(y_i | f(x_i; theta_b)) + delta_b / 2 |theta_b|^2`` (a sum over the
data, so ``delta`` is the prior precision; GGN thesis Section 5.1). The loop minimises
``sum_b L_b``: ``L_b`` depends on ``theta_b`` only, so the gradient of the sum is every
network's own gradient, and Adam's update is elementwise, so the batched run is the same
optimisation as ``B`` separate runs (tested). The forward pass is ``torch.func.vmap`` of the
flat network over the stack (:class:`bench.models.mlp.MLPShape`), the loop is
:func:`bench.training.loop.fit_parameters`. :func:`polish_network_grid` then moves each
network's end point to a stationary point of its own ``L_b`` by full-batch L-BFGS
(:func:`bench.training.lbfgs_polish.polish_minimum`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import vmap

from bench.models.glm_likelihoods import Likelihood
from bench.models.mlp import MLPShape
from bench.training.lbfgs_polish import polish_minimum
from bench.training.loop import TrainingConfig, fit_parameters


@dataclass(frozen=True)
class GridFit:
    """Trained parameters ``[B, P]``, each network's final objective ``L_b`` and the norm of
    its gradient ``|grad L_b|`` at the end (a stationarity check). After
    :func:`polish_network_grid` also Adam's gradient norm before the polish and the L-BFGS
    iterations each network took and Adam's parameters (None / empty when not polished)."""

    theta: Tensor
    objective: Tensor
    gradient_norm: Tensor
    adam_gradient_norm: Tensor | None = None
    polish_iterations: tuple[int, ...] = ()
    adam_theta: Tensor | None = None


def negative_log_joint(network: MLPShape, theta: Tensor, x: Tensor, y: Tensor,
                       likelihood: Likelihood, prior_precision: Tensor) -> Tensor:
    """``L_b`` per network ``[B]`` for parameters ``[B, P]`` and precisions ``[B]``
    (a Gaussian likelihood's ``noise_variance`` is a float or a ``[B, 1]`` tensor)."""
    f = vmap(network.forward_1d, in_dims=(0, None))(theta, x)
    return (-likelihood.log_prob(f, y).sum(1)
            + 0.5 * prior_precision * (theta**2).sum(1))


def train_network_grid(network: MLPShape, x: Tensor, y: Tensor, likelihood: Likelihood,
                       prior_precision: Tensor, initial: Tensor, *, lr: float, steps: int,
                       schedule: str = "none", desc: str = "network grid") -> GridFit:
    """Full-batch Adam (``lr``, ``steps``; ``schedule="cosine"`` anneals the rate to 0 over the
    steps) from ``initial`` (``[P]``, shared by every network, or ``[B, P]``) on every network
    of the grid at once."""
    n_networks = int(prior_precision.shape[0])
    start = initial.expand(n_networks, -1) if initial.ndim == 1 else initial
    theta = start.detach().clone().requires_grad_(True)

    def loss(_rows) -> Tensor:
        return negative_log_joint(network, theta, x, y, likelihood, prior_precision).sum()

    config = TrainingConfig(lr=lr, max_epochs=steps, schedule=schedule)
    fit_parameters([theta], loss, n_rows=len(y), config=config, desc=desc)
    objective = negative_log_joint(network, theta, x, y, likelihood, prior_precision)
    (gradient,) = torch.autograd.grad(objective.sum(), theta)
    return GridFit(theta.detach(), objective.detach(), gradient.norm(dim=1))


def polish_network_grid(network: MLPShape, fit: GridFit, x: Tensor, y: Tensor,
                        likelihood: Likelihood, prior_precision: Tensor, *,
                        max_iterations: int, gradient_tolerance: float) -> GridFit:
    """Polish every network of ``fit`` on its own ``L_b`` by full-batch L-BFGS
    (:func:`bench.training.lbfgs_polish.polish_minimum`: until ``|grad L_b|`` is at most
    ``gradient_tolerance``, ``max_iterations`` iterations have run or it stalls), one network
    after the other. ``likelihood`` is shared by every network (a float noise variance).
    The result keeps each network's gradient norm before the polish as
    ``adam_gradient_norm`` and its parameters as ``adam_theta``."""
    results = []
    for b in range(int(prior_precision.shape[0])):
        def objective(point: Tensor, b: int = b) -> Tensor:
            return negative_log_joint(network, point.unsqueeze(0), x, y, likelihood,
                                      prior_precision[b:b + 1])[0]

        results.append(polish_minimum(objective, fit.theta[b], max_iterations=max_iterations,
                                      gradient_tolerance=gradient_tolerance))
    theta = torch.stack([result.theta for result in results])
    with torch.no_grad():
        objective = negative_log_joint(network, theta, x, y, likelihood, prior_precision)
    return GridFit(theta, objective,
                   torch.tensor([r.gradient_norm_after for r in results], dtype=theta.dtype),
                   torch.tensor([r.gradient_norm_before for r in results], dtype=theta.dtype),
                   tuple(r.iterations for r in results), fit.theta)
