"""Linearised Laplace (LLA) for a single-output network and its covariance surrogates.

Paper (Raha, Khare, Patra), Section 2, eq. (1)-(2) and Appendix C, eq. (C.1):

* precision ``Omega = sum_n g(x_n) H_n g(x_n)^T + diag(v)^-1`` with ``g = d f / d theta`` at
  theta-hat, ``H_n = 1 / sigma0^2`` (regression, eq. 2) or ``H_n = e^f / (1 + e^f)^2 = s(1-s)``,
  ``s = sigmoid(f(x_n))`` (binary classification, eq. C.1); ``v`` = prior variances (all 1);
* predictive ``y* ~ N(f(x*), sigma0^2 + g(x*)^T Omega^-1 g(x*))`` (eq. 1); the function-space
  part ``g^T Sigma g`` is the variance of the linearised ``f(x*)`` itself.
* classification: ``P(y* = 1) = E[sigmoid(mu)]``. Appendix C writes ``mu ~ N(f, sigma0^2 +
  g^T Omega^-1 g)``; a Bernoulli model has no noise variance, so we read the ``sigma0^2`` there
  as carried over from eq. (1) and use ``mu ~ N(f, g^T Sigma g)`` (probit or Monte Carlo).

Surrogates replace ``Omega^-1`` by a covariance ``Sigma``:

* subnetwork on ``S`` (Section 1 and 3): the Moore-Penrose inverse of ``[Omega_SS]^0`` (Omega on
  ``S x S``, zero elsewhere). For block-diagonal matrices ``pinv(diag(A, 0)) = diag(A^-1, 0)``,
  so this is ``(Omega_SS)^-1`` on ``S x S`` and zero elsewhere: the covariance of ``theta_S``
  *conditional* on ``theta_rest = theta-hat`` (not the marginal ``(Omega^-1)_SS``). It is
  computed from a Cholesky factor of ``Omega_SS``, never with ``pinv``. laplace-torch's
  ``SubnetLaplace`` uses the same definition (it inverts the subnetwork's own GGN plus prior);
* PrecisionDiag (Appendix B): ``Sigma = diag(1 / Omega_ii)``;
* Block Laplace (Appendix B): Omega's diagonal blocks, one per linear layer (its weight and
  bias together), inverted separately.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape
from bench.predictive.densities import Gaussian

LIKELIHOODS = ("regression", "classification")


def output_curvature(f: Tensor, likelihood: str, noise_variance: float = 1.0) -> Tensor:
    """``H_n`` per training output: ``1 / sigma0^2`` or ``s(1 - s)`` with ``s = sigmoid(f)``."""
    require_choice("likelihood", likelihood, LIKELIHOODS)
    if likelihood == "regression":
        return torch.full_like(f, 1.0 / noise_variance)
    s = torch.sigmoid(f)
    return s * (1 - s)


def laplace_precision(jacobians: Tensor, curvature: Tensor,
                      prior_variance: float | Tensor = 1.0) -> Tensor:
    """``Omega = J^T diag(H) J + diag(v)^-1`` from Jacobian rows ``J`` ``[n, p]`` (eq. 2, C.1)."""
    omega = jacobians.T @ (curvature.unsqueeze(1) * jacobians)
    prior_precision = 1.0 / torch.as_tensor(prior_variance, dtype=omega.dtype)
    omega.diagonal().add_(prior_precision.expand(omega.shape[0]))
    return omega


@dataclass
class BlockCovariance:
    """``Sigma = sum_B [(Omega_BB)^-1]^0`` over disjoint index blocks ``B`` (zero elsewhere).

    One block of all indices is the full LLA covariance ``Omega^-1``; one block ``S`` is the
    subnetwork surrogate ``pinv([Omega_SS]^0)``; one block per layer is Block Laplace. Each
    block keeps the lower Cholesky factor of ``Omega_BB``; variances are triangular solves.
    """

    n_params: int
    blocks: tuple[Tensor, ...]
    cholesky_factors: tuple[Tensor, ...]

    def function_variance(self, jacobians: Tensor) -> Tensor:
        """``g^T Sigma g`` for each Jacobian row ``g`` of ``jacobians`` ``[m, p]``."""
        total = jacobians.new_zeros(jacobians.shape[0])
        for index, chol in zip(self.blocks, self.cholesky_factors, strict=True):
            whitened = torch.linalg.solve_triangular(chol, jacobians[:, index].T, upper=False)
            total = total + (whitened**2).sum(0)
        return total

    def dense(self) -> Tensor:
        """The ``p x p`` covariance (for tests and parameter-space distances)."""
        dtype = self.cholesky_factors[0].dtype if self.cholesky_factors else torch.float64
        sigma = torch.zeros(self.n_params, self.n_params, dtype=dtype)
        for index, chol in zip(self.blocks, self.cholesky_factors, strict=True):
            sigma[index.unsqueeze(1), index.unsqueeze(0)] = torch.cholesky_inverse(chol)
        return sigma


@dataclass
class DiagonalCovariance:
    """``Sigma = diag(variances)``; PrecisionDiag uses ``variances = 1 / diag(Omega)``."""

    variances: Tensor

    def function_variance(self, jacobians: Tensor) -> Tensor:
        """``g^T Sigma g`` for each Jacobian row ``g`` of ``jacobians`` ``[m, p]``."""
        return (jacobians**2 * self.variances).sum(1)

    def dense(self) -> Tensor:
        """The ``p x p`` covariance."""
        return torch.diag(self.variances)


Covariance = BlockCovariance | DiagonalCovariance


def block_covariance(omega: Tensor, blocks: list[Tensor]) -> BlockCovariance:
    """``sum_B [(Omega_BB)^-1]^0`` for disjoint index tensors ``blocks``."""
    factors = []
    for index in blocks:
        factors.append(torch.linalg.cholesky(omega[index.unsqueeze(1), index.unsqueeze(0)]))
    return BlockCovariance(omega.shape[0], tuple(blocks), tuple(factors))


def full_covariance(omega: Tensor) -> BlockCovariance:
    """The full LLA covariance ``Omega^-1`` (eq. 1)."""
    return block_covariance(omega, [torch.arange(omega.shape[0])])


def subnetwork_covariance(omega: Tensor, subset: Tensor) -> BlockCovariance:
    """``pinv([Omega_SS]^0) = [(Omega_SS)^-1]^0``: theta_S's covariance given the rest at MAP."""
    return block_covariance(omega, [torch.as_tensor(subset, dtype=torch.long)])


