"""Warm-started Gauss-Newton refits from theta-hat (corrected SSLA's default refit).

:func:`gauss_newton_refits` takes Gauss-Newton steps from theta-hat with the training curvature
fixed at theta-hat and the pseudo-point's rank-one term handled by Sherman-Morrison, O(q^2)
per point (exact in one step for linear-Gaussian models). :class:`GaussNewtonRefit` is the
strategy network SSLA calls (``method.refit.name=gauss_newton``): its curvature term stays at
the anchor, where the steps take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.methods.ssla.batched import batched_outputs
from bench.methods.ssla.refit_base import Refit, dense_precision, require_gaussian_ggn
from bench.models.mlp import MLPShape

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkSSLA


@dataclass
class GaussNewtonRefit(Refit):
    """``steps`` undamped Gauss-Newton steps from theta-hat on the dense GGN precision at the
    anchor (built once per fit, whatever the Laplace ``structure``; see
    :class:`bench.methods.ssla.refit_newton.NewtonRefit` for why)."""

    steps: int = 1
    name: ClassVar[str] = "gauss_newton"
    _precision: Curvature | None = field(default=None, init=False, repr=False)

    def check(self, objective, curvature) -> None:
        """Gauss-Newton steps need the Gaussian log joint and the GGN."""
        require_gaussian_ggn(self.name, objective, curvature)

    def prepare(self, method: NetworkSSLA) -> dict:
        """Forget the previous fit's precision."""
        self._precision = None
        return {}

    def refits(self, method: NetworkSSLA, x: Tensor, grid: Tensor) -> Tensor:
        """The Gauss-Newton refit of every (x, grid y) from theta-hat."""
        base = method.base
        m = grid.shape[-1]
        x_rep, y_flat = x.repeat_interleave(m, dim=0), grid.reshape(-1)
        if self._precision is None:
            self._precision = dense_precision(method, method.anchor)
        thetas, _ = gauss_newton_refits(
            shape=base.shape, theta_hat=base.theta, x=x, grid=grid, precision=self._precision,
            noise_variance=base.noise_variance, steps=self.steps,
            extra_grad=lambda t: _gradient_change(method, t, x_rep, y_flat))
        return thetas

    def curvature_term(self, method: NetworkSSLA, thetas: Tensor, x_rep: Tensor,
                       y_flat: Tensor, hat_u_inv_u: Tensor | None) -> Tensor:
        """The curvature stays at theta-hat: ``hat_u_inv_u`` (per test input) over the grid."""
        m = len(x_rep) // len(hat_u_inv_u)
        return -0.5 * torch.log1p(hat_u_inv_u).repeat_interleave(m)


def _gradient_change(method: NetworkSSLA, thetas: Tensor, x_new: Tensor,
                     y_new: Tensor) -> Tensor:
    """Gradient of the log joint on D + {(x_r, y_r)} at ``thetas`` minus the training log
    joint's gradient at theta-hat (which the Gauss-Newton refit treats as zero)."""
    objective, shape = method.objective, method.base.shape

    def grad_at(points: Tensor, with_point: bool) -> Tensor:
        points = points.detach().requires_grad_(True)
        train, prior = objective.training_log_joint(method, points)
        total = train + prior
        if with_point:
            f_new = batched_outputs(shape, points, x_new.unsqueeze(1))[:, 0]
            total = total + objective.point_log_lik(method, f_new, y_new)
        return torch.autograd.grad(total.sum(), points)[0]
    return grad_at(thetas, True) - grad_at(method.base.theta.unsqueeze(0), False)


def gauss_newton_refits(
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
