"""Regression metrics of a Predictive: interval coverage, Gaussian NLL, CRPS, RMSE, MSE and the
regression calibration error of Kuleshov et al. (2018).

Metrics read a Predictive and targets, never a method. Two interval conventions exist:
``z="paper"`` uses the rounded normal quantiles of the SSLA authors' coverage code
(mean ± z·sd with z = 1.96, 1.64, 1.15, 0.67), ``z="exact"`` the Predictive's own quantiles.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.predictive.densities import Gaussian

PAPER_Z = {95: 1.96, 90: 1.64, 75: 1.15, 50: 0.67}
Z_CONVENTIONS = ("paper", "exact")


def central_interval(predictive, probability: float) -> tuple[Tensor, Tensor]:
    """Central interval holding ``probability`` (e.g. 0.95) of the predictive, per point."""
    tail = (1 - probability) / 2
    return predictive.quantile(tail), predictive.quantile(1 - tail)


def interval(predictive, level: int, z: str = "exact") -> tuple[Tensor, Tensor]:
    """Central ``level``% interval per point (lower, upper)."""
    require_choice("metrics.z", z, Z_CONVENTIONS)
    if z == "paper":
        half = PAPER_Z[level] * predictive.variance.sqrt()
        return predictive.mean - half, predictive.mean + half
    return central_interval(predictive, level / 100)


def fraction_inside(lower: Tensor, upper: Tensor, truth: Tensor) -> float:
    """Fraction of points with ``lower <= truth <= upper``."""
    return float(((truth >= lower) & (truth <= upper)).double().mean())


def coverage(predictive, y: Tensor, level: int, z: str = "exact") -> float:
    """Percentage of ``y`` inside the central ``level``% interval."""
    lower, upper = interval(predictive, level, z)
    return 100.0 * fraction_inside(lower, upper, y.reshape(lower.shape).to(lower))


def rmse(predictive, y: Tensor) -> float:
    """Root mean squared error of the predictive mean."""
    mean = predictive.mean
    return math.sqrt(float(((mean.double() - y.reshape(mean.shape).double()) ** 2).mean()))


def nll(predictive, y: Tensor) -> float:
    """Mean negative log predictive density of ``y``."""
    mean = predictive.mean
    return -float(predictive.log_prob(y.reshape(mean.shape).to(mean)).double().mean())


def crps(predictive, y: Tensor) -> float:
    """Mean continuous ranked probability score (closed form for Gaussians)."""
    y = y.reshape(predictive.mean.shape).double()
    if isinstance(predictive, Gaussian):
        sd = predictive.variance.double().sqrt()
        z = (y - predictive.mean.double()) / sd
        normal = torch.distributions.Normal(0.0, 1.0)
        pdf, cdf = normal.log_prob(z).exp(), normal.cdf(z)
        return float((sd * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))).mean())
    return float(predictive.crps(y).mean())


def regression_metrics(predictive, y: Tensor, levels=(95, 90, 75, 50), z: str = "exact"):
    """Coverage at each level (``cov95`` ...), ``nll``, ``crps`` and ``rmse`` as a dict."""
    scores = {f"cov{level}": coverage(predictive, y, level, z) for level in levels}
    scores.update(nll=nll(predictive, y), crps=crps(predictive, y), rmse=rmse(predictive, y))
    return scores


def mse(predictive, y: Tensor) -> float:
    """Mean squared error of the predictive mean."""
    mean = predictive.mean
    return float(((mean.double() - y.reshape(mean.shape).double()) ** 2).mean())


def calibration_levels(n_levels: int = 10) -> Tensor:
    """The confidence levels p_j: ``n_levels`` evenly spaced from 0 to 1, both included."""
    if isinstance(n_levels, bool) or not isinstance(n_levels, int) or n_levels < 2:
        raise ValueError(f"n_levels={n_levels!r} must be an integer >= 2")
    return torch.linspace(0.0, 1.0, n_levels, dtype=torch.float64)


def regression_calibration_error(predictive, y: Tensor, n_levels: int = 10) -> float:
    """Kuleshov et al. (2018, eq. 9) as Laplace Redux computes it: ``T * mean_j (p_j -
    phat_j)^2`` with ``T`` test points, levels ``p_j`` from :func:`calibration_levels` and
    ``phat_j`` the fraction of points whose predictive CDF at the target is at most ``p_j``."""
    levels = calibration_levels(n_levels)
    mean = predictive.mean
    cdf = predictive.cdf(y.reshape(mean.shape).to(mean)).double().reshape(-1)
    observed = (cdf.unsqueeze(0) <= levels.unsqueeze(1)).double().mean(dim=1)
    return float(len(cdf) * ((levels - observed) ** 2).mean())
