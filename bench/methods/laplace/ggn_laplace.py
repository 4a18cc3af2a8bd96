"""The Laplace-GGN posterior, its three predictives and its marginal likelihood (GGN thesis,
Chapter 3), for a single-output network with a Gaussian or Bernoulli likelihood
(:mod:`bench.models.glm_likelihoods`) and the prior ``theta ~ N(0, delta^-1 I)``.

* Posterior (eq. 3.11-3.12, the exact posterior of a Bayesian linear regression, Theorem 3.1):
  precision ``delta I + G(theta*)``, ``G = sum_i J_i^T Lambda_i J_i``; mean ``theta*`` (the
  notes' [R] reading; :func:`blr_mean` gives eq. 3.12's mean, equal to ``theta*`` at a
  stationary point, as a convergence diagnostic).
* Predictives (:class:`GGNPredictive`): NN sampling (eq. 3.14, the network at sampled
  parameters), GLM sampling (eq. 3.15, the network linearised at the linearisation point, in
  closed form for the function's mean and variance) and the BLR predictive (eq. 3.16).
* Log evidence (eq. 3.17-3.18 at ``mu = theta*``, :func:`laplace_ggn_log_evidence`):
  ``sum_i log p(y_i | f_i) - delta/2 |theta*|^2 + P/2 log delta - 1/2 log det(delta I + G)``;
  the log-determinant is taken in function space (``N x N``, Theorem 3.2 / Sylvester's
  identity) when ``N < P``, which is exact and ``O(N^2 P)``. :func:`linearised_log_evidence`
  is eq. 3.19's exact ``N x N`` Gaussian marginal likelihood of the linearised model (plus eq.
  3.17's correction for the Bernoulli likelihood), equal to the former at a stationary
  ``theta*``.

The posterior's precision is a :class:`bench.curvature.dense.Dense` (``P x P``, Cholesky);
the ``N x N`` form is :class:`bench.curvature.function_space.FunctionSpaceGGN`. Everything is
float64 by the caller's tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import vmap

from bench.curvature.base import Curvature
from bench.curvature.dense import Dense
from bench.curvature.function_space import FunctionSpaceGGN
from bench.curvature.jacobians import jacobian_ggn
from bench.models.glm_likelihoods import BernoulliLikelihood, Likelihood
from bench.models.mlp import MLPShape


@dataclass(frozen=True)
class GaussianPosterior:
    """``N(mean, H^-1)`` for a precision ``H`` in any :mod:`bench.curvature` structure (a
    :class:`bench.curvature.dense.Dense` for the Laplace-GGN and the variational posteriors)."""

    mean: Tensor
    precision: Curvature

    @classmethod
    def from_precision(cls, mean: Tensor, precision: Tensor) -> GaussianPosterior:
        """The posterior with a dense precision matrix (symmetric positive definite)."""
        return cls(mean, Dense(precision))

    @property
    def n_params(self) -> int:
        """Dimension P."""
        return int(self.mean.shape[0])

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """``n`` draws ``[n, P]``: ``mean + H^-1/2 z`` with ``z ~ N(0, I)`` drawn from
        ``generator`` as ``[P, n]``."""
        z = torch.randn(self.n_params, n, generator=generator, dtype=self.mean.dtype)
        return self.mean + self.precision.inverse_sqrt(z.T)

    def solve(self, vector: Tensor) -> Tensor:
        """``H^-1 vector``."""
        return self.precision.solve(vector)

    def function_variance(self, jacobian: Tensor) -> Tensor:
        """``diag(J Sigma J^T)`` for rows ``J`` ``[m, P]``."""
        return self.precision.inverse_quadratic_form(jacobian)

    def covariance(self) -> Tensor:
        """The dense ``P x P`` covariance (tests, small P)."""
        return self.precision.solve(torch.eye(self.n_params, dtype=self.mean.dtype))

    def log_det_covariance(self) -> float:
        """``log det H^-1 = -log det H`` (the precision's structured log-determinant)."""
        return -float(self.precision.logdet())

    def covariance_trace(self) -> float:
        """``tr H^-1``: the sum of the marginal variances ``e_i^T H^-1 e_i``."""
        eye = torch.eye(self.n_params, dtype=self.mean.dtype, device=self.mean.device)
        return float(self.precision.inverse_quadratic_form(eye).sum())


def laplace_ggn_precision(jacobian: Tensor, weights: Tensor, prior_precision: float) -> Dense:
    """``delta I + J^T Lambda J`` (eq. 3.11 with ``Sigma_0 = delta^-1 I``), ``P x P``."""
    return Dense(jacobian_ggn(jacobian, weights), shift=float(prior_precision))


def log_det_ggn_precision(jacobian: Tensor, weights: Tensor, prior_precision: float) -> float:
    """``log det(delta I + J^T Lambda J)``: in function space (``N x N``,
    :class:`FunctionSpaceGGN`) when ``N < P``, else ``P x P``."""
    n, p = jacobian.shape
    precision = (FunctionSpaceGGN.fit(jacobian, weights, prior_precision) if n < p
                 else laplace_ggn_precision(jacobian, weights, prior_precision))
    return float(precision.logdet())


def laplace_ggn_log_evidence(likelihood: Likelihood, f: Tensor, y: Tensor, jacobian: Tensor,
                             theta: Tensor, prior_precision: float) -> float:
    """Laplace-GGN log marginal likelihood (eq. 3.17-3.18 at ``mu = theta*``).

    ``sum log p(y | f*) - delta/2 |theta*|^2 + P/2 log delta - 1/2 log det(delta I + G)``;
    for the Bernoulli likelihood eq. 3.17's correction cancels the Gaussian surrogate of eq.
    3.18, which leaves the same expression (notes section 4).
    """
    delta = float(prior_precision)
    p = int(theta.shape[0])
    weights = likelihood.hessian(f)
    return (float(likelihood.log_prob(f, y).sum()) - 0.5 * delta * float(theta @ theta)
            + 0.5 * p * math.log(delta)
            - 0.5 * log_det_ggn_precision(jacobian, weights, delta))


def gaussian_linear_log_evidence(targets: Tensor, mean: Tensor, features: Tensor,
                                 noise_variances: Tensor, prior_precision: float) -> float:
    """``log N(targets | mean, delta^-1 A A^T + diag(noise))``: the exact marginal likelihood
    of ``targets = mean + A theta + eps``, ``theta ~ N(0, delta^-1 I)`` (``N x N``)."""
    covariance = features @ features.T / prior_precision + torch.diag(noise_variances)
    cholesky = torch.linalg.cholesky(covariance)
    residual = (targets - mean).unsqueeze(1)
    white = torch.linalg.solve_triangular(cholesky, residual, upper=False)
    n = targets.shape[0]
    return float(-0.5 * (white**2).sum() - torch.log(cholesky.diagonal()).sum()
                 - 0.5 * n * math.log(2 * math.pi))


def _pseudo_observations(likelihood: Likelihood, f: Tensor, jacobian: Tensor,
                         theta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Theorem 3.1's BLR as ``targets = mean + A theta + eps``: (mean, A, noise variances).

    Bernoulli: ``y ~ N(s(f*) + Lambda J (theta - theta*), Lambda)``; Gaussian, written with
    unit ``Lambda`` and the noise ``sigma^2`` (thesis, end of Theorem 4.1's proof):
    ``y ~ N(f* + J (theta - theta*), sigma^2)``.
    """
    if isinstance(likelihood, BernoulliLikelihood):
        weights = likelihood.hessian(f)
        features = jacobian * weights.unsqueeze(1)
        return likelihood.mean(f) - features @ theta, features, weights
    noise = torch.full_like(f, float(likelihood.noise_variance))
    return f - jacobian @ theta, jacobian, noise


def linearised_log_evidence(likelihood: Likelihood, f: Tensor, y: Tensor, jacobian: Tensor,
                            theta: Tensor, prior_precision: float) -> float:
    """Eq. 3.19 (plus eq. 3.17's correction): the exact evidence of the BLR model of Theorem
    3.1 in ``N x N`` form, ``log N(y | g^-1(f*) - A theta*, delta^-1 A A^T + noise)``.

    Gaussian: ``log N(y | f* - J theta*, delta^-1 J J^T + sigma^2 I)``. Bernoulli: the same for
    the pseudo-observations, plus ``sum [log p(y | f*) - log N(y | s(f*), Lambda)]``. Equals
    :func:`laplace_ggn_log_evidence` when ``theta*`` is stationary.
    """
    mean, features, noise = _pseudo_observations(likelihood, f, jacobian, theta)
    evidence = gaussian_linear_log_evidence(y, mean, features, noise, prior_precision)
    if isinstance(likelihood, BernoulliLikelihood):
        surrogate = -0.5 * torch.log(2 * math.pi * noise) - (y - likelihood.mean(f)) ** 2 / (
            2 * noise)
        evidence += float((likelihood.log_prob(f, y) - surrogate).sum())
    return evidence


def blr_mean(likelihood: Likelihood, f: Tensor, y: Tensor, jacobian: Tensor, theta: Tensor,
             posterior: GaussianPosterior) -> Tensor:
    """Eq. 3.12 with ``mu_0 = 0``: ``Sigma sum_i J_i^T [r_i + Lambda_i J_i theta*]``."""
    weights = likelihood.hessian(f)
    rhs = jacobian.T @ (likelihood.residual(f, y) + weights * (jacobian @ theta))
    return posterior.solve(rhs)


def blr_log_evidence(likelihood: Likelihood, f: Tensor, y: Tensor, jacobian: Tensor,
                     theta: Tensor, prior_precision: float, mean: Tensor) -> float:
    """Eq. 3.18 (plus eq. 3.17's correction) at a given posterior ``mean``, in ``P x P`` form:
    the BLR pseudo-likelihood at ``mean``, ``-1/2 log(det Sigma_0 / det Sigma)`` and
    ``-delta/2 |mean|^2``. At eq. 3.12's mean it is the exact BLR evidence (equal to
    :func:`linearised_log_evidence` for any ``theta*``); at ``theta*`` it is
    :func:`laplace_ggn_log_evidence`."""
    delta = float(prior_precision)
    offset, features, noise = _pseudo_observations(likelihood, f, jacobian, theta)
    fitted = offset + features @ mean
    pseudo = -0.5 * torch.log(2 * math.pi * noise) - (y - fitted) ** 2 / (2 * noise)
    evidence = float(pseudo.sum())
    if isinstance(likelihood, BernoulliLikelihood):
        surrogate = -0.5 * torch.log(2 * math.pi * noise) - (y - likelihood.mean(f)) ** 2 / (
            2 * noise)
        evidence += float((likelihood.log_prob(f, y) - surrogate).sum())
    log_det = float(laplace_ggn_precision(jacobian, likelihood.hessian(f), delta).logdet())
    p = int(theta.shape[0])
    return evidence + 0.5 * p * math.log(delta) - 0.5 * log_det - 0.5 * delta * float(mean @ mean)


@dataclass(frozen=True)
class GGNPredictive:
    """The three predictives of a Gaussian posterior over a network's parameters.

    ``linearisation_point`` is where the GLM linearises the network: ``theta*`` for the
    Laplace-GGN, the final mean for the variational posteriors (notes section 5).
    """

    network: MLPShape
    posterior: GaussianPosterior
    linearisation_point: Tensor
    likelihood: Likelihood

    def network_outputs(self, thetas: Tensor, x: Tensor) -> Tensor:
        """``f(x; theta_s)`` ``[S, m]`` for parameter draws ``[S, P]`` (NN sampling, eq. 3.14)."""
        return vmap(self.network.forward_1d, in_dims=(0, None))(thetas, x)

    def linearised_outputs(self, thetas: Tensor, x: Tensor) -> Tensor:
        """``f(x; theta*) + J(x) (theta_s - theta*)`` ``[S, m]`` (GLM sampling, eq. 3.15)."""
        point = self.linearisation_point
        with torch.no_grad():
            f = self.network.forward_1d(point, x)
        return f + (thetas - point) @ self.network.jacobian(point, x).T

    def glm_function_moments(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Closed-form mean ``f(x; theta*) + J (mu - theta*)`` and variance ``J Sigma J^T`` of
        the linearised function (the Gaussian likelihood's GLM predictive, sigma^2 not added)."""
        point = self.linearisation_point
        with torch.no_grad():
            f = self.network.forward_1d(point, x)
        jacobian = self.network.jacobian(point, x)
        return (f + jacobian @ (self.posterior.mean - point),
                self.posterior.function_variance(jacobian))

    def blr_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What eq. 3.16 is built from at ``x``: the network's output ``f*`` at the
        linearisation point, the shift ``J (mu - theta*)`` and the function variance
        ``J Sigma J^T`` (one Jacobian and one triangular solve)."""
        point = self.linearisation_point
        with torch.no_grad():
            f = self.network.forward_1d(point, x)
        jacobian = self.network.jacobian(point, x)
        shift = jacobian @ (self.posterior.mean - point)
        return f, shift, self.posterior.function_variance(jacobian)

    def blr_predictive(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Eq. 3.16: mean ``g^-1(f*) + Lambda J (mu - theta*)`` and variance
        ``Lambda J Sigma J^T Lambda + Lambda`` (for a Gaussian likelihood with ``Lambda`` read
        as the noise ``sigma^2``: the GLM predictive of y)."""
        f, shift, variance = self.blr_terms(x)
        if isinstance(self.likelihood, BernoulliLikelihood):
            weights = self.likelihood.hessian(f)
            return self.likelihood.mean(f) + weights * shift, weights**2 * variance + weights
        noise = float(self.likelihood.noise_variance)
        return f + shift, variance + noise


def laplace_ggn_posterior(network: MLPShape, theta: Tensor, x: Tensor,
                          likelihood: Likelihood, prior_precision: float) -> GGNPredictive:
    """The Laplace-GGN posterior ``N(theta*, (delta I + G(theta*))^-1)`` and its predictives."""
    with torch.no_grad():
        f = network.forward_1d(theta, x)
    jacobian = network.jacobian(theta, x)
    posterior = GaussianPosterior(theta, laplace_ggn_precision(jacobian, likelihood.hessian(f),
                                                               prior_precision))
    return GGNPredictive(network, posterior, theta, likelihood)