def layer_block_covariance(omega: Tensor, network: MLPShape) -> BlockCovariance:
    """Block Laplace: one block per linear layer (weight and bias), inverted separately."""
    blocks = [torch.arange(part.start, part.stop) for part in network.layer_slices()]
    return block_covariance(omega, blocks)


def precision_diagonal_covariance(omega: Tensor) -> DiagonalCovariance:
    """PrecisionDiag: ``Sigma = diag(1 / Omega_ii)``."""
    return DiagonalCovariance(1.0 / omega.diagonal())


@dataclass
class LinearisedLaplace:
    """A trained network at theta-hat with its Laplace precision ``Omega``."""

    network: MLPShape
    theta: Tensor
    omega: Tensor
    likelihood: str
    noise_variance: float = 1.0

    def mean(self, x: Tensor) -> Tensor:
        """``f_theta-hat(x)`` (the linearised model's mean; a logit for classification)."""
        with torch.no_grad():
            return self.network.forward_1d(self.theta, x)

    def jacobians(self, x: Tensor) -> Tensor:
        """Rows ``g(x)`` ``[m, p]``."""
        return self.network.jacobian(self.theta, x)

    def function_predictive(self, x: Tensor, covariance: Covariance | None = None) -> Gaussian:
        """``N(f(x), g^T Sigma g)``, the linearised function's distribution (full by default)."""
        covariance = covariance if covariance is not None else full_covariance(self.omega)
        return Gaussian(self.mean(x), covariance.function_variance(self.jacobians(x)))

    def predictive(self, x: Tensor, covariance: Covariance | None = None) -> Gaussian:
        """Regression predictive of ``y*`` (eq. 1): ``N(f(x), sigma0^2 + g^T Sigma g)``."""
        function = self.function_predictive(x, covariance)
        return Gaussian(function.mean, self.noise_variance + function.variance)


def fit_linearised_laplace(network: MLPShape, theta: Tensor, x_train: Tensor,
                           likelihood: str, noise_variance: float = 1.0,
                           prior_variance: float | Tensor = 1.0) -> LinearisedLaplace:
    """LLA at ``theta`` from the training inputs (the GGN needs no targets)."""
    require_choice("likelihood", likelihood, LIKELIHOODS)
    jacobians = network.jacobian(theta, x_train)
    with torch.no_grad():
        f = network.forward_1d(theta, x_train)
    curvature = output_curvature(f, likelihood, noise_variance)
    omega = laplace_precision(jacobians, curvature, prior_variance)
    return LinearisedLaplace(network, theta, omega, likelihood, noise_variance)


def probit_probability(mean: Tensor, variance: Tensor) -> Tensor:
    """``E[sigmoid(f)]`` for ``f ~ N(mean, variance)`` by the probit approximation
    ``sigmoid(mean / sqrt(1 + pi variance / 8))``."""
    return torch.sigmoid(mean / torch.sqrt(1 + math.pi * variance / 8))


def monte_carlo_probability(mean: Tensor, variance: Tensor, n_samples: int,
                            generator: torch.Generator) -> Tensor:
    """``E[sigmoid(f)]`` for ``f ~ N(mean, variance)`` by ``n_samples`` draws per point."""
    noise = torch.randn(n_samples, *mean.shape, generator=generator, dtype=mean.dtype)
    return torch.sigmoid(mean + variance.sqrt() * noise).mean(0)
