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
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.flat import FlatBackend
from bench.curvature.structures import ggn
from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape
from bench.predictive.densities import Gaussian


class RegressionOutputs:
    """Gaussian noise of variance ``sigma0^2`` (eq. 1-2)."""

    def curvature(self, f: Tensor, noise_variance: float) -> Tensor:
        """``H_n = 1 / sigma0^2`` per training output."""
        return torch.full_like(f, 1.0 / noise_variance)

    def predictive(self, function: Gaussian, noise_variance: float) -> Gaussian:
        """The predictive of ``y*``: ``N(f(x), sigma0^2 + g^T Sigma g)`` (eq. 1)."""
        return Gaussian(function.mean, noise_variance + function.variance)


class BinaryClassificationOutputs:
    """A Bernoulli label with logit ``f`` (Appendix C)."""

    def curvature(self, f: Tensor, noise_variance: float) -> Tensor:
        """``H_n = s(1 - s)`` with ``s = sigmoid(f)`` (no noise variance)."""
        s = torch.sigmoid(f)
        return s * (1 - s)

    def predictive(self, function: Gaussian, noise_variance: float) -> Gaussian:
        """The linearised logit's Gaussian itself (the probability is taken from it later)."""
        return function


OUTPUT_LIKELIHOODS = {"regression": RegressionOutputs(),
                      "classification": BinaryClassificationOutputs()}
LIKELIHOODS = tuple(OUTPUT_LIKELIHOODS)


def output_likelihood(likelihood: str) -> RegressionOutputs | BinaryClassificationOutputs:
    """The likelihood named ``likelihood`` (a one-line ConfigError naming ``likelihood`` and
    the choices for any other name)."""
    return OUTPUT_LIKELIHOODS[require_choice("likelihood", likelihood, OUTPUT_LIKELIHOODS)]


def output_curvature(f: Tensor, likelihood: str, noise_variance: float = 1.0) -> Tensor:
    """``H_n`` per training output: ``1 / sigma0^2`` or ``s(1 - s)`` with ``s = sigmoid(f)``."""
    return output_likelihood(likelihood).curvature(f, noise_variance)


@dataclass(frozen=True)
class Covariance:
    """``Sigma`` in eq. (1): the Moore-Penrose inverse of a structured ``precision`` (blocks of
    ``Omega``, zero outside them, or ``Omega``'s diagonal)."""

    precision: Curvature

    def function_variance(self, jacobians: Tensor) -> Tensor:
        """``g^T Sigma g`` for each Jacobian row ``g`` of ``jacobians`` ``[m, p]``."""
        return self.precision.inverse_quadratic_form(jacobians)

    def dense(self) -> Tensor:
        """The ``p x p`` covariance (for tests and parameter-space distances)."""
        diagonal = self.precision.diagonal()
        return self.precision.solve(torch.diag(torch.ones_like(diagonal)))


def block_covariance(omega: Tensor, blocks: list[Tensor]) -> Covariance:
    """``sum_B [(Omega_BB)^-1]^0`` for disjoint index tensors ``blocks``: one block of all
    indices is the full LLA covariance, one block ``S`` the subnetwork surrogate, one block per
    layer Block Laplace. Variances are triangular solves with each block's Cholesky factor."""
    return Covariance(BlockDiagonal.of(omega, blocks))


def full_covariance(omega: Tensor) -> Covariance:
    """The full LLA covariance ``Omega^-1`` (eq. 1)."""
    return block_covariance(omega, [torch.arange(omega.shape[0])])


def subnetwork_covariance(omega: Tensor, subset: Tensor) -> Covariance:
    """``pinv([Omega_SS]^0) = [(Omega_SS)^-1]^0``: theta_S's covariance given the rest at MAP."""
    return block_covariance(omega, [torch.as_tensor(subset, dtype=torch.long)])


def layer_block_covariance(omega: Tensor, network: MLPShape) -> Covariance:
    """Block Laplace: one block per linear layer (weight and bias), inverted separately."""
    blocks = [torch.arange(part.start, part.stop) for part in network.layer_slices()]
    return block_covariance(omega, blocks)


def precision_diagonal_covariance(omega: Tensor) -> Covariance:
    """PrecisionDiag: ``Sigma = diag(1 / Omega_ii)``."""
    return Covariance(Diagonal(omega.diagonal()))


# The surrogates without a subnetwork by name (``method.covariance``), each built from
# ``Omega`` and the network whose layers it holds.
SURROGATE_COVARIANCES: dict[str, Callable[[Tensor, MLPShape], Covariance]] = {
    "full": lambda omega, network: full_covariance(omega),
    "precision_diag": lambda omega, network: precision_diagonal_covariance(omega),
    "block": layer_block_covariance}


@dataclass
class LinearisedLaplace:
    """A trained network at theta-hat with its Laplace precision ``Omega``."""

    network: MLPShape
    theta: Tensor
    omega: Tensor
    likelihood: str
    noise_variance: float = 1.0
    outputs: RegressionOutputs | BinaryClassificationOutputs = field(init=False, repr=False,
                                                                     compare=False)

    def __post_init__(self) -> None:
        self.outputs = output_likelihood(self.likelihood)

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
        return RegressionOutputs().predictive(self.function_predictive(x, covariance),
                                              self.noise_variance)

    def likelihood_predictive(self, x: Tensor, covariance: Covariance | None = None
                              ) -> Gaussian:
        """The likelihood's predictive: of ``y*`` for regression (:meth:`predictive`), the
        linearised logit's Gaussian for classification (:meth:`function_predictive`)."""
        return self.outputs.predictive(self.function_predictive(x, covariance),
                                       self.noise_variance)


def fit_linearised_laplace(network: MLPShape, theta: Tensor, x_train: Tensor,
                           likelihood: str, noise_variance: float = 1.0,
                           prior_variance: float = 1.0) -> LinearisedLaplace:
    """LLA at ``theta`` from the training inputs (the GGN needs no targets): ``Omega`` is the
    dense GGN weighted by the output curvature ``H_n``, plus the prior precision (eq. 2, C.1)."""
    outputs = output_likelihood(likelihood)
    with torch.no_grad():
        f = network.forward_1d(theta, x_train)
    weights = outputs.curvature(f, noise_variance)
    precision = ggn(FlatBackend(network, theta), x_train, "dense", weights)
    omega = precision.scaled(1.0, 1.0 / prior_variance).to_dense()
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
