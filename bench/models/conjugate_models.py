"""Conjugate models of the SSLA paper's validation experiments (notes §2-§4, §9).

Each model implements :class:`bench.models.parametric.LaplaceModel` with closed-form fits and
curvatures written as the authors' code computes them (so float32 runs reproduce their
rounding), and knows its exact posterior predictive for the metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.models.parametric import Data, newton_fit

LOG_2PI = math.log(2 * math.pi)


def _gaussian_log_lik(residuals: Tensor, sigma2: Tensor, with_constants: bool) -> Tensor:
    """Summed N(0, sigma2) log density of ``residuals`` in the authors' operation order."""
    m = residuals.numel()
    kernel = -1 / (2 * sigma2) * torch.sum(torch.pow(residuals, 2))
    if not with_constants:
        return kernel
    log_two_pi = torch.log(torch.tensor(2 * torch.pi, dtype=residuals.dtype))
    return -m / 2 * log_two_pi - m / 2 * torch.log(sigma2) + kernel


@dataclass
class NormalMeanModel:
    """y_i ~ N(theta, sigma2) with sigma2 known; prior theta ~ N(prior_mean, prior_var)."""

    sigma2: float
    prior_mean: float
    prior_var: float
    dtype: torch.dtype = torch.float64

    def _t(self, value: float) -> Tensor:
        return torch.tensor(value, dtype=self.dtype)

    def log_likelihood(self, theta: Tensor, data: Data) -> Tensor:
        """Full Gaussian log-likelihood (with constants), as the authors' ``ell``."""
        return _gaussian_log_lik(data.y - theta[0], self._t(self.sigma2), with_constants=True)

    def log_prior(self, theta: Tensor) -> Tensor:
        """log N(theta; prior_mean, prior_var)."""
        prior = torch.distributions.Normal(self._t(self.prior_mean), self._t(self.prior_var).sqrt())
        return prior.log_prob(theta[0])

    def information(self, theta: Tensor, data: Data) -> Tensor:
        """n / sigma2."""
        return (data.n * 1 / self._t(self.sigma2)).reshape(1, 1)

    def prior_precision(self, theta: Tensor) -> Tensor:
        """1 / prior_var."""
        return (1 / self._t(self.prior_var)).reshape(1, 1)

    def fit(self, data: Data, objective: str) -> Tensor:
        """MLE: the sample mean (computed as 1/n * sum, like the authors); MAP: posterior mean."""
        require_choice("protocol.fit_objective", objective, ("mle", "map"))
        if objective == "mle":
            return (1 / data.n * torch.sum(data.y)).reshape(1)
        precision = data.n / self._t(self.sigma2) + 1 / self._t(self.prior_var)
        weighted = self.prior_mean / self._t(self.prior_var) + data.y.sum() / self._t(self.sigma2)
        return (weighted / precision).reshape(1)

    def predict_point(self, theta: Tensor, x_new: Tensor | None) -> Tensor:
        """The fitted mean."""
        return theta[0]

    def exact_log_ppd(self, data: Data, y_grid: Tensor) -> Tensor:
        """Analytic posterior predictive N(mu_n, sigma_n^2 + sigma2) at ``y_grid`` (float64)."""
        y = data.y.double()
        post_var = 1 / (data.n / self.sigma2 + 1 / self.prior_var)
        post_mean = (self.prior_mean / self.prior_var + y.sum() / self.sigma2) * post_var
        scale = math.sqrt(post_var + self.sigma2)
        return torch.distributions.Normal(post_mean, scale).log_prob(y_grid.double())


@dataclass
class PoissonRateModel:
    """y_i ~ Poisson(lambda); prior lambda ~ Gamma(shape, rate)."""

    prior_shape: float
    prior_rate: float
    dtype: torch.dtype = torch.float64

    def log_likelihood(self, theta: Tensor, data: Data) -> Tensor:
        """sum(y log lambda - lambda) - sum(lgamma(y + 1))."""
        lam = theta[0]
        return torch.sum(data.y * torch.log(lam) - lam) - torch.sum(torch.lgamma(data.y + 1))

    def log_prior(self, theta: Tensor) -> Tensor:
        """log Gamma(lambda; shape, rate)."""
        prior = torch.distributions.Gamma(
            torch.tensor(self.prior_shape, dtype=self.dtype),
            torch.tensor(self.prior_rate, dtype=self.dtype),
        )
        return prior.log_prob(theta[0])

    def information(self, theta: Tensor, data: Data) -> Tensor:
        """sum(y) / lambda^2 (depends on the data, so on the candidate y in ASSLA)."""
        return (torch.sum(data.y) / theta[0] ** 2).reshape(1, 1)

    def prior_precision(self, theta: Tensor) -> Tensor:
        """(shape - 1) / lambda^2, the negative second derivative of the Gamma log density."""
        return ((self.prior_shape - 1) / theta[0] ** 2).reshape(1, 1)

    def fit(self, data: Data, objective: str) -> Tensor:
        """MLE: the sample mean; MAP: (sum y + shape - 1) / (n + rate)."""
        require_choice("protocol.fit_objective", objective, ("mle", "map"))
        if objective == "mle":
            return (1 / data.n * torch.sum(data.y)).reshape(1)
        return ((data.y.sum() + self.prior_shape - 1) / (data.n + self.prior_rate)).reshape(1)

    def predict_point(self, theta: Tensor, x_new: Tensor | None) -> Tensor:
        """The fitted rate."""
        return theta[0]

    def exact_log_ppd(self, data: Data, y_grid: Tensor) -> Tensor:
        """Negative binomial posterior predictive at integer ``y_grid`` (float64)."""
        r = float(data.y.double().sum()) + self.prior_shape
        p = (data.n + self.prior_rate) / (data.n + self.prior_rate + 1)
        from scipy import stats  # slow import (about 1 s): on use

        logpmf = stats.nbinom(r, p).logpmf(y_grid.double().numpy())
        return torch.from_numpy(logpmf)


