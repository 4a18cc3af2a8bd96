"""The objective of network SSLA and ASSLA: the likelihood, prior, grid and summary of a protocol.

:class:`AuthorsObjective` (``protocol=paper``) follows the authors' code (notes §1):
MSE-scaled likelihoods (training term a mean), a N(0, I) prior only in SSLA's increment, the
mean unit-noise GGN as curvature with their ``log(det(F) + 1e-6)`` emulated from
log-determinants (float32 ``det`` flushes to 0 below 1.4e-45), a grid of y-hat ± 1.96
std(y_train), and their KDE-bandwidth summary. :class:`GaussianObjective`
(``protocol=corrected``): Gaussian likelihood with the fitted noise, the prior in the fit and
the curvature H = GGN/sigma^2 + tau I, a fine grid normalised by quadrature. The config picks
one by protocol (:func:`objective_for`); the methods call it through :class:`Objective`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from bench.curvature.structures import STRUCTURES, empirical_fisher_weights
from bench.harness.errors import require_choice
from bench.methods.ssla.batched import batched_outputs
from bench.predictive.densities import QuadratureDensity, kde_bandwidth_gaussian

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkLaplaceBase

PAPER_NOISE_VARIANCE = 0.5
FLOAT32_TINY_LOG = math.log(2.0**-149)
FLOAT32_MAX_LOG = math.log(torch.finfo(torch.float32).max)


def authors_log_det_plus_eps(logdet: Tensor, eps: float = 1e-6) -> Tensor:
    """``log(det + eps)`` with ``det`` as float32 ``torch.det`` would return it (0 on underflow)."""
    det = torch.where(logdet < FLOAT32_TINY_LOG, torch.zeros_like(logdet), logdet.exp())
    det = torch.where(logdet > FLOAT32_MAX_LOG, torch.full_like(det, torch.inf), det)
    return torch.log(det + eps)


class Objective:
    """One protocol's likelihood, prior, candidate-y grid and predictive summary."""

    name: ClassVar[str]
    # Whether the objective is the Gaussian log joint (fitted noise, prior) the Newton refits
    # minimise.
    gaussian_log_joint: ClassVar[bool]

    def prepare(self, method: NetworkLaplaceBase) -> None:
        """Work done whenever ``method``'s anchor (and training curvature) is set."""

    def training_log_joint(self, method: NetworkLaplaceBase,
                           thetas: Tensor) -> tuple[Tensor, Tensor]:
        """Training log-likelihood and log prior at each of ``thetas`` ``[R, q]``."""
        raise NotImplementedError

    def point_log_lik(self, method: NetworkLaplaceBase, f: Tensor, y: Tensor) -> Tensor:
        """Log-likelihood of targets ``y`` at outputs ``f``, elementwise."""
        raise NotImplementedError

    def empirical_fisher_weights(self, method: NetworkLaplaceBase, residuals: Tensor) -> Tensor:
        """Per-point weights that turn the unit-noise GGN into this likelihood's empirical
        Fisher."""
        raise NotImplementedError

    def grid(self, method: NetworkLaplaceBase, x: Tensor, y_hat: Tensor,
             m: int) -> tuple[Tensor, Tensor | None]:
        """The candidate-y grid ``[N, m']`` around the plug-in predictions ``y_hat`` and, where
        the objective needs it, ``u^T H^-1 u`` at the anchor ``[N]`` (else None)."""
        raise NotImplementedError

    def summary(self, y_hat: Tensor, grid: Tensor, log_values: Tensor):
        """The predictive from the grid log-PPDs."""
        raise NotImplementedError

    def assla_log_values(self, method: NetworkLaplaceBase, x: Tensor, y_hat: Tensor,
                         grid: Tensor, u_inv_u: Tensor | None) -> Tensor:
        """ASSLA's log-PPD at each grid value: likelihood plus curvature increment at the
        anchor (the increment also goes to ``method.last["curvature_increment"]``)."""
        raise NotImplementedError

    def refit_curvature_term(self, method: NetworkLaplaceBase, thetas: Tensor, x_rep: Tensor,
                             y_flat: Tensor) -> Tensor:
        """SSLA's log-det increment of each refit ``thetas[r]`` with its point
        ``(x_rep[r], y_flat[r])``."""
        raise NotImplementedError

    def sgd_batch_loss(self, method: NetworkLaplaceBase, f: Tensor, y: Tensor,
                       thetas: Tensor) -> Tensor:
        """The SGD refit's minibatch loss per refit ``[R]`` (outputs and targets ``[R, b]``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class AuthorsObjective(Objective):
    """The authors' protocol (``protocol=paper``)."""

    name: ClassVar[str] = "paper"
    gaussian_log_joint: ClassVar[bool] = False

    def training_log_joint(self, method, thetas):
        """Mean negative squared error and the N(0, I) log prior."""
        f = batched_outputs(method.base.shape, thetas, method.x)
        log_lik = -((f - method.y) ** 2).mean(-1)
        return log_lik, _standard_normal_log_pdf(thetas)

    def point_log_lik(self, method, f, y):
        """``-(f - y)^2``, the authors' per-point term."""
        return -((f - y) ** 2)

    def empirical_fisher_weights(self, method, residuals):
        """``4 r^2``, the squared gradient of the authors' per-point loss ``-(f - y)^2``."""
        return empirical_fisher_weights(residuals, PAPER_NOISE_VARIANCE) / PAPER_NOISE_VARIANCE

    def grid(self, method, x, y_hat, m):
        """``m`` points over y-hat ± ``grid_width`` std(y_train); no ``u^T H^-1 u``."""
        half = method.grid_width * method.y_std
        offsets = torch.linspace(-half, half, m, dtype=y_hat.dtype)
        return y_hat.unsqueeze(-1) + offsets, None

    def summary(self, y_hat, grid, log_values):
        """The authors' KDE-bandwidth Gaussian."""
        return kde_bandwidth_gaussian(y_hat, grid, log_values)

    def assla_log_values(self, method, x, y_hat, grid, u_inv_u):
        """The plug-in log-likelihood plus one curvature constant over the whole grid."""
        constant = self._assla_curvature_constant(method, x, y_hat, grid)
        method.last["curvature_increment"] = float(constant)
        return -((y_hat.unsqueeze(-1) - grid) ** 2) + constant

    def _assla_curvature_constant(self, method, x: Tensor, y_hat: Tensor,
                                  grid: Tensor) -> Tensor:
        """½[logdet(F_D + eps I) - logdet(F_D + F_G / (N m d) + eps I)], one scalar (notes §1):
        F_G is the mean curvature over all N m grid rows, so even a y-dependent curvature
        gives one constant. The matrices are block-diagonal in every structure, so the
        log-determinants are taken block by block."""
        n, eps, m = len(method.y), 1e-6, grid.shape[-1]
        x_rows = x.repeat_interleave(m, dim=0)
        weights = method.curvature.weights(method, (grid - y_hat.unsqueeze(-1)).reshape(-1))
        grid_ggn = method.unit_noise_ggn(method.base.theta, x_rows, weights)
        divisor = len(x) * m * x.shape[1]
        train_blocks = method.ggn.scaled(1 / n, eps).diagonal_blocks()
        grid_blocks = grid_ggn.scaled(1 / (len(x_rows) * divisor)).diagonal_blocks()
        before = sum(torch.linalg.slogdet(b.double())[1].sum() for b in train_blocks)
        after = sum(torch.linalg.slogdet((b + g).double())[1].sum()
                    for b, g in zip(train_blocks, grid_blocks, strict=True))
        return 0.5 * (before - after).to(method.base.theta.dtype)

    def refit_curvature_term(self, method, thetas, x_rep, y_flat):
        """½[log(det(F_D(theta-hat)/n) + eps) - log(det(F_D(theta~)/n + F_x(theta~)) + eps)]
        with float32 ``det``'s underflow."""
        n = len(method.y)
        before = authors_log_det_plus_eps(method.ggn.scaled(1 / n).logdet().reshape(1))
        after = torch.stack([
            self._refit_logdet(method, theta, xi, yi)
            for theta, xi, yi in zip(thetas, x_rep, y_flat, strict=True)
        ])
        return 0.5 * (before - authors_log_det_plus_eps(after))

    def _refit_logdet(self, method, theta: Tensor, x_new: Tensor, y_new: Tensor) -> Tensor:
        """log det(F_D(theta)/n + F_x(theta)) in the chosen structure (``-inf`` if singular).

        Only whether float32 ``det`` underflows matters below ``2^-149``, so when Hadamard's
        bound (log det <= sum of the log diagonal, for any positive semi-definite matrix) is
        already below it, the bound is returned instead of the exact value: both give the
        authors' ``log(0 + 1e-6)``, and the K-FAC blocks need no dense slogdet.
        """
        n = len(method.y)
        if STRUCTURES[method.structure].exact_ggn and n + 1 < method.base.shape.n_params:
            return torch.tensor(-torch.inf, dtype=theta.dtype)
        with torch.no_grad():
            train = method.training_curvature(theta).scaled(1 / n)
            weight = method.curvature.point_weights(method, theta.unsqueeze(0),
                                                    x_new.unsqueeze(0), y_new.reshape(1))
            point = method.unit_noise_ggn(theta, x_new.unsqueeze(0), weight)
            bound = torch.log(train.diagonal() + point.diagonal()).sum()
            if bound < FLOAT32_TINY_LOG - 1.0:
                return bound
            return train.plus(point).logdet()

    def sgd_batch_loss(self, method, f, y, thetas):
        """The authors' MSE."""
        return ((f - y) ** 2).mean(-1)


