"""The SSLA authors' refit: a fresh Adam on D plus one pseudo-point, for many points at once.

:func:`sgd_refits` runs the refit (fresh Adam, ``epochs`` passes over D + {(x, y)} in shuffled
minibatches, early stopping on the last minibatch loss) for R pseudo-points in one batched
loop: Adam is elementwise, so one optimizer over an ``[R, q]`` tensor is R independent
optimizers. :class:`SGDRefit` is the strategy network SSLA calls (``method.refit.name=sgd``):
its minibatch loss is the objective's
(:meth:`bench.methods.ssla.ssla_objectives.Objective.sgd_batch_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from bench.harness.progress import progress
from bench.methods.ssla.batched import batched_outputs
from bench.methods.ssla.refit_base import Refit, RefitLimits
from bench.models.mlp import MLPShape

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkSSLA

# The refits draw from generator stream ``seed * 3 + index`` of their structure here, fixed
# apart from the structure registry so that a new structure moves no existing draws.
REFIT_STREAMS = ("diag", "kfac", "dense")


@dataclass(frozen=True)
class SGDRefit(Refit):
    """The authors' refit: a fresh Adam(``lr``) for at most ``epochs`` passes over D plus the
    pseudo-point in minibatches of ``batch_size``, stopped once the last minibatch loss has not
    improved for ``patience`` epochs; ``chunk`` pseudo-points are refitted at a time."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    patience: int = 3
    chunk: int = 1024
    name: ClassVar[str] = "sgd"

    def limited(self, limits: RefitLimits) -> SGDRefit:
        """This refit with at most ``limits.epochs`` epochs (if set)."""
        return self if limits.epochs is None else replace(self, epochs=limits.epochs)

    def refits(self, method: NetworkSSLA, x: Tensor, grid: Tensor) -> Tensor:
        """Every (x, grid y) refitted from theta-hat, drawing from the structure's stream."""
        base = method.base
        m = grid.shape[-1]
        x_rep, y_flat = x.repeat_interleave(m, dim=0), grid.reshape(-1)
        stream = REFIT_STREAMS.index(method.structure)
        generator = torch.Generator().manual_seed(int(method.seed) * len(REFIT_STREAMS) + stream)

        def point_loss(f: Tensor, y: Tensor, thetas: Tensor) -> Tensor:
            return method.objective.sgd_batch_loss(method, f, y, thetas)

        thetas, epochs = sgd_refits(
            shape=base.shape, theta_hat=base.theta, x=method.x, y=method.y, x_new=x_rep,
            y_new=y_flat, point_loss=point_loss, settings=self, generator=generator)
        method.last["refit_epochs_mean"] = float(epochs.double().mean())
        return thetas


def sgd_refits(
    *, shape: MLPShape, theta_hat: Tensor, x: Tensor, y: Tensor, x_new: Tensor, y_new: Tensor,
    point_loss, settings: SGDRefit, generator: torch.Generator,
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
               y_new: Tensor, point_loss, settings: SGDRefit,
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
