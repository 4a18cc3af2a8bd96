"""Refitting a trained network on D plus one pseudo-point, for many pseudo-points at once.

``sgd_refits`` runs the SSLA authors' refit (fresh Adam, ``epochs`` passes over D + {(x, y)}
in shuffled minibatches, early stopping on the last minibatch loss) for R pseudo-points in
one batched loop: Adam is elementwise, so one optimizer over an ``[R, q]`` tensor is R
independent optimizers. ``newton_refits`` takes warm-started Gauss-Newton steps from
theta-hat with the training curvature fixed at theta-hat and the pseudo-point's rank-one
term handled by Sherman-Morrison, O(q^2) per point (exact in one step for linear-Gaussian
models).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.harness.progress import progress
from bench.models.mlp import MLPShape

MAX_ACTIVATIONS = 2**23


def batched_outputs(shape: MLPShape, thetas: Tensor, x: Tensor) -> Tensor:
    """``f(x_rb; theta_r)`` for thetas ``[R, q]`` and inputs ``[R, b, d]`` or ``[b, d]``.

    Inputs shared by every theta (``[b, d]``) are evaluated in chunks of thetas so that one
    hidden layer's activations stay below :data:`MAX_ACTIVATIONS` numbers (R refits of a
    10k-point training set would otherwise need tens of GB).
    """
    if x.dim() == 2:
        chunk = max(1, MAX_ACTIVATIONS // (len(x) * max(shape.widths)))
        forward = torch.func.vmap(shape.forward_1d, in_dims=(0, None))
        if len(thetas) <= chunk:
            return forward(thetas, x)
        return torch.cat([forward(part, x) for part in thetas.split(chunk)])
    return torch.func.vmap(shape.forward_1d)(thetas, x)


@dataclass(frozen=True)
class SGDRefitSettings:
    """The authors' refit: a fresh Adam(``lr``) for at most ``epochs`` passes over D plus the
    pseudo-point in minibatches of ``batch_size``, stopped once the last minibatch loss has not
    improved for ``patience`` epochs; ``chunk`` pseudo-points are refitted at a time."""

    epochs: int
    batch_size: int
    lr: float
    patience: int
    chunk: int = 1024


def sgd_refits(
    *, shape: MLPShape, theta_hat: Tensor, x: Tensor, y: Tensor, x_new: Tensor, y_new: Tensor,
    point_loss, settings: SGDRefitSettings, generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """theta-tilde ``[R, q]`` and epochs run ``[R]`` for the pseudo-points ``(x_new, y_new)``.

    ``point_loss(f, y, thetas)`` gives the minibatch loss per refit ``[R]`` from outputs
    ``f`` ``[R, b]`` and targets ``[R, b]``.
    """
    results, epochs_run = [], []
    for start in progress(range(0, len(y_new), settings.chunk), "refit chunks"):
        stop = min(start + settings.chunk, len(y_new))
        theta, ran = _sgd_chunk(shape=shape, theta_hat=theta_hat, x=x, y=y,
                                x_new=x_new[start:stop], y_new=y_new[start:stop],
                                point_loss=point_loss, settings=settings, generator=generator)
        results.append(theta)
        epochs_run.append(ran)
    return torch.cat(results), torch.cat(epochs_run)


def _sgd_chunk(*, shape: MLPShape, theta_hat: Tensor, x: Tensor, y: Tensor, x_new: Tensor,
               y_new: Tensor, point_loss, settings: SGDRefitSettings,
               generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """One chunk of :func:`sgd_refits`."""
    r, n = len(y_new), len(y) + 1
    xs = torch.cat([x.expand(r, *x.shape), x_new.unsqueeze(1)], dim=1)
    ys = torch.cat([y.expand(r, len(y)), y_new.unsqueeze(1)], dim=1)
    theta = theta_hat.expand(r, -1).clone().requires_grad_(True)
    optimizer = torch.optim.Adam([theta], lr=settings.lr)
    best = torch.full((r,), torch.inf, dtype=theta.dtype)
    waited = torch.zeros(r, dtype=torch.long)
    active = torch.ones(r, dtype=torch.bool)
    frozen = theta.detach().clone()
    ran = torch.zeros(r, dtype=torch.long)
    rows = torch.arange(r).unsqueeze(1)
    for _ in range(settings.epochs):
        order = torch.argsort(torch.rand(r, n, generator=generator), dim=1)
        for batch in order.split(settings.batch_size, dim=1):
            optimizer.zero_grad()
            outputs = batched_outputs(shape, theta, xs[rows, batch])
            last = point_loss(outputs, ys[rows, batch], theta)
            last.sum().backward()
            optimizer.step()
            with torch.no_grad():
                theta[~active] = frozen[~active]
        ran += active.long()
        loss = last.detach()
        improved = loss < best
        best = torch.where(improved & active, loss, best)
        waited = torch.where(improved, torch.zeros_like(waited), waited + 1)
        newly_stopped = active & (waited >= settings.patience)
        frozen[newly_stopped] = theta.detach()[newly_stopped]
        active &= ~newly_stopped
        if not active.any():
            break
    return theta.detach(), ran


def newton_refits(
    *, shape: MLPShape, theta_hat: Tensor, x: Tensor, grid: Tensor, precision: Curvature,
    noise_variance: float, steps: int = 1, extra_grad=None,
) -> tuple[Tensor, Tensor]:
    """theta-tilde ``[N * m, q]`` for each test input ``x_i`` and grid value ``grid[i, j]``.

    theta-hat is treated as the stationary point of the training log joint, with GGN
    precision H (``precision``, solved against). The pseudo-point adds ``u u^T`` with
    ``u = J(x_i) / sigma`` and the gradient ``u (y - f(x_i)) / sigma``, so the first step is
    closed form in y: ``(H + u u^T)^{-1} u r / sigma`` by Sherman-Morrison. Later steps
    (``steps > 1``) add ``(H + u u^T)^{-1} extra_grad(thetas)``, where ``extra_grad`` is the
    full log joint's gradient minus its value at theta-hat. Also returns ``u^T H^{-1} u``
    per test input (the rank-one curvature increment).
    """
    sigma = noise_variance**0.5
    m = grid.shape[-1]
    u = shape.jacobian(theta_hat, x) / sigma
    hu = precision.solve(u)
    su = (u * hu).sum(-1, keepdim=True)
    direction = (hu / (1 + su)).repeat_interleave(m, dim=0)
    residual = (grid - shape.forward_1d(theta_hat, x).unsqueeze(-1)).reshape(-1, 1) / sigma
    theta = theta_hat + residual * direction
    u_rep, hu_rep, su_rep = (t.repeat_interleave(m, dim=0) for t in (u, hu, su))
    for _ in range(steps - 1):
        hg = precision.solve(extra_grad(theta))
        theta = theta + hg - hu_rep * (u_rep * hg).sum(-1, keepdim=True) / (1 + su_rep)
    return theta, su[:, 0]
