"""Regression metrics of a Predictive: interval coverage, Gaussian NLL, CRPS, RMSE.

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
