"""A Gaussian over a flat parameter vector in covariance form, ``N(mean, W W^T + diag(d))``:
the form of the reference VI's guides (:mod:`bench.methods.variational.reference_vi`).

One class covers the three guides: mean field (``W`` with no columns), low rank plus diagonal
(``W`` ``[P, k]``, ``d > 0``) and full rank (``W`` the ``P x P`` lower Cholesky factor of the
covariance, ``d = 0``). It offers what :func:`bench.metrics.elbo.gaussian_elbo` reads from any
q: the mean, draws from an explicit generator, ``log det Sigma`` and ``tr Sigma``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import ConfigError


@dataclass(frozen=True)
class CovarianceGaussian:
    """``N(mean, factor factor^T + diag(diagonal))`` with ``mean`` ``[P]``, ``factor``
    ``[P, k]`` and ``diagonal`` ``[P]`` (non-negative; all positive unless ``factor`` is square
    and of full rank)."""

    mean: Tensor
    factor: Tensor
    diagonal: Tensor

    def __post_init__(self) -> None:
        p = int(self.mean.shape[0])
        if self.factor.dim() != 2 or self.factor.shape[0] != p or self.diagonal.shape != (p,):
            raise ConfigError(f"a Gaussian over {p} parameters needs a factor [{p}, k] and a "
                              f"diagonal [{p}], got {tuple(self.factor.shape)} and "
                              f"{tuple(self.diagonal.shape)}")
        if bool((self.diagonal < 0).any()):
            raise ConfigError("the covariance's diagonal part must be non-negative")
        if not bool((self.diagonal > 0).all()) and self.factor.shape[1] != p:
            raise ConfigError(f"a covariance with a zero diagonal part needs a square factor "
                              f"[{p}, {p}], got {tuple(self.factor.shape)}")

    @classmethod
    def full_rank(cls, mean: Tensor, scale_tril: Tensor) -> CovarianceGaussian:
        """``N(mean, L L^T)`` for a lower-triangular ``L``."""
        return cls(mean, scale_tril, torch.zeros_like(mean))

    @classmethod
    def mean_field(cls, mean: Tensor, scale: Tensor) -> CovarianceGaussian:
        """``N(mean, diag(scale^2))``."""
        return cls(mean, mean.new_zeros(mean.shape[0], 0), scale**2)

    @property
    def n_params(self) -> int:
        """Dimension P."""
        return int(self.mean.shape[0])

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """``n`` draws ``[n, P]``: ``mean + W z_1 + sqrt(d) * z_2`` with ``z = (z_1, z_2)``
        ``[n, k + P]`` drawn from ``generator``."""
        k = int(self.factor.shape[1])
        z = torch.randn(n, k + self.n_params, generator=generator, dtype=self.mean.dtype,
                        device=self.mean.device)
        return self.mean + z[:, :k] @ self.factor.T + self.diagonal.sqrt() * z[:, k:]

    def covariance(self) -> Tensor:
        """The dense ``P x P`` covariance."""
        return self.factor @ self.factor.T + torch.diag(self.diagonal)

    def log_det_covariance(self) -> float:
        """``log det Sigma``: ``sum log d + log det(I + W^T D^-1 W)`` (the matrix determinant
        lemma, a ``k x k`` Cholesky) when ``d > 0``, else ``2 log |det W|``."""
        if bool((self.diagonal > 0).all()):
            scaled = self.factor / self.diagonal.sqrt().unsqueeze(1)
            k = int(self.factor.shape[1])
            inner = torch.eye(k, dtype=self.mean.dtype, device=self.mean.device)
            cholesky = torch.linalg.cholesky(inner + scaled.T @ scaled)
            return float(self.diagonal.log().sum() + 2 * cholesky.diagonal().log().sum())
        return 2 * float(torch.linalg.slogdet(self.factor).logabsdet)

    def covariance_trace(self) -> float:
        """``tr Sigma = |W|_F^2 + sum d``."""
        return float((self.factor**2).sum() + self.diagonal.sum())

    def function_variance(self, jacobian: Tensor) -> Tensor:
        """``diag(J Sigma J^T)`` for rows ``J`` ``[m, P]``: ``|J W|^2`` row-wise plus
        ``J^2 d`` (what a GLM predictive reads from a posterior in precision form too)."""
        return (jacobian @ self.factor).pow(2).sum(1) + jacobian.pow(2) @ self.diagonal