@dataclass
class LinearGaussianModel:
    """y = X theta + eps, eps ~ N(0, sigma2) known; prior theta ~ N(prior_mean, prior_cov).

    ``with_constants=False`` keeps only the likelihood kernel -(y - x theta)^2 / (2 sigma2), the
    form of the prior-modularity toy (notes §9); differences of log-likelihoods are unchanged.
    """

    sigma2: float
    prior_mean: Tensor
    prior_cov: Tensor
    with_constants: bool = True

    def log_likelihood(self, theta: Tensor, data: Data) -> Tensor:
        """Gaussian log-likelihood of the residuals y - X theta."""
        sigma2 = torch.tensor(self.sigma2, dtype=data.y.dtype)
        return _gaussian_log_lik(data.y - data.x @ theta, sigma2, self.with_constants)

    def log_prior(self, theta: Tensor) -> Tensor:
        """log N(theta; prior_mean, prior_cov)."""
        prior = torch.distributions.MultivariateNormal(
            self.prior_mean.to(theta), covariance_matrix=self.prior_cov.to(theta)
        )
        return prior.log_prob(theta)

    def information(self, theta: Tensor, data: Data) -> Tensor:
        """X^T X / sigma2 (independent of y and theta)."""
        return data.x.T @ data.x / self.sigma2

    def prior_precision(self, theta: Tensor) -> Tensor:
        """Inverse prior covariance."""
        return torch.linalg.inv(self.prior_cov.to(theta))

    def fit(self, data: Data, objective: str) -> Tensor:
        """MLE: least squares; MAP: the posterior mean (ridge towards the prior mean)."""
        require_choice("protocol.fit_objective", objective, ("mle", "map"))
        gram, moment = data.x.T @ data.x, data.x.T @ data.y
        if objective == "mle":
            return torch.linalg.solve(gram, moment)
        prior_prec = self.prior_precision(data.y)
        lhs = gram / self.sigma2 + prior_prec
        rhs = moment / self.sigma2 + prior_prec @ self.prior_mean.to(data.y)
        return torch.linalg.solve(lhs, rhs)

    def predict_point(self, theta: Tensor, x_new: Tensor | None) -> Tensor:
        """x_new^T theta."""
        return x_new @ theta

    def posterior(self, data: Data) -> tuple[Tensor, Tensor]:
        """Exact posterior mean and covariance (float64)."""
        x, y = data.x.double(), data.y.double()
        prior_prec = torch.linalg.inv(self.prior_cov.double())
        cov = torch.linalg.inv(prior_prec + x.T @ x / self.sigma2)
        mean = cov @ (prior_prec @ self.prior_mean.double() + x.T @ y / self.sigma2)
        return mean, cov

    def exact_ppd_moments(self, data: Data, x_new: Tensor) -> tuple[float, float]:
        """Mean and variance of the exact Gaussian posterior predictive at ``x_new``."""
        mean, cov = self.posterior(data)
        x = x_new.double()
        return float(x @ mean), float(self.sigma2 + x @ cov @ x)

    def exact_log_ppd(self, data: Data, x_new: Tensor, y_grid: Tensor) -> Tensor:
        """log N(y; x theta_n, sigma2 + x Sigma_n x^T) at ``y_grid`` (float64)."""
        mean, var = self.exact_ppd_moments(data, x_new)
        moments = torch.tensor([mean, math.sqrt(var)], dtype=torch.float64)
        return torch.distributions.Normal(moments[0], moments[1]).log_prob(y_grid.double())


def newton_reference_fit(model, data: Data, objective: str) -> Tensor:
    """Closed-form-free fit of any of these models (tests compare it with the closed forms)."""
    start = model.fit(data, "mle")
    return newton_fit(model, data, objective, start)