@dataclass(frozen=True)
class GaussianObjective(Objective):
    """The corrected protocol (``protocol=corrected``): the Gaussian log joint at the base
    network's noise variance and prior precision."""

    name: ClassVar[str] = "corrected"
    gaussian_log_joint: ClassVar[bool] = True

    def prepare(self, method):
        """The posterior precision H = GGN / sigma^2 + tau I at the anchor."""
        base = method.base
        method.precision = method.ggn.scaled(1 / base.noise_variance, base.prior_precision)

    def training_log_joint(self, method, thetas):
        """Gaussian log-likelihood of the training data and the N(0, I / tau) log prior."""
        base = method.base
        f = batched_outputs(base.shape, thetas, method.x)
        return (_gaussian_log_pdf(method.y, f, base.noise_variance).sum(-1),
                _normal_log_pdf(thetas, base.prior_precision))

    def point_log_lik(self, method, f, y):
        """Gaussian log-likelihood with the fitted noise."""
        return _gaussian_log_pdf(y, f, method.base.noise_variance)

    def empirical_fisher_weights(self, method, residuals):
        """``r^2 / sigma^2`` (later scaled by ``1 / sigma^2`` with the GGN)."""
        return empirical_fisher_weights(residuals, method.base.noise_variance)

    def grid(self, method, x, y_hat, m):
        """``fine_grid_points`` over ± ``fine_grid_sds`` linearised predictive sds (``m`` is
        not used) and ``u^T H^-1 u`` at the anchor, which sets the width."""
        u_inv_u = method.u_inv_u(method.anchor.expand(len(x), -1), x)
        sd = (method.base.noise_variance * (1 + u_inv_u)).sqrt()
        steps = torch.linspace(-method.fine_grid_sds, method.fine_grid_sds,
                               method.fine_grid_points, dtype=y_hat.dtype)
        return y_hat.unsqueeze(-1) + sd.unsqueeze(-1) * steps, u_inv_u

    def summary(self, y_hat, grid, log_values):
        """The grid density normalised by quadrature."""
        return QuadratureDensity(grid, log_values)

    def assla_log_values(self, method, x, y_hat, grid, u_inv_u):
        """The plug-in Gaussian plus ``-½ log(1 + w u^T H^-1 u)`` per grid value (``w`` the
        curvature weight of the candidate's residual: 1 for the GGN)."""
        weights = method.curvature.grid_weights(method, grid - y_hat.unsqueeze(-1))
        increment = -0.5 * torch.log1p(weights * u_inv_u.unsqueeze(-1))
        method.last["curvature_increment"] = increment.tolist()
        return (_gaussian_log_pdf(grid, y_hat.unsqueeze(-1), method.base.noise_variance)
                + increment)

    def refit_curvature_term(self, method, thetas, x_rep, y_flat):
        """``-½ log(1 + w u(theta~)^T H^-1 u(theta~))``: the pseudo-point's rank-one increment
        at the refit, with the training curvature H kept at the anchor."""
        thetas = thetas.detach()
        weights = method.curvature.point_weights(method, thetas, x_rep, y_flat)
        return -0.5 * torch.log1p(weights * method.u_inv_u(thetas, x_rep))

    def sgd_batch_loss(self, method, f, y, thetas):
        """Minibatch mean of the Gaussian NLL plus the prior's share per training point."""
        base = method.base
        n = len(method.y) + 1
        nll = (f - y) ** 2 / (2 * base.noise_variance)
        return nll.mean(-1) + 0.5 * base.prior_precision * thetas.pow(2).sum(-1) / n


OBJECTIVES: dict[str, type[Objective]] = {"paper": AuthorsObjective,
                                          "corrected": GaussianObjective}


def objective_for(protocol: str) -> Objective:
    """The objective of ``protocol`` (the config's ``method.objective`` node)."""
    return OBJECTIVES[require_choice("protocol.name", protocol, OBJECTIVES)]()


def _gaussian_log_pdf(y: Tensor, mean: Tensor, variance: float) -> Tensor:
    return -0.5 * (y - mean) ** 2 / variance - 0.5 * math.log(2 * math.pi * variance)


def _normal_log_pdf(thetas: Tensor, precision: float) -> Tensor:
    q = thetas.shape[-1]
    return -0.5 * precision * thetas.pow(2).sum(-1) + 0.5 * q * math.log(precision / (2 * math.pi))


def _standard_normal_log_pdf(thetas: Tensor) -> Tensor:
    return _normal_log_pdf(thetas, 1.0)
