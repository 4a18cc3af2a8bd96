"""The GGN plus an isotropic prior in function space: only ``N x N`` matrices for ``N < P``.

``H = scale * J^T W J + shift * I`` with ``J`` the Jacobian rows ``[N, P]`` of ``N`` training
points and ``W = diag(w)`` their output curvatures (GGN thesis, Theorem 3.2). With
``R = W^1/2 J`` and ``c = scale / shift`` everything goes through ``B = I + c R R^T``
(``N x N``) and its Cholesky factor: by Sylvester's identity ``log det H = P log shift +
log det B``, and by Woodbury ``H^-1 = shift^-1 (I - c R^T B^-1 R)``; no inverse of ``W`` is
taken, so a saturated Bernoulli point with ``w = 0`` is fine. ``shift`` must be positive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.curvature.jacobians import jacobian_ggn


@dataclass(frozen=True)
class FunctionSpaceGGN(Curvature):
    """``scale * J^T diag(weights) J + shift * I`` held by ``jacobian`` ``[N, P]`` and
    ``weights`` ``[N]`` (negative weights count as zero)."""

    jacobian: Tensor
    weights: Tensor

    def __post_init__(self) -> None:
        if not self.shift > 0:
            raise ValueError(f"a function-space GGN needs a positive shift, not {self.shift}")

    @classmethod
    def fit(cls, jacobian: Tensor, weights: Tensor, prior_precision: float) -> FunctionSpaceGGN:
        """The Laplace-GGN precision ``delta I + J^T W J`` (``delta = prior_precision``)."""
        return cls(jacobian, weights, shift=float(prior_precision))

    @property
    def n_params(self) -> int:
        """Number of parameters P."""
        return int(self.jacobian.shape[1])

    @cached_property
    def root_weights(self) -> Tensor:
        """``sqrt(w)`` ``[N]``."""
        return self.weights.clamp_min(0).sqrt()

    @cached_property
    def b_cholesky(self) -> Tensor:
        """The lower Cholesky factor of ``B = I + (scale / shift) R R^T``."""
        rows = self.jacobian * self.root_weights.unsqueeze(1)
        b = rows @ rows.T / (self.shift / self.scale)
        b.diagonal().add_(1.0)
        return torch.linalg.cholesky(b)

    def to_dense(self) -> Tensor:
        """The P x P matrix."""
        eye = torch.eye(self.n_params, dtype=self.jacobian.dtype, device=self.jacobian.device)
        return self.scale * jacobian_ggn(self.jacobian, self.weights) + self.shift * eye

    def diagonal(self) -> Tensor:
        """``scale * sum_i w_i J_i^2 + shift``."""
        rows = self.jacobian * self.root_weights.unsqueeze(1)
        return self.scale * (rows**2).sum(0) + self.shift

    def diagonal_blocks(self) -> list[Tensor]:
        """One P x P block."""
        return [self.to_dense()]

    def logdet(self) -> Tensor:
        """``P log shift + log det B``."""
        return (self.n_params * math.log(self.shift)
                + 2 * torch.log(self.b_cholesky.diagonal()).sum())

    def solve(self, b: Tensor) -> Tensor:
        """``H^-1 b = b / shift - c R^T B^-1 R b / shift`` (Woodbury)."""
        flat = b.reshape(-1, b.shape[-1]).T
        root = self.root_weights.unsqueeze(1)
        inner = torch.cholesky_solve((self.jacobian @ flat) * root, self.b_cholesky)
        out = flat / self.shift - self.scale * (self.jacobian.T @ (root * inner)) / self.shift**2
        return out.T.reshape(b.shape)

    def inverse_quadratic_form(self, u: Tensor) -> Tensor:
        """``|u|^2 / shift - c |L_B^-1 R u|^2 / shift`` per row (clamped at 0)."""
        flat = u.reshape(-1, u.shape[-1])
        cross = (self.jacobian @ flat.T) * self.root_weights.unsqueeze(1)
        whitened = torch.linalg.solve_triangular(self.b_cholesky, cross, upper=False)
        value = ((flat**2).sum(1) / self.shift
                 - self.scale * (whitened**2).sum(0) / self.shift**2).clamp_min(0)
        return value.reshape(u.shape[:-1])

    def function_variance(self, jacobian: Tensor) -> Tensor:
        """``diag(J* H^-1 J*^T)`` for test rows ``J*`` ``[m, P]``: the variance of the
        linearised function under ``N(., H^-1)``."""
        return self.inverse_quadratic_form(jacobian)

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``H^-1/2 z`` with the symmetric root ``shift^-1/2 (I + R^T U f(Lambda) U^T R)``,
        ``R R^T = U Lambda U^T`` and ``f(l) = ((1 + c l)^-1/2 - 1) / l`` (``-c/2`` at 0)."""
        rows = self.jacobian * self.root_weights.unsqueeze(1)
        ratio = self.scale / self.shift
        eigenvalues, vectors = torch.linalg.eigh(rows @ rows.T)
        eigenvalues = eigenvalues.clamp_min(0)
        safe = torch.where(eigenvalues > 0, eigenvalues, torch.ones_like(eigenvalues))
        factor = torch.where(eigenvalues > 0, ((1 + ratio * eigenvalues).rsqrt() - 1) / safe,
                             torch.full_like(eigenvalues, -ratio / 2))
        flat = z.reshape(-1, z.shape[-1])
        projected = (flat @ rows.T) @ vectors
        out = flat + ((projected * factor) @ vectors.T) @ rows
        return (out / self.shift**0.5).reshape(z.shape)

    def plus(self, other: FunctionSpaceGGN) -> FunctionSpaceGGN:
        """The exact sum: both sets of rows, the weights carrying each scale."""
        return FunctionSpaceGGN(torch.cat([self.jacobian, other.jacobian]),
                                torch.cat([self.scale * self.weights.clamp_min(0),
                                           other.scale * other.weights.clamp_min(0)]),
                                shift=self.shift + other.shift)
